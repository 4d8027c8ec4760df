"""Role assignments of this service: a principal given a role at a subscription or resource group.

All of them live in one partition (a deployment has few), each row named by the assignment's
name (a GUID, as ARM names role assignments), with the principal's object id in a column that
the per-request lookup filters on.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError

from shared.storage.table_http import TableLike, TableServiceLike

ASSIGNMENTS_TABLE = "roleassignments"
_PARTITION = "assignments"


@dataclass(frozen=True)
class Assignment:
    name: str
    principal_id: str  # the object id of a user, group member or app
    role: str  # an app role's value, such as Scheduler.Reader
    scope: str  # /subscriptions/{s} or /subscriptions/{s}/resourceGroups/{g}


class RoleAssignments:
    def __init__(self, table: TableLike) -> None:
        self._table = table

    @classmethod
    def in_service(
        cls, service: TableServiceLike, table: str = ASSIGNMENTS_TABLE
    ) -> RoleAssignments:
        with contextlib.suppress(ResourceExistsError):
            service.create_table(table)
        return cls(service.get_table_client(table))

    def save(self, assignment: Assignment) -> None:
        self._table.upsert_entity(
            {
                "PartitionKey": _PARTITION,
                "RowKey": assignment.name,
                "PrincipalId": assignment.principal_id.lower(),
                "Role": assignment.role,
                "Scope": assignment.scope,
            }
        )

    def delete(self, name: str) -> bool:
        """Whether there was such an assignment."""
        try:
            self._table.get_entity(_PARTITION, name)
        except ResourceNotFoundError:
            return False
        self._table.delete_entity(_PARTITION, name)
        return True

    def get(self, name: str) -> Assignment | None:
        try:
            return _assignment(self._table.get_entity(_PARTITION, name))
        except ResourceNotFoundError:
            return None

    def all(self) -> list[Assignment]:
        rows = self._table.query_entities("PartitionKey eq @p", parameters={"p": _PARTITION})
        return [_assignment(row) for row in rows]

    def of(self, principal_id: str) -> list[Assignment]:
        rows = self._table.query_entities(
            "PartitionKey eq @p and PrincipalId eq @id",
            parameters={"p": _PARTITION, "id": principal_id.lower()},
        )
        return [_assignment(row) for row in rows]


def _assignment(row: dict[str, object]) -> Assignment:
    return Assignment(
        str(row["RowKey"]), str(row["PrincipalId"]), str(row["Role"]), str(row["Scope"])
    )
