"""A storage connection string read as the Table and Queue SDKs read it: where each service is,
and the account's name and key.

Reading it here, rather than building an SDK client to ask, keeps the SDK clients (and requests
under their transport) off a cold start's path: the own storage client needs only these three
strings.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from azure.core.utils import parse_connection_string

from shared.settings import STORAGE, SettingError

# Azurite's development account, which `UseDevelopmentStorage=true` names (public, documented
# by Microsoft), and the endpoints the SDKs give it: Azurite's standard ports. (devhost.azurite,
# which runs on a Python without the project's packages, keeps its own copy of the two.)
DEVELOPMENT_ACCOUNT = "devstoreaccount1"
DEVELOPMENT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
Service = Literal["table", "queue"]
_DEVELOPMENT_ENDPOINTS: dict[Service, str] = {
    "table": f"http://127.0.0.1:10002/{DEVELOPMENT_ACCOUNT}",
    "queue": f"http://127.0.0.1:10001/{DEVELOPMENT_ACCOUNT}",
}


class ServiceAddress(NamedTuple):
    """One service of a storage account: its URL (as the SDK client's `url` gives it), and the
    account's name and key that sign its requests."""

    url: str
    account: str
    key: str


def service_address(connection: str, service: Service) -> ServiceAddress:
    """Where `service` is: its own endpoint (`TableEndpoint`, `QueueEndpoint`), else the
    account's under its protocol and suffix (https and core.windows.net by default)."""
    if connection.strip().rstrip(";").lower() == "usedevelopmentstorage=true":
        return ServiceAddress(_DEVELOPMENT_ENDPOINTS[service], DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
    try:
        found = parse_connection_string(connection, case_sensitive_keys=False)
    except ValueError as error:
        raise SettingError(f"{STORAGE}: not a connection string ({error})") from None
    account, key = found.get("accountname"), found.get("accountkey")
    if not account or not key:
        raise SettingError(f"{STORAGE}: a connection string with an AccountKey is needed")
    url = found.get(f"{service}endpoint")
    if not url:
        protocol = found.get("defaultendpointsprotocol", "https")
        url = f"{protocol}://{account}.{service}.{found.get('endpointsuffix', 'core.windows.net')}"
    if not url.lower().startswith("http"):
        url = f"https://{url}"  # as the SDKs take an endpoint named without its scheme
    return ServiceAddress(url.rstrip("/"), account, key)
