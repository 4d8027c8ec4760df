"""Table Storage: where collections and jobs (and, later, history) are kept.

Every Table Storage rule lives here: keys (keys.py), the mapping between stored
documents and entities, etags and optimistic concurrency, and batches of one partition and at
most 100 operations (Azurite accepts larger ones; Azure does not). A document is the resource's
JSON kept whole in one string property, so that what a client stored is what it reads back.
"""

from __future__ import annotations

import contextlib
import json
import zlib
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
from azure.data.tables import TableClient, TableServiceClient, TableTransactionError, UpdateMode

from shared.domain.ids import CloudServiceId, CollectionId, JobId
from shared.domain.job_definition import HistoryStatus, JobState
from shared.domain.job_document import JobDocument
from shared.storage.concurrency import (
    CONTENDED_WRITE_ATTEMPTS,
    optimistic_attempts,
)
from shared.storage.errors import EtagMismatch, ModifiedConcurrently, NotFound, QuotaExceeded
from shared.storage.keys import (
    collection_partition,
    collection_row,
    job_partition,
    job_row,
    jobs_partition,
    table_key,
)

COLLECTIONS_TABLE = "jobcollections"
JOBS_TABLE = "jobs"
# The classic API's own records: its cloud services, and the request id of each change it made,
# which its clients poll for (see shared/api/classic.py). A subscription's rows share a partition.
CLOUD_SERVICES_TABLE = "cloudservices"
OPERATIONS_TABLE = "operations"
# Each collection's jobs partition also holds its job count, in a few counter rows (shards), so
# that creating or deleting a job and counting it are one transaction, and concurrent creators
# seldom contend for the same row. Their keys sort before every job name (names start with a
# letter or digit), so listings skip them by key range.
COUNTER_SHARDS = 8
COUNTER_PREFIX = "!count-"
_AFTER_COUNTERS = "!count."  # "." sorts right after "-"
# The partition also holds the collection's state, which the executor reads with the job, and
# the jobs' history, so that an execution's outcome and its job's status are one batch. History
# rows are "~<job row>:<entry id>": "~" sorts after every job name.
COLLECTION_GATE = "!collection"
_HISTORY_MARK = "~"
LARGEST_BATCH = 100
# What a batch answers when a row it changes was changed (412) or deleted (404) since it was read.
_RACES_LOST = {412, 404}

Id = TypeVar("Id", CloudServiceId, CollectionId, JobId)
Document = TypeVar("Document", dict[str, Any], JobDocument)


@dataclass(frozen=True)
class Stored(Generic[Id, Document]):
    """A resource as stored: its id, its document, and the etag of that version."""

    id: Id
    document: Document
    etag: str


StoredCollection = Stored[CollectionId, dict[str, Any]]
StoredJob = Stored[JobId, JobDocument]
StoredCloudService = Stored[CloudServiceId, dict[str, Any]]


@dataclass(frozen=True)
class JobSlot:
    """A job's place in its collection as read for a write: the job (if any) and the job count
    (read only for a new job, or when asked for; empty otherwise)."""

    current: StoredJob | None
    shards: dict[str, tuple[int, str | None]]  # counter row -> (jobs, etag); absent rows count 0

    @property
    def jobs_in_collection(self) -> int:
        return sum(jobs for jobs, _ in self.shards.values())


@dataclass(frozen=True)
class Preconditions:
    """The If-Match / If-None-Match headers of a write."""

    if_match: str | None = None
    if_none_match: str | None = None

    def check(self, current: Stored[Any, Any] | None) -> None:
        if self.if_none_match == "*" and current is not None:
            raise EtagMismatch()
        if self.if_match is None:
            return
        if current is None or self.if_match not in ("*", current.etag):
            raise EtagMismatch()


class _Documents(Generic[Id, Document]):
    """One table of JSON documents, each in one entity with optimistic concurrency.

    `decode` reads a document from its JSON (the one place a stored job becomes a JobDocument).
    """

    def __init__(
        self,
        table: TableClient,
        id_of: Callable[[Any], Id],
        decode: Callable[[dict[str, Any]], Document],
        kind: str,
    ) -> None:
        self.table = table
        self._id_of: Callable[[Any], Id] = id_of
        self._decode: Callable[[dict[str, Any]], Document] = decode
        self._kind = kind

    def get(self, partition: str, row: str) -> Stored[Id, Document] | None:
        try:
            return self.from_entity(self.table.get_entity(partition, row))
        except ResourceNotFoundError:
            return None

    def query(self, query: str, **parameters: str) -> Iterator[Stored[Id, Document]]:
        for entity in self.table.query_entities(query, parameters=parameters):
            yield self.from_entity(entity)

    def save(
        self,
        *,
        partition: str,
        row: str,
        columns: dict[str, Any],
        document: dict[str, Any],
        preconditions: Preconditions,
        keep_from_current: tuple[str, ...] = (),
    ) -> tuple[Stored[Id, Document], bool]:
        """Create or replace; returns what is now stored and whether it was created.

        `keep_from_current` names columns that a replace keeps from the stored entity (a name
        keeps the case it was created with).
        """
        entity = {"PartitionKey": partition, "RowKey": row, **columns, "Document": _json(document)}
        for _ in optimistic_attempts():
            try:
                current_entity = self.table.get_entity(partition, row)
            except ResourceNotFoundError:
                current_entity = None
            current = self.from_entity(current_entity) if current_entity is not None else None
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
            return self.from_entity(entity, metadata["etag"]), current is None
        raise ModifiedConcurrently(self._kind)

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
            raise ModifiedConcurrently(self._kind) from None
        return True

    def from_entity(self, entity: Any, etag: str | None = None) -> Stored[Id, Document]:
        return Stored(
            id=self._id_of(entity),
            document=self._decode(json.loads(entity["Document"])),
            etag=etag or entity.metadata["etag"],
        )


class Store:
    def __init__(self, service: TableServiceClient) -> None:
        self._service = service
        self._collections = _Documents(
            service.get_table_client(COLLECTIONS_TABLE), _collection_id, dict, "job collection"
        )
        self._jobs = _Documents(
            service.get_table_client(JOBS_TABLE), _job_id, JobDocument.from_json, "job"
        )
        self._cloud_services = _Documents(
            service.get_table_client(CLOUD_SERVICES_TABLE), _cloud_service_id, dict,
            "cloud service",
        )  # fmt: skip
        self._operations = service.get_table_client(OPERATIONS_TABLE)

    @classmethod
    def from_connection_string(cls, connection_string: str) -> Store:
        return cls(TableServiceClient.from_connection_string(connection_string))

    def create_tables(self) -> None:
        for name in (COLLECTIONS_TABLE, JOBS_TABLE, CLOUD_SERVICES_TABLE, OPERATIONS_TABLE):
            with contextlib.suppress(ResourceExistsError):
                self._service.create_table(name)

    # --- collections ----------------------------------------------------------------------

    def collection(self, collection: CollectionId) -> StoredCollection | None:
        return self._collections.get(collection_partition(collection), collection_row(collection))

    def existing_collection(self, collection: CollectionId) -> StoredCollection:
        """The collection, or NotFound."""
        stored = self.collection(collection)
        if stored is None:
            raise NotFound(collection)
        return stored

    def collections(
        self, subscription: str, resource_group: str | None = None
    ) -> list[StoredCollection]:
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
    ) -> tuple[StoredCollection, bool]:
        columns = {
            "Subscription": collection.subscription,
            "ResourceGroup": collection.resource_group,
            "Name": collection.name,
        }
        return self._collections.save(
            partition=collection_partition(collection), row=collection_row(collection),
            columns=columns, document=document, preconditions=preconditions,
            keep_from_current=("ResourceGroup", "Name"),
        )  # fmt: skip

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        """Delete a collection, every job in it and their history."""
        deleted = self._collections.delete(
            collection_partition(collection), collection_row(collection), preconditions
        )
        partition = jobs_partition(collection)
        submit_batches(
            self._jobs.table,
            (
                ("delete", {"PartitionKey": partition, "RowKey": entity["RowKey"]})
                for entity in _keys(self._jobs.table, partition)
            ),
        )
        return deleted

    # --- jobs -----------------------------------------------------------------------------

    def job(self, job: JobId) -> StoredJob | None:
        return self._jobs.get(job_partition(job), job_row(job))

    def existing_job(self, job: JobId) -> StoredJob:
        """The job, or NotFound."""
        stored = self.job(job)
        if stored is None:
            raise NotFound(job)
        return stored

    def jobs(self, collection: CollectionId, state: JobState | None = None) -> list[StoredJob]:
        """The jobs of a collection in name order, optionally only those in one state."""
        query = "PartitionKey eq @pk and RowKey gt @counters and RowKey lt @history"
        parameters = {
            "pk": jobs_partition(collection),
            "counters": _AFTER_COUNTERS,
            "history": _HISTORY_MARK,
        }
        found = self._jobs.query(query, **parameters)
        # Filtered here, not by the query: the State column of rows written before the state's
        # spelling changed says "Enabled", of later ones "enabled"; a document reads either.
        return [job for job in found if state is None or job.document.state is state]

    def job_slot(self, job: JobId, *, counted: bool = False) -> JobSlot:
        """The job, and its collection's job count when the job is new or `counted` is asked.

        A point read and a key-range query rather than one query for both: keys joined by `or`
        make Table Storage scan the whole partition, history included (Azure's table design
        guide), and the count is needed only to create or delete a job.
        """
        current = self._jobs.get(job_partition(job), job_row(job))
        if current is not None and not counted:
            return JobSlot(current, {})
        return JobSlot(current, self._counters(job_partition(job)))

    def _counters(self, partition: str) -> dict[str, tuple[int, str | None]]:
        rows = self._jobs.table.query_entities(
            "PartitionKey eq @pk and RowKey ge @first and RowKey lt @after",
            parameters={"pk": partition, "first": COUNTER_PREFIX, "after": _AFTER_COUNTERS},
        )
        return {row["RowKey"]: (int(row["Jobs"]), row.metadata["etag"]) for row in rows}

    def save_job(
        self,
        job: JobId,
        document: JobDocument,
        preconditions: Preconditions,
        slot: JobSlot,
        max_jobs: int | None = None,
    ) -> tuple[StoredJob, bool]:
        """Create or replace a job; a new one counts against `max_jobs` (QuotaExceeded).

        `slot` is what the caller read with `job_slot`; if another writer got there first, the
        slot is read again and the write retried.
        """
        for attempt in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            if attempt:
                slot = self.job_slot(job)
            preconditions.check(slot.current)
            entity = _job_entity(job, document, slot.current)
            try:
                if slot.current is not None:
                    metadata = self._jobs.table.update_entity(
                        entity, mode=UpdateMode.REPLACE, **_unchanged_since(slot.current.etag)
                    )
                    return self._jobs.from_entity(entity, metadata["etag"]), False
                if max_jobs is not None and slot.jobs_in_collection >= max_jobs:
                    raise QuotaExceeded(slot.jobs_in_collection)
                results = self._jobs.table.submit_transaction(
                    [("create", entity), _count_change(job, slot, +1)]
                )
            except (ResourceModifiedError, ResourceNotFoundError, TableTransactionError):
                continue
            created = self._jobs.from_entity(entity, results[0]["etag"])
            if max_jobs is not None:
                self._undo_if_over(job, max_jobs)
            return created, True
        raise ModifiedConcurrently("job")

    def _undo_if_over(self, job: JobId, max_jobs: int) -> None:
        """Creators racing for the last places can all get in: then each takes itself back out.

        (Several may; the quota is never left exceeded, and a refused client can try again.)
        """
        jobs = JobSlot(None, self._counters(job_partition(job))).jobs_in_collection
        if jobs > max_jobs:
            self.delete_job(job, Preconditions())
            raise QuotaExceeded(jobs - 1)

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        """Delete a job and its history."""
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            slot = self.job_slot(job, counted=True)
            preconditions.check(slot.current)
            if slot.current is None:
                return False
            try:
                self._jobs.table.submit_transaction(
                    [
                        ("delete", _keys_of(slot.current), _unchanged_since(slot.current.etag)),
                        _count_change(job, slot, -1),
                    ]
                )
            except TableTransactionError:
                continue
            self._delete_history(job)
            return True
        raise ModifiedConcurrently("job")

    # --- history --------------------------------------------------------------------------

    def add_history(self, job: JobId, entries: list[tuple[str, dict[str, Any]]]) -> None:
        """Record execution attempts as (entry id, entry); ids order them, newest first."""
        submit_batches(
            self._jobs.table, (("upsert", _history_entity(job, *entry)) for entry in entries)
        )

    def history(
        self, job: JobId, status: HistoryStatus | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """A job's history, newest first, as (id, entry); optionally only one status."""
        low, high = _history_range(job)
        query = "PartitionKey eq @pk and RowKey gt @low and RowKey lt @high"
        parameters = {"pk": job_partition(job), "low": low, "high": high}
        if status is not None:
            query += " and Status eq @status"
            parameters["status"] = status.value
        found = self._jobs.table.query_entities(query, parameters=parameters)
        return [(entity["RowKey"][len(low) :], json.loads(entity["Document"])) for entity in found]

    def history_ids(self, job: JobId, after: str = "") -> list[str]:
        """The ids of a job's history entries (only those sorting after `after`), newest first."""
        low, high = _history_range(job)
        keys = self._jobs.table.query_entities(
            "PartitionKey eq @pk and RowKey gt @low and RowKey lt @high",
            parameters={"pk": job_partition(job), "low": low + after, "high": high},
            select=["RowKey"],
        )
        return [key["RowKey"][len(low) :] for key in keys]

    def remove_history(self, job: JobId, entry_ids: Iterable[str]) -> None:
        low, _ = _history_range(job)
        submit_batches(
            self._jobs.table,
            (
                ("delete", {"PartitionKey": job_partition(job), "RowKey": low + entry})
                for entry in entry_ids
            ),
        )

    def _delete_history(self, job: JobId) -> None:
        self.remove_history(job, self.history_ids(job))

    def all_collections(self) -> Iterator[StoredCollection]:
        """Every collection of every subscription (for maintenance, not for requests)."""
        for entity in self._collections.table.list_entities():
            yield self._collections.from_entity(entity)

    # --- the classic API's cloud services and operations -----------------------------------

    def cloud_service(self, cloud_service: CloudServiceId) -> StoredCloudService | None:
        return self._cloud_services.get(
            table_key(cloud_service.subscription), table_key(cloud_service.name)
        )

    def cloud_services(self, subscription: str) -> list[StoredCloudService]:
        """A subscription's cloud services, in name order."""
        return list(self._cloud_services.query("PartitionKey eq @pk", pk=table_key(subscription)))

    def create_cloud_service(
        self, cloud_service: CloudServiceId, document: dict[str, Any]
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

    # --- execution ------------------------------------------------------------------------

    def collection_state(self, collection: CollectionId) -> str | None:
        """The state the executor checks before running any job of the collection (None if
        never recorded): a point read of the gate row beside the collection's jobs."""
        try:
            gate = self._jobs.table.get_entity(
                jobs_partition(collection), COLLECTION_GATE, select=["State"]
            )
        except ResourceNotFoundError:
            return None
        return str(gate["State"])

    def set_collection_state(self, collection: CollectionId, state: str) -> None:
        """Record the state the executor checks before running any job of the collection."""
        self._jobs.table.upsert_entity(
            {"PartitionKey": jobs_partition(collection), "RowKey": COLLECTION_GATE, "State": state},
            mode=UpdateMode.REPLACE,
        )

    def settle_job(
        self,
        stored: StoredJob,
        document: JobDocument,
        history: list[tuple[str, dict[str, Any]]],
    ) -> bool:
        """Write a job's new document and history entries if the job is as `stored` read it.

        The document and the newest entries are one batch: an outcome is recorded whole or not
        at all. Returns False when another writer changed the job first.
        """
        room = LARGEST_BATCH - 1
        older, newest = history[:-room] if len(history) > room else [], history[-room:]
        # Entries that do not fit in the batch (postponed occurrences) go first; writing them
        # again after a failed attempt only overwrites them.
        self.add_history(stored.id, list(older))
        operations: list[Any] = [_replacement(Stored(stored.id, document, stored.etag))]
        operations += [("upsert", _history_entity(stored.id, *entry)) for entry in newest]
        try:
            self._jobs.table.submit_transaction(operations)
        except TableTransactionError:
            return False
        return True

    def replace_jobs(self, jobs: Iterable[StoredJob]) -> None:
        """Write back changed documents of one collection's jobs, as batches; ModifiedConcurrently
        when one of them changed (or went) since it was read, and its batch was not written."""
        try:
            submit_batches(self._jobs.table, (_replacement(stored) for stored in jobs))
        except TableTransactionError as failed:
            if failed.status_code in _RACES_LOST:
                raise ModifiedConcurrently("job") from failed
            raise


def _replacement(stored: StoredJob) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A batch operation that writes a job's document back, if nobody changed it meanwhile."""
    entity = {
        "PartitionKey": job_partition(stored.id),
        "RowKey": job_row(stored.id),
        **_job_columns(stored.document),
    }
    return "update", entity, {"mode": UpdateMode.MERGE, **_unchanged_since(stored.etag)}


def _job_entity(job: JobId, document: JobDocument, current: StoredJob | None) -> dict[str, Any]:
    # A replaced job keeps the names' case from when it was created.
    names = current.id if current is not None else job
    return {
        "PartitionKey": job_partition(job),
        "RowKey": job_row(job),
        "Subscription": names.collection.subscription,
        "ResourceGroup": names.collection.resource_group,
        "Collection": names.collection.name,
        "Name": names.name,
        **_job_columns(document),
    }


def _job_columns(document: JobDocument) -> dict[str, str]:
    """A job document as table columns: whole, as JSON, and its state (which listings filter
    on). A stored job is read back with `JobDocument.from_json`."""
    return {"State": document.state.value, "Document": _json(document.to_json())}


def _count_change(job: JobId, slot: JobSlot, change: int) -> tuple[Any, ...]:
    """The batch operation that moves the collection's job count by `change`.

    A job is counted in the shard its name picks; a deletion takes from that shard, or from any
    shard that still counts something (jobs made before a shard filled up elsewhere).
    """
    own = f"{COUNTER_PREFIX}{zlib.crc32(job_row(job).encode()) % COUNTER_SHARDS}"
    row = own
    if change < 0 and slot.shards.get(own, (0, ""))[0] <= 0:
        row = next((name for name, (jobs, _) in slot.shards.items() if jobs > 0), own)
    jobs, etag = slot.shards.get(row, (0, None))
    counter = {"PartitionKey": job_partition(job), "RowKey": row, "Jobs": max(jobs + change, 0)}
    if etag is None:
        return ("create", counter)
    return ("update", counter, {"mode": UpdateMode.REPLACE, **_unchanged_since(etag)})


def _unchanged_since(etag: str) -> dict[str, Any]:
    return {"etag": etag, "match_condition": MatchConditions.IfNotModified}


def _keys_of(stored: StoredJob) -> dict[str, str]:
    return {"PartitionKey": job_partition(stored.id), "RowKey": job_row(stored.id)}


def _collection_id(entity: Any) -> CollectionId:
    return CollectionId(entity["Subscription"], entity["ResourceGroup"], entity["Name"])


def _cloud_service_id(entity: Any) -> CloudServiceId:
    return CloudServiceId(entity["Subscription"], entity["Name"])


def _job_id(entity: Any) -> JobId:
    collection = CollectionId(entity["Subscription"], entity["ResourceGroup"], entity["Collection"])
    return JobId(collection, entity["Name"])


def submit_batches(table: TableClient, operations: Iterable[tuple[Any, ...]]) -> None:
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


def _history_range(job: JobId) -> tuple[str, str]:
    """The row keys that hold a job's history lie strictly between these two."""
    return f"{_HISTORY_MARK}{job_row(job)}:", f"{_HISTORY_MARK}{job_row(job)};"  # ";" follows ":"


def _history_entity(job: JobId, entry_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    low, _ = _history_range(job)
    return {
        "PartitionKey": job_partition(job),
        "RowKey": low + entry_id,
        "Status": entry["status"],
        "Document": _json(entry),
    }


def _json(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))
