"""Which audiences a ManagedServiceIdentity job may have a token for, and where that token may
go (docs/behaviour.md#managedserviceidentity).

The app's identity holds data roles on the app's own storage account, where every job's secrets
are, and perhaps on more accounts (a role given on a resource group or a subscription reaches
every account in it): a storage token in the hands of a job's target reads them all. A token
for Azure Resource Manager can list the account's keys, which do the same. So no storage
audience is given at all, whichever account it names (the service cannot tell which accounts
its identity reaches), and a management audience only for a call to the management endpoint
itself, which is where such a token is meant to go.
"""

from __future__ import annotations

import itertools
from urllib.parse import urlsplit

# A storage account's services, each on a host of its own: `{account}.{service}.core.{cloud}`.
STORAGE_SERVICES = ("blob", "queue", "table", "file", "dfs", "web")
# Azure Storage as a whole, and the accounts of Azure DNS zone endpoints (`a.z1.blob.storage...`).
_STORAGE_AUDIENCE_HOST = "storage.azure.com"
_STORAGE_ZONE_SUFFIX = ".storage.azure.net"
# Azure Resource Manager in each cloud, under its current and its older (classic) audience.
MANAGEMENT_HOSTS = frozenset(
    {"management.azure.com", "management.usgovcloudapi.net", "management.chinacloudapi.cn"}
)
_MANAGEMENT_AUDIENCE_HOSTS = MANAGEMENT_HOSTS | {
    "management.core.windows.net",
    "management.core.usgovcloudapi.net",
    "management.core.chinacloudapi.cn",
}


def audience_refusal(audience: str, target: str) -> str | None:
    """Why a token for `audience` may not be sent to the `target` URI; None when it may. The
    reason reads after the audience's name (`audience: is a storage audience, ...`), and quotes
    neither the audience nor more of the target than its host."""
    host, target_host = _host(audience), _host(target)
    if _is_storage_host(host):
        return (
            "is a storage audience: its token would reach the storage the app's identity may "
            "read, the app's own account among them, where every job's secrets are"
        )
    if host in _MANAGEMENT_AUDIENCE_HOSTS and target_host not in MANAGEMENT_HOSTS:
        return (
            "is the Azure Resource Manager audience, whose token goes only to the management "
            f"endpoint ({', '.join(sorted(MANAGEMENT_HOSTS))}), not to {target_host}"
        )
    return None


def _host(uri: str) -> str:
    try:
        return (urlsplit(uri).hostname or "").rstrip(".")
    except ValueError:
        return ""


def _is_storage_host(host: str) -> bool:
    labels = host.split(".")
    return (
        host == _STORAGE_AUDIENCE_HOST
        or host.endswith(_STORAGE_ZONE_SUFFIX)
        or any(
            label in STORAGE_SERVICES and following == "core"
            for label, following in itertools.pairwise(labels)
        )
    )
