"""The app's own storage clients: identity-based in Azure, from a connection string locally.

In Azure the storage account has shared-key access off, so the app authenticates as the Function
App's managed identity, from the same `AzureWebJobsStorage__*` settings the Functions host reads.
Locally, Azurite takes the connection string.
"""

from __future__ import annotations

from typing import Any

from azure.core.credentials import TokenCredential
from azure.data.tables import TableServiceClient
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential
from azure.storage.queue import QueueClient

from shared.settings import STORAGE, SettingError, Settings, StorageIdentity
from shared.transport import with_pooled_transport


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
            connection, **with_pooled_transport(endpoint, options)
        )
    return TableServiceClient(
        identity.table_service_uri,
        credential=credential or storage_credential(identity),
        **with_pooled_transport(identity.table_service_uri, options),
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
        **with_pooled_transport(identity.queue_service_uri, options),
    )


def queue_from_connection_string(connection: str, queue: str, **options: Any) -> QueueClient:
    endpoint = QueueClient.from_connection_string(connection, queue).url
    return QueueClient.from_connection_string(
        connection, queue, **with_pooled_transport(endpoint, options)
    )


def _connection(settings: Settings) -> str:
    if not settings.storage_connection:
        raise SettingError(
            f"{STORAGE} (a connection string) or identity-based {STORAGE}__tableServiceUri and "
            f"{STORAGE}__queueServiceUri are needed"
        )
    return settings.storage_connection
