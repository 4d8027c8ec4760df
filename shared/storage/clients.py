"""The app's own storage clients: identity-based in Azure, from a connection string locally.

In Azure the storage account has shared-key access off, so the app authenticates as the Function
App's managed identity, from the same `AzureWebJobsStorage__*` settings the Functions host reads.
Locally, Azurite takes the connection string.
"""

from __future__ import annotations

from typing import Any

import requests
from azure.core.credentials import TokenCredential
from azure.core.pipeline.transport import RequestsTransport
from azure.data.tables import TableServiceClient
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential
from azure.storage.queue import QueueClient
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from shared.settings import STORAGE, SettingError, Settings, StorageIdentity

# Connections each storage client keeps open, against urllib3's "Connection pool is full" churn
# when more threads call storage at once: as many as the executor's delivery threads (128). At 64,
# two worker processes at 125-140 executions/s logged that warning up to 700 times a minute, each
# time closing a connection that a later call had to open again.
STORAGE_CONNECTIONS = 128


def storage_credential(identity: StorageIdentity) -> TokenCredential:
    """The credential the settings name: the managed identity, or the default chain."""
    if identity.credential == "managedidentity":
        return ManagedIdentityCredential(client_id=identity.client_id)
    return DefaultAzureCredential(managed_identity_client_id=identity.client_id)


def table_service(
    settings: Settings, credential: TokenCredential | None = None, **options: Any
) -> TableServiceClient:
    identity = settings.storage_identity
    if identity is None:
        connection = _connection(settings)
        endpoint = TableServiceClient.from_connection_string(connection).url
        return TableServiceClient.from_connection_string(
            connection, **with_storage_transport(endpoint, options)
        )
    return TableServiceClient(
        identity.table_service_uri,
        credential=credential or storage_credential(identity),
        **with_storage_transport(identity.table_service_uri, options),
    )


def queue_client(
    settings: Settings, queue: str, credential: TokenCredential | None = None, **options: Any
) -> QueueClient:
    identity = settings.storage_identity
    if identity is None:
        return queue_from_connection_string(_connection(settings), queue, **options)
    return QueueClient(
        identity.queue_service_uri,
        queue,
        credential=credential or storage_credential(identity),
        **with_storage_transport(identity.queue_service_uri, options),
    )


def queue_from_connection_string(connection: str, queue: str, **options: Any) -> QueueClient:
    endpoint = QueueClient.from_connection_string(connection, queue).url
    return QueueClient.from_connection_string(
        connection, queue, **with_storage_transport(endpoint, options)
    )


def with_storage_transport(endpoint: str, options: dict[str, Any]) -> dict[str, Any]:
    """`options` with the transport the app's storage clients use, which differs from the SDK's
    default in two ways.

    It keeps up to STORAGE_CONNECTIONS connections open rather than requests' 10. The executor
    alone calls storage from 32 threads; with more calls under way than the pool holds, each
    connection beyond it is closed after one call, and the next call opens a new one (the
    pipeline benchmark logged "Connection pool is full, discarding connection" about 10 times a
    second at 70 executions/s, as lateness rose).

    And it reads the environment once. By default requests looks up proxy settings (every
    environment variable, twice) on each call: about a tenth of the CPU of a storage call here,
    and more in the Functions host, whose environment is larger. The environment does not change
    while the process runs, so what requests would take from it for `endpoint` is read now: its
    proxies (NO_PROXY still counts) and a CA bundle (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) unless
    the options name one.

    The transport takes the client's options, as the SDK's own default transport does
    (`connection_verify`, timeouts).
    """
    with requests.Session() as probe:  # what requests would take from the environment, once
        environment = probe.merge_environment_settings(endpoint, {}, None, None, None)
    if environment["verify"] is not True and "connection_verify" not in options:
        options = {**options, "connection_verify": environment["verify"]}
    session = requests.Session()
    session.trust_env = False
    # Retries are the SDK pipeline's, never urllib3's (as in the SDK's own transport).
    no_retries = Retry(total=False, redirect=False, raise_on_status=False)
    adapter = HTTPAdapter(pool_maxsize=STORAGE_CONNECTIONS, max_retries=no_retries)
    for scheme in ("http://", "https://"):
        session.mount(scheme, adapter)
    transport = RequestsTransport(session=session, **options)  # the transport closes it
    return {**options, "transport": transport, "proxies": environment["proxies"] or None}


def _connection(settings: Settings) -> str:
    if not settings.storage_connection:
        raise SettingError(
            f"{STORAGE} (a connection string) or identity-based {STORAGE}__tableServiceUri and "
            f"{STORAGE}__queueServiceUri are needed"
        )
    return settings.storage_connection
