"""The app's own storage clients: identity-based in Azure, from a connection string locally.
Its tables and queues are spoken to over plain HTTP (`table_http`, `queue_http`), or, with
SCHEDULER_STORAGE_CLIENT=sdk, by the SDK's own clients (TableServiceClient, QueueClient).

In Azure the storage account has shared-key access off, so the app authenticates as the Function
App's managed identity, from the same `AzureWebJobsStorage__*` settings the Functions host reads.
Locally, Azurite takes the connection string.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, cast

from azure.core.credentials import TokenCredential

from shared.domain.wire import EntityValue, SdkOption
from shared.settings import (
    STORAGE,
    SettingError,
    Settings,
    StorageIdentity,
    environment_ca_bundle,
)
from shared.storage.connection_strings import service_address
from shared.storage.queue_http import Base64Text, QueueHttp, QueueLike
from shared.storage.storage_http import (
    QUEUE_VERSION,
    TRIES,
    BearerTokens,
    QueueSharedKeyLite,
    StorageEndpoint,
    TableSharedKeyLite,
)
from shared.storage.table_entities import substituted
from shared.storage.table_http import ListedTable, TableHttp, listed_tables
from shared.transport import with_pooled_transport

if TYPE_CHECKING:
    from azure.data.tables import TableServiceClient


def storage_credential(identity: StorageIdentity) -> TokenCredential:
    """The credential the settings name: the managed identity, or the default chain."""
    # Imported here: azure-identity is a tenth of a second or more of every cold start's import,
    # and only storage reached by identity (in Azure) needs it, once per process.
    from azure.identity import DefaultAzureCredential, ManagedIdentityCredential  # noqa: PLC0415

    if identity.credential == "managedidentity":
        return ManagedIdentityCredential(client_id=identity.client_id)
    return DefaultAzureCredential(managed_identity_client_id=identity.client_id)


class TableAccount:
    """The app's tables, each spoken to over plain HTTP (`TableHttp`): the same three calls as
    the SDK's TableServiceClient, so that the store runs on either (tests hand it the SDK's, to
    count or fail its requests)."""

    def __init__(self, endpoint: StorageEndpoint) -> None:
        self._endpoint = endpoint
        self.url = endpoint.url

    def get_table_client(self, table_name: str) -> TableHttp:
        return TableHttp(self._endpoint, table_name)

    def create_table(self, table_name: str) -> TableHttp:
        """Create the table; ResourceExistsError if it is there already (as with the SDK)."""
        table = self.get_table_client(table_name)
        table.create()
        return table

    def query_tables(
        self,
        query_filter: str,
        *,
        parameters: Mapping[str, EntityValue] | None = None,
        results_per_page: int | None = None,
    ) -> Iterator[ListedTable]:
        """The account's tables that match (`@name` in the filter stands for a parameter)."""
        query = substituted(query_filter, parameters)
        return listed_tables(self._endpoint, query, results_per_page)


def table_service(
    settings: Settings, credential: TokenCredential | None = None, **options: SdkOption
) -> TableAccount | TableServiceClient:
    """`options`: the SDK client's; of them, the own client takes `raw_request_hook` (called on
    every try of every request) and `connection_verify` (a CA bundle). With the setting `sdk`,
    the SDK's TableServiceClient itself."""
    identity = settings.storage_identity
    if settings.storage_client == "sdk":
        return _sdk_tables(settings, credential, options)
    if identity is None:
        return tables_from_connection_string(_connection(settings), **options)
    signer = BearerTokens(credential or storage_credential(identity))
    return _account(identity.table_service_uri, signer, options)


def _sdk_tables(
    settings: Settings, credential: TokenCredential | None, options: dict[str, SdkOption]
) -> TableServiceClient:
    # Imported here, as the Queue SDK is below: only this setting builds the SDK's clients.
    from azure.data.tables import TableServiceClient  # noqa: PLC0415

    identity = settings.storage_identity
    if identity is None:
        connection = _connection(settings)
        endpoint = service_address(connection, "table").url
        return TableServiceClient.from_connection_string(
            connection, **with_pooled_transport(endpoint, options)
        )
    endpoint = identity.table_service_uri
    return TableServiceClient(
        endpoint,
        credential=credential or storage_credential(identity),
        **with_pooled_transport(endpoint, options),
    )


def tables_from_connection_string(connection: str, **options: SdkOption) -> TableAccount:
    url, account, key = service_address(connection, "table")
    return _account(url, TableSharedKeyLite(account, key), options)


def _account(
    url: str, signer: TableSharedKeyLite | BearerTokens, options: dict[str, SdkOption]
) -> TableAccount:
    unknown = set(options) - _TABLE_OPTIONS
    if unknown:
        raise TypeError(f"table clients take no {', '.join(sorted(unknown))}")
    endpoint = StorageEndpoint(
        url,
        signer,
        on_request=options.get("raw_request_hook"),
        verify=options.get("connection_verify", _environment_verify()),
    )
    return TableAccount(endpoint)


_TABLE_OPTIONS = frozenset({"raw_request_hook", "connection_verify"})


def queue_client(
    settings: Settings, queue: str, credential: TokenCredential | None = None, **options: SdkOption
) -> QueueLike:
    """One of the app's queues, spoken to over plain HTTP (`QueueHttp`). `options`: of the SDK
    client's, those QueueHttp takes: `message_encode_policy` and `message_decode_policy`,
    `raw_request_hook` (called on every try of every request), `connection_verify` (a CA
    bundle) and `retry_total` (retries after the first try, at most TRIES - 1)."""
    identity = settings.storage_identity
    if settings.storage_client == "sdk":
        return _sdk_queue(settings, queue, credential, options)
    if identity is None:
        return queue_from_connection_string(_connection(settings), queue, **options)
    signer = BearerTokens(credential or storage_credential(identity))
    return _queue(identity.queue_service_uri, queue, signer, options)


def _sdk_queue(
    settings: Settings,
    queue: str,
    credential: TokenCredential | None,
    options: dict[str, SdkOption],
) -> QueueLike:
    """The SDK's QueueClient for one of the app's queues (it takes the same options)."""
    # Imported here: the Queue SDK is a tenth of a second of a cold start, and only this
    # setting (SCHEDULER_STORAGE_CLIENT=sdk) speaks to the app's queues through it.
    from azure.storage.queue import (  # noqa: PLC0415
        QueueClient,
        QueueServiceClient,
        TextBase64EncodePolicy,
    )

    if isinstance(options.get("message_encode_policy"), Base64Text):
        options = {**options, "message_encode_policy": TextBase64EncodePolicy()}
    identity = settings.storage_identity
    if identity is None:
        connection = _connection(settings)
        url = QueueServiceClient.from_connection_string(connection).url
        client = QueueClient.from_connection_string(
            connection, queue, **with_pooled_transport(url, options)
        )
        return cast(QueueLike, client)
    url = identity.queue_service_uri
    client = QueueClient(
        url,
        queue,
        credential=credential or storage_credential(identity),
        **with_pooled_transport(url, options),
    )
    return cast(QueueLike, client)


def queue_from_connection_string(connection: str, queue: str, **options: SdkOption) -> QueueHttp:
    url, account, key = queue_service(connection)
    return _queue(url, queue, QueueSharedKeyLite(account, key), options)


def queue_service(connection: str) -> tuple[str, str, str]:
    """The queue service's URL (with the slash the Queue SDK's `url` ends in), the account and
    its key."""
    url, account, key = service_address(connection, "queue")
    return f"{url}/", account, key


_QUEUE_OPTIONS = frozenset(
    {
        "message_encode_policy",
        "message_decode_policy",
        "raw_request_hook",
        "connection_verify",
        "retry_total",
    }
)


def _queue(
    url: str, queue: str, signer: QueueSharedKeyLite | BearerTokens, options: dict[str, SdkOption]
) -> QueueHttp:
    unknown = set(options) - _QUEUE_OPTIONS
    if unknown:
        raise TypeError(f"queue clients take no {', '.join(sorted(unknown))}")
    endpoint = StorageEndpoint(
        url,
        signer,
        version=QUEUE_VERSION,
        on_request=options.get("raw_request_hook"),
        verify=options.get("connection_verify", _environment_verify()),
        tries=options.get("retry_total", TRIES - 1) + 1,
    )
    return QueueHttp(
        endpoint,
        queue,
        message_encode_policy=options.get("message_encode_policy"),
        message_decode_policy=options.get("message_decode_policy"),
    )


def _environment_verify() -> str | bool:
    """The CA bundle requests would take from the environment (REQUESTS_CA_BUNDLE, ...)."""
    return environment_ca_bundle() or True


def _connection(settings: Settings) -> str:
    if not settings.storage_connection:
        raise SettingError(
            f"{STORAGE} (a connection string) or identity-based {STORAGE}__tableServiceUri and "
            f"{STORAGE}__queueServiceUri are needed"
        )
    return settings.storage_connection
