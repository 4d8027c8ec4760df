"""Table Storage: where collections and jobs (and, later, history) are kept.

Every Table Storage rule lives here: keys (`resources.table_key`), the mapping between stored
documents and entities, etags and optimistic concurrency, and batches of one partition and at
most 100 operations (Azurite accepts larger ones; Azure does not). A document is the resource's
JSON kept whole in one string property, so that what a client stored is what it reads back.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

from shared.errors import Conflict, PreconditionFailed
from shared.resources import CollectionId, JobId, table_key

COLLECTIONS_TABLE = "jobcollections"
JOBS_TABLE = "jobs"
HISTORY_TABLE = "jobhistory"
_LATEST_TICKS = 10**19  # history rows sort newest first: their keys count down from here
LARGEST_BATCH = 100
_WRITE_ATTEMPTS = 3  # a write that loses a race to another writer reads again and retries

Id = TypeVar("Id", CollectionId, JobId)


@dataclass(frozen=True)
class Stored(Generic[Id]):
    """A resource as stored: its id, its document, and the etag of that version."""

    id: Id
    document: dict[str, Any]
    etag: str


@dataclass(frozen=True)
class Preconditions:
    """The If-Match / If-None-Match headers of a write."""

    if_match: str | None = None
    if_none_match: str | None = None

    def check(self, current: Stored[Any] | None) -> None:
        if self.if_none_match == "*" and current is not None:
            raise PreconditionFailed()
        if self.if_match is None:
            return
        if current is None or self.if_match not in ("*", current.etag):
            raise PreconditionFailed()


class _Documents(Generic[Id]):
    """One table of JSON documents, each in one entity with optimistic concurrency."""

    def __init__(self, table: TableClient, id_of: Callable[[Any], Id], kind: str) -> None:
        self.table, self._id_of, self._kind = table, id_of, kind

    def get(self, partition: str, row: str) -> Stored[Id] | None:
        try:
            return self._stored(self.table.get_entity(partition, row))
        except ResourceNotFoundError:
            return None

    def query(self, query: str, **parameters: str) -> Iterator[Stored[Id]]:
        for entity in self.table.query_entities(query, parameters=parameters):
            yield self._stored(entity)

    def save(
        self,
        *,
        partition: str,
        row: str,
        columns: dict[str, Any],
        document: dict[str, Any],
        preconditions: Preconditions,
        keep_from_current: tuple[str, ...] = (),
    ) -> tuple[Stored[Id], bool]:
        """Create or replace; returns what is now stored and whether it was created.

        `keep_from_current` names columns that a replace keeps from the stored entity (a name
        keeps the case it was created with).
        """
        entity = {"PartitionKey": partition, "RowKey": row, **columns, "Document": _json(document)}
        for _ in range(_WRITE_ATTEMPTS):
            try:
                current_entity = self.table.get_entity(partition, row)
            except ResourceNotFoundError:
                current_entity = None
            current = self._stored(current_entity) if current_entity is not None else None
            preconditions.check(current)
            try:
                if current_entity is None:
                    metadata = self.table.create_entity(entity)
                else:
                    entity |= {name: current_entity[name] for name in keep_from_current}
                    metadata = self.table.update_entity(
                        entity,
                        mode=UpdateMode.REPLACE,
                        etag=current_entity.metadata["etag"],
                        match_condition=MatchConditions.IfNotModified,
                    )
            except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
                continue
            return self._stored(entity, metadata["etag"]), current is None
        raise Conflict(f"The {self._kind} is being changed by another request; try again.")

    def delete(self, partition: str, row: str, preconditions: Preconditions) -> bool:
        """Delete; returns whether there was anything to delete."""
        current = self.get(partition, row)
        preconditions.check(current)
        if current is None:
            return False
        try:
            self.table.delete_entity(
                partition, row, etag=current.etag, match_condition=MatchConditions.IfNotModified
            )
        except ResourceModifiedError:
            raise Conflict(
                f"The {self._kind} changed while it was being deleted; try again."
            ) from None
        return True

    def _stored(self, entity: Any, etag: str | None = None) -> Stored[Id]:
        return Stored(
            id=self._id_of(entity),
            document=json.loads(entity["Document"]),
            etag=etag or entity.metadata["etag"],
        )


class Store:
    def __init__(self, service: TableServiceClient) -> None:
        self._service = service
        self._collections = _Documents(
            service.get_table_client(COLLECTIONS_TABLE), _collection_id, "job collection"
        )
        self._jobs = _Documents(service.get_table_client(JOBS_TABLE), _job_id, "job")
        self._history = service.get_table_client(HISTORY_TABLE)

    @classmethod
    def from_connection_string(cls, connection_string: str) -> Store:
        return cls(TableServiceClient.from_connection_string(connection_string))

    def create_tables(self) -> None:
        for name in (COLLECTIONS_TABLE, JOBS_TABLE, HISTORY_TABLE):
            with contextlib.suppress(ResourceExistsError):
                self._service.create_table(name)

    # --- collections ----------------------------------------------------------------------

    def collection(self, collection: CollectionId) -> Stored[CollectionId] | None:
        return self._collections.get(collection.partition, collection.row)

    def collections(
        self, subscription: str, resource_group: str | None = None
    ) -> list[Stored[CollectionId]]:
        """A subscription's collections, or one resource group's, in name order."""
        if resource_group is None:
            return list(self._collections.query("PartitionKey eq @pk", pk=table_key(subscription)))
        # A group's rows are the keys "<group>:<name>", so the range [group + ":", group + ";").
        prefix = table_key(resource_group)
        query = "PartitionKey eq @pk and RowKey gt @low and RowKey lt @high"
        found = self._collections.query(
            query, pk=table_key(subscription), low=prefix + ":", high=prefix + ";"
        )
        return list(found)

    def save_collection(
        self, collection: CollectionId, document: dict[str, Any], preconditions: Preconditions
    ) -> tuple[Stored[CollectionId], bool]:
        columns = {
            "Subscription": collection.subscription,
            "ResourceGroup": collection.resource_group,
            "Name": collection.name,
        }
        return self._collections.save(
            partition=collection.partition, row=collection.row, columns=columns,
            document=document, preconditions=preconditions,
            keep_from_current=("ResourceGroup", "Name"),
        )  # fmt: skip

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        """Delete a collection, every job in it and their history."""
        deleted = self._collections.delete(collection.partition, collection.row, preconditions)
        for job in self.jobs(collection):
            self._delete_history(job.id)
        partition = collection.jobs_partition
        _submit(
            self._jobs.table,
            (
                ("delete", {"PartitionKey": partition, "RowKey": entity["RowKey"]})
                for entity in _keys(self._jobs.table, partition)
            ),
        )
        return deleted

    # --- jobs -----------------------------------------------------------------------------

    def job(self, job: JobId) -> Stored[JobId] | None:
        return self._jobs.get(job.partition, job.row)

    def jobs(self, collection: CollectionId, state: str | None = None) -> list[Stored[JobId]]:
        """The jobs of a collection in name order, optionally only those in one state."""
        partition = collection.jobs_partition
        if state is None:
            return list(self._jobs.query("PartitionKey eq @pk", pk=partition))
        return list(
            self._jobs.query("PartitionKey eq @pk and State eq @state", pk=partition, state=state)
        )

    def count_jobs(self, collection: CollectionId) -> int:
        return sum(1 for _ in _keys(self._jobs.table, collection.jobs_partition))

    def save_job(
        self, job: JobId, document: dict[str, Any], preconditions: Preconditions
    ) -> tuple[Stored[JobId], bool]:
        columns = {
            "Subscription": job.collection.subscription,
            "ResourceGroup": job.collection.resource_group,
            "Collection": job.collection.name,
            "Name": job.name,
            "State": document["definition"]["state"],
        }
        return self._jobs.save(
            partition=job.partition, row=job.row, columns=columns,
            document=document, preconditions=preconditions,
            keep_from_current=("Subscription", "ResourceGroup", "Collection", "Name"),
        )  # fmt: skip

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        """Delete a job and its history."""
        deleted = self._jobs.delete(job.partition, job.row, preconditions)
        if deleted:
            self._delete_history(job)
        return deleted

    # --- history --------------------------------------------------------------------------

    def add_history(self, job: JobId, entry: dict[str, Any], at: datetime) -> str:
        """Record one execution attempt; returns its id. `at` orders it (newest first)."""
        ticks = int(at.timestamp() * 10_000_000)
        row = f"{_LATEST_TICKS - ticks:020d}-{uuid.uuid4().hex[:8]}"
        self._history.create_entity(
            {"PartitionKey": _history_partition(job), "RowKey": row,
             "Status": entry["status"], "Document": _json(entry)}
        )  # fmt: skip
        return row

    def history(self, job: JobId, status: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """A job's history, newest first, as (id, entry); optionally only one status."""
        query, parameters = "PartitionKey eq @pk", {"pk": _history_partition(job)}
        if status is not None:
            query += " and Status eq @status"
            parameters["status"] = status
        found = self._history.query_entities(query, parameters=parameters)
        return [(entity["RowKey"], json.loads(entity["Document"])) for entity in found]

    def _delete_history(self, job: JobId) -> None:
        partition = _history_partition(job)
        _submit(
            self._history,
            (
                ("delete", {"PartitionKey": partition, "RowKey": entity["RowKey"]})
                for entity in _keys(self._history, partition)
            ),
        )

    def replace_jobs(self, jobs: Iterable[Stored[JobId]]) -> None:
        """Write back changed documents of one collection's jobs, as batches."""
        _submit(self._jobs.table, (_replacement(stored) for stored in jobs))


def _replacement(stored: Stored[JobId]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A batch operation that writes a job's document back, if nobody changed it meanwhile."""
    entity = {
        "PartitionKey": stored.id.partition,
        "RowKey": stored.id.row,
        "State": stored.document["definition"]["state"],
        "Document": _json(stored.document),
    }
    condition = {"etag": stored.etag, "match_condition": MatchConditions.IfNotModified}
    return "update", entity, {"mode": UpdateMode.MERGE, **condition}


def _collection_id(entity: Any) -> CollectionId:
    return CollectionId(entity["Subscription"], entity["ResourceGroup"], entity["Name"])


def _job_id(entity: Any) -> JobId:
    collection = CollectionId(entity["Subscription"], entity["ResourceGroup"], entity["Collection"])
    return JobId(collection, entity["Name"])


def _submit(table: TableClient, operations: Iterable[tuple[Any, ...]]) -> None:
    """Run operations on one partition, in batches of at most 100 (Azure's limit)."""
    batch: list[Any] = []
    for operation in operations:
        batch.append(operation)
        if len(batch) == LARGEST_BATCH:
            table.submit_transaction(batch)
            batch = []
    if batch:
        table.submit_transaction(batch)


def _keys(table: TableClient, partition: str) -> Iterator[Any]:
    """The row keys of one partition, and nothing else of its rows."""
    return iter(
        table.query_entities("PartitionKey eq @pk", parameters={"pk": partition}, select=["RowKey"])
    )


def _history_partition(job: JobId) -> str:
    return f"{job.partition}:{job.row}"


def _json(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))
