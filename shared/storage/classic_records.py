"""The classic API's own records: its cloud services, and the request id of each change it made,
which its clients poll for (see shared/api/classic/serving.py). A subscription's rows share a
partition.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from shared.domain.ids import CloudServiceId
from shared.storage.documents import DocumentTable, Preconditions, StoredCloudService
from shared.storage.keys import table_key
from shared.storage.table_http import TableLike

CLOUD_SERVICES_TABLE = "cloudservices"
OPERATIONS_TABLE = "operations"


class ClassicRecords:
    """The cloud services table and the operations table."""

    def __init__(self, cloud_services: TableLike, operations: TableLike) -> None:
        self._cloud_services = DocumentTable(
            cloud_services, cloud_service_id_of, dict, dict, "cloud service"
        )
        self._operations = operations

    def cloud_service(self, cloud_service: CloudServiceId) -> StoredCloudService | None:
        return self._cloud_services.get(
            table_key(cloud_service.subscription), table_key(cloud_service.name)
        )

    def cloud_services(self, subscription: str) -> list[StoredCloudService]:
        """A subscription's cloud services, in name order."""
        return list(self._cloud_services.query("PartitionKey eq @pk", pk=table_key(subscription)))

    def create_cloud_service(
        self, cloud_service: CloudServiceId, document: dict[str, str]
    ) -> StoredCloudService:
        """Create a cloud service; EtagMismatch if one of that name exists."""
        stored, _ = self._cloud_services.save(
            partition=table_key(cloud_service.subscription), row=table_key(cloud_service.name),
            columns={"Subscription": cloud_service.subscription, "Name": cloud_service.name},
            document=document, preconditions=Preconditions(if_none_match="*"),
        )  # fmt: skip
        return stored

    def delete_cloud_service(self, cloud_service: CloudServiceId) -> bool:
        """Delete a cloud service's own record (its collections are the caller's to delete)."""
        return self._cloud_services.delete(
            table_key(cloud_service.subscription), table_key(cloud_service.name), Preconditions()
        )

    def record_operation(self, subscription: str, request_id: str) -> None:
        """Keep a change's request id, for the clients that poll for its outcome."""
        self._operations.upsert_entity(
            {"PartitionKey": table_key(subscription), "RowKey": request_id}
        )

    def operation_recorded(self, subscription: str, request_id: str) -> bool:
        try:
            self._operations.get_entity(table_key(subscription), request_id)
        except ResourceNotFoundError:
            return False
        return True

    def remove_operations_before(self, instant: datetime) -> int:
        """Forget the changes recorded before `instant`; how many were forgotten."""
        old = list(
            self._operations.query_entities(
                "Timestamp lt @instant", parameters={"instant": instant},
                select=["PartitionKey", "RowKey"],
            )
        )  # fmt: skip
        for entity in old:
            with contextlib.suppress(ResourceNotFoundError):
                self._operations.delete_entity(entity["PartitionKey"], entity["RowKey"])
        return len(old)


def cloud_service_id_of(entity: Any) -> CloudServiceId:
    return CloudServiceId(entity["Subscription"], entity["Name"])
