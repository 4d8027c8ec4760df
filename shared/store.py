"""Table Storage: where collections (and, later, jobs and history) are kept.

Every Table Storage rule lives here: keys (`resources.table_key`), the mapping between stored
documents and entities, etags and optimistic concurrency. A document is the resource's JSON
(location, tags, properties) kept whole in one string property, so that what a client stored is
what it reads back.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

from shared.errors import Conflict, PreconditionFailed
from shared.resources import CollectionId, table_key

COLLECTIONS_TABLE = "jobcollections"
_WRITE_ATTEMPTS = 3  # a write that loses a race to another writer reads again and retries


@dataclass(frozen=True)
class Stored:
    """A resource as stored: its id, its document, and the etag of that version."""

    id: CollectionId
    document: dict[str, Any]
    etag: str


@dataclass(frozen=True)
class Preconditions:
    """The If-Match / If-None-Match headers of a write."""

    if_match: str | None = None
    if_none_match: str | None = None

    def check(self, current: Stored | None) -> None:
        if self.if_none_match == "*" and current is not None:
            raise PreconditionFailed()
        if self.if_match is None:
            return
        if current is None or self.if_match not in ("*", current.etag):
            raise PreconditionFailed()


class Store:
    def __init__(self, service: TableServiceClient) -> None:
        self._collections: TableClient = service.get_table_client(COLLECTIONS_TABLE)

    @classmethod
    def from_connection_string(cls, connection_string: str) -> Store:
        return cls(TableServiceClient.from_connection_string(connection_string))

    def create_tables(self) -> None:
        with contextlib.suppress(ResourceExistsError):
            self._collections.create_table()

    # --- collections ----------------------------------------------------------------------

    def collection(self, collection: CollectionId) -> Stored | None:
        try:
            entity = self._collections.get_entity(collection.partition, collection.row)
        except ResourceNotFoundError:
            return None
        return _stored(entity)

    def collections(self, subscription: str, resource_group: str | None = None) -> list[Stored]:
        """A subscription's collections, or one resource group's, in name order."""
        query, parameters = "PartitionKey eq @pk", {"pk": table_key(subscription)}
        if resource_group is not None:
            # Rows of one group are the keys "<group>:<name>": the range [group + ":", group + ";").
            prefix = table_key(resource_group)
            query += " and RowKey gt @low and RowKey lt @high"
            parameters |= {"low": prefix + ":", "high": prefix + ";"}
        entities = self._collections.query_entities(query, parameters=parameters)
        return [_stored(entity) for entity in entities]

    def save_collection(
        self, collection: CollectionId, document: dict[str, Any], preconditions: Preconditions
    ) -> tuple[Stored, bool]:
        """Create or replace; returns what is now stored and whether it was created."""
        entity = {
            "PartitionKey": collection.partition,
            "RowKey": collection.row,
            "Subscription": collection.subscription,
            "ResourceGroup": collection.resource_group,
            "Name": collection.name,
            "Document": json.dumps(document, separators=(",", ":")),
        }
        for _ in range(_WRITE_ATTEMPTS):
            current = self.collection(collection)
            preconditions.check(current)
            try:
                if current is None:
                    metadata = self._collections.create_entity(entity)
                else:
                    # The stored name keeps the case it was created with.
                    entity |= {"Name": current.id.name, "ResourceGroup": current.id.resource_group}
                    metadata = self._collections.update_entity(
                        entity,
                        mode=UpdateMode.REPLACE,
                        etag=current.etag,
                        match_condition=MatchConditions.IfNotModified,
                    )
            except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
                continue
            return _stored({**entity, "_etag": metadata["etag"]}), current is None
        raise Conflict("The collection is being changed by another request; try again.")

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        """Delete; returns whether there was anything to delete."""
        current = self.collection(collection)
        preconditions.check(current)
        if current is None:
            return False
        try:
            self._collections.delete_entity(
                collection.partition,
                collection.row,
                etag=current.etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except ResourceModifiedError:
            raise Conflict(
                "The collection was changed while it was being deleted; try again."
            ) from None
        return True


def _stored(entity: Any) -> Stored:
    etag = entity.get("_etag") or entity.metadata["etag"]
    return Stored(
        id=CollectionId(entity["Subscription"], entity["ResourceGroup"], entity["Name"]),
        document=json.loads(entity["Document"]),
        etag=etag,
    )
