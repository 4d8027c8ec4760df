"""Table Storage: where collections and jobs (and, later, history) are kept.

Every Table Storage rule lives here: keys (keys.py), the mapping between stored
documents and entities, etags and optimistic concurrency, and batches of one partition and at
most 100 operations (Azurite accepts larger ones; Azure does not). A document is the resource's
JSON kept whole in one string property, so that what a client stored is what it reads back.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import random
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
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
from shared.storage.errors import (
    EtagMismatch,
    ModifiedConcurrently,
    NotFound,
    QuotaExceeded,
    StorageError,
)
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
# which its clients poll for (see shared/api/classic/serving.py). A subscription's rows share a partition.
CLOUD_SERVICES_TABLE = "cloudservices"
OPERATIONS_TABLE = "operations"
# Each collection's jobs partition also holds its job count, in counter rows (stripes). Each row
# has its own share of maxJobCount (its allotment), so that a creator checks the quota on the one
# row it writes, etag-checked, and no creator reads or verifies the others' rows. Their keys sort
# before every job name (names start with a letter or digit), so listings skip them by key range.
# Counts of collections made when there were eight rows, without allotments, are spread anew
# over the sixteen before the first create that finds a row over its allotment (`_balance`).
COUNTER_SHARDS = 16
COUNTER_PREFIX = "!count-"
_AFTER_COUNTERS = "!count."  # "." sorts right after "-"
_COUNTER_ROWS = tuple(f"{COUNTER_PREFIX}{stripe}" for stripe in range(COUNTER_SHARDS))
# A new job is counted first and inserted second (two single-entity writes: a batch costs three
# times the CPU of either, the multipart body). A crash in between leaves the count one too high,
# never too low: a place lost, never the quota exceeded. A creator that could not insert within
# COUNTED_INSERT_WITHIN of counting gives the place back instead; counter rows that no one wrote
# for COUNTERS_QUIET_FOR (far longer) therefore have no insert on its way, and a creator refused
# by the quota recounts the jobs and corrects such rows.
COUNTED_INSERT_WITHIN_S = 60.0
COUNTERS_QUIET_FOR = timedelta(minutes=5)
# A place taken longer ago than this is never given back, but left to the recount, which may
# already have taken it back (it waits a minute longer).
GIVE_BACK_WITHIN_S = COUNTERS_QUIET_FOR.total_seconds() - 60
# A counter write in a collection far from its quota takes a few places more than its creators
# need: spares, from which this process's next creators of the collection take one each without
# any counter write. Spares unused for SPARES_KEPT_FOR_S go back. Only while the collection keeps
# SPARE_HEADROOM places free beyond them (and the row room for as many again) are spares taken,
# so they can keep a creator of another process out of a place only if that process filled the
# last SPARE_HEADROOM places within about SPARES_KEPT_FOR_S.
SPARE_PLACES = 4
SPARES_KEPT_FOR_S = 2.0
SPARE_HEADROOM = 256
# Collections whose counter rows a process remembers (their counts and etags).
REMEMBERED_COLLECTIONS = 4096
_WRITER_LOCKS = 256
# The partition also holds the collection's state, which the executor reads with the job, and
# the jobs' history, so that an execution's outcome and its job's status are one batch. History
# rows are "~<job row>:<entry id>": "~" sorts after every job name.
COLLECTION_GATE = "!collection"
# The collections table's column that tells a collection's creations apart (Stored.incarnation).
INCARNATION = "Incarnation"
_HISTORY_MARK = "~"
_RUN_NOWS = "RunNowsInFlight"
LARGEST_BATCH = 100
LARGEST_QUERY_PAGE = 1000  # rows a table query answers at most at once
# What a batch answers when a row it changes was changed (412) or deleted (404) since it was read.
_RACES_LOST = {412, 404}

Id = TypeVar("Id", CloudServiceId, CollectionId, JobId)
Document = TypeVar("Document", dict[str, Any], JobDocument)


@dataclass(frozen=True)
class Stored(Generic[Id, Document]):
    """A resource as stored: its id, its document, and the etag of that version.

    A collection's `incarnation` tells its creations apart: a collection deleted and created
    again under the same name has a new one (empty for other resources, and for collections
    created before incarnations were recorded)."""

    id: Id
    document: Document
    etag: str
    incarnation: str = ""


StoredCollection = Stored[CollectionId, dict[str, Any]]
StoredJob = Stored[JobId, JobDocument]
StoredCloudService = Stored[CloudServiceId, dict[str, Any]]


@dataclass(frozen=True)
class Counter:
    """One counter row as read or last written: the jobs it counts, its etag (None: no row yet)
    and when it was last written (None: not known)."""

    jobs: int
    etag: str | None
    written_at: datetime | None = None


@dataclass(frozen=True)
class JobSlot:
    """A job's place in its collection as read for a write: the job (if any) and the job count
    (read only for a job that is not there, or when asked for; empty otherwise)."""

    current: StoredJob | None
    counters: dict[str, Counter]  # counter row -> what it holds; absent rows count 0
    spares: dict[str, int] = field(default_factory=dict)  # this process's unused places, by row

    @property
    def jobs_in_collection(self) -> int:
        return sum(counter.jobs for counter in self.counters.values()) - sum(self.spares.values())


@dataclass
class _Gathering:
    """Creators of one collection in this process that wait for one counter write to count
    them all: each gets the counter row it is counted in, or why it is not."""

    creators: int = 1
    outcomes: list[tuple[str, float] | BaseException] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


class _CounterRows:
    """What this process last read or wrote of each collection's counter rows, and the creators
    that wait for their counter write.

    Creators of one collection in one process gather: one of them writes a row with room for
    all who came while the previous write was under way (group commit), with the etag it
    remembers, so that counting a job costs a fraction of a write, and the process never races
    itself. A stale memory (another process wrote the row) costs a lost race (412), after which
    the rows are read again.
    """

    def __init__(self, remembered: int = REMEMBERED_COLLECTIONS) -> None:
        self._known: OrderedDict[str, dict[str, Counter]] = OrderedDict()
        self._gathering: dict[str, _Gathering] = {}
        # Spare places by collection: (row, monotonic time before the write that took it); and
        # those on their way back, still counted as this process's until their write lands.
        self._spares: dict[str, list[tuple[str, float]]] = {}
        self._returning: dict[str, list[str]] = {}
        self._returner = False  # whether a thread is giving back spares
        # One counter write under way per collection: a few locks shared by all collections
        # (two that share one only take turns), so none needs cleaning up.
        self._writers = [threading.Lock() for _ in range(_WRITER_LOCKS)]
        self._remembered = remembered
        self._lock = threading.Lock()

    def known(self, partition: str) -> dict[str, Counter] | None:
        with self._lock:
            rows = self._known.get(partition)
            if rows is not None:
                self._known.move_to_end(partition)
            return None if rows is None else dict(rows)

    def remember(self, partition: str, rows: dict[str, Counter]) -> None:
        with self._lock:
            self._known[partition] = dict(rows)
            self._known.move_to_end(partition)
            while len(self._known) > self._remembered:
                self._known.popitem(last=False)

    def note(self, partition: str, row: str, counter: Counter) -> None:
        """A row as this process just wrote it (nothing, if the collection is not remembered)."""
        with self._lock:
            if partition in self._known:
                self._known[partition][row] = counter

    def forget(self, partition: str) -> None:
        with self._lock:
            self._known.pop(partition, None)

    def drop(self, partition: str) -> None:
        """Forget a deleted collection's rows, and its spare places with them: they were places
        in rows that no longer exist, and must not count jobs of a collection created anew."""
        with self._lock:
            self._known.pop(partition, None)
            self._spares.pop(partition, None)
            self._returning.pop(partition, None)

    def join(self, partition: str) -> tuple[_Gathering, int]:
        """The gathering a creator waits in, and its place in it (0: it writes for all)."""
        with self._lock:
            gathering = self._gathering.get(partition)
            if gathering is None:
                gathering = self._gathering[partition] = _Gathering()
                return gathering, 0
            gathering.creators += 1
            return gathering, gathering.creators - 1

    def writer(self, partition: str) -> threading.Lock:
        return self._writers[zlib.crc32(partition.encode()) % _WRITER_LOCKS]

    def take_spare(self, partition: str, now: float, kept_for: float) -> tuple[str, float] | None:
        """A spare place of the collection taken less than `kept_for` seconds before `now`."""
        with self._lock:
            spares = self._spares.get(partition, [])
            for index, (_, since) in enumerate(spares):
                if now - since < kept_for:
                    return spares.pop(index)
            return None

    def add_spares(self, partition: str, row: str, places: int, since: float) -> bool:
        """Keep spare places; whether a thread to give them back must be started."""
        with self._lock:
            self._spares.setdefault(partition, []).extend([(row, since)] * places)
            start, self._returner = not self._returner, True
            return start

    def spares(self, partition: str) -> dict[str, int]:
        """This process's places in the collection's rows that no job uses, by row."""
        with self._lock:
            rows = [row for row, _ in self._spares.get(partition, [])]
            rows += self._returning.get(partition, [])
            return {row: rows.count(row) for row in set(rows)}

    def expired(self, now: float, kept_for: float) -> list[tuple[str, str, float]] | None:
        """Spares older than `kept_for`, now on their way back, as (partition, row, since); None
        when there are no spares left at all (then the thread giving them back ends)."""
        with self._lock:
            if not any(self._spares.values()) and not any(self._returning.values()):
                self._returner = False
                return None
            old = []
            for partition, spares in self._spares.items():
                old += [(partition, row, since) for row, since in spares if now - since >= kept_for]
                spares[:] = [(row, since) for row, since in spares if now - since < kept_for]
                self._returning.setdefault(partition, []).extend(
                    row for part, row, _ in old if part == partition
                )
            for partition in [
                partition for partition, spares in self._spares.items() if not spares
            ]:
                del self._spares[partition]
            return old

    def returned(self, partition: str, row: str) -> None:
        with self._lock:
            returning = self._returning.get(partition, [])
            if row in returning:
                returning.remove(row)
            if not returning:
                self._returning.pop(partition, None)

    def close(self, partition: str, gathering: _Gathering) -> int:
        """No one joins `gathering` any more; how many creators it holds."""
        with self._lock:
            if self._gathering.get(partition) is gathering:
                del self._gathering[partition]
            return gathering.creators


@dataclass(frozen=True)
class PageBounds:
    """Which entries of a listing a page holds: up to `count` of them, from those whose key
    sorts after `after` (the last of the previous page; "" for the first), and `skip` more."""

    count: int
    after: str = ""
    skip: int = 0


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
                    for name in keep_from_current:  # absent from older rows: stays absent
                        if name in current_entity:
                            entity[name] = current_entity[name]
                        else:
                            entity.pop(name, None)
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
            incarnation=str(entity.get(INCARNATION, "")),
        )


class Store:
    def __init__(
        self, service: TableServiceClient, *, spares_kept_for_s: float = SPARES_KEPT_FOR_S
    ) -> None:
        self._service = service
        self._spares_kept_for_s = spares_kept_for_s
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
        self._counter_rows = _CounterRows()

    @classmethod
    def from_connection_string(cls, connection_string: str, **options: Any) -> Store:
        return cls(TableServiceClient.from_connection_string(connection_string), **options)

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
        """Create or replace a collection. A new one (a new incarnation) starts from an empty
        jobs partition: whatever a deletion's stragglers left there goes once its row is in
        (see `delete_collection`), the executor's gate row aside, which the caller may just
        have written for it. (Before its row is in, a racing PUT of the same name may have
        created it, with jobs.)"""
        columns = {
            "Subscription": collection.subscription,
            "ResourceGroup": collection.resource_group,
            "Name": collection.name,
            INCARNATION: uuid.uuid4().hex,  # kept by a replace
        }
        stored, created = self._collections.save(
            partition=collection_partition(collection), row=collection_row(collection),
            columns=columns, document=document, preconditions=preconditions,
            keep_from_current=("ResourceGroup", "Name", INCARNATION),
        )  # fmt: skip
        if created:
            self._sweep(jobs_partition(collection), keep=(COLLECTION_GATE,))
        return stored, created

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        """Delete a collection, every job in it and their history.

        The collection's row goes first: from then on no job created in the collection is
        kept, because a creator checks after its insert that its collection (the same
        incarnation) is still there, and withdraws its job if not (`save_job`'s `within`). So
        every job inserted before the row went is seen by the sweep that follows, and every job
        whose check comes after it is withdrawn by its own creator: the deletion wins.
        """
        deleted = self._collections.delete(
            collection_partition(collection), collection_row(collection), preconditions
        )
        self._sweep(jobs_partition(collection))
        return deleted

    def _sweep(self, partition: str, keep: tuple[str, ...] = ()) -> None:
        """Delete every row of a collection's jobs partition (but those in `keep`): jobs,
        history, counter rows; and forget what this process remembers of its counter rows."""
        self._counter_rows.drop(partition)
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            try:
                submit_batches(
                    self._jobs.table,
                    (
                        ("delete", {"PartitionKey": partition, "RowKey": entity["RowKey"]})
                        for entity in _keys(self._jobs.table, partition)
                        if entity["RowKey"] not in keep
                    ),
                )
            except TableTransactionError as failed:
                if failed.status_code != 404:  # a row went meanwhile (a job withdrawn): again
                    raise
                continue
            self._counter_rows.drop(partition)
            return
        raise ModifiedConcurrently("job collection")

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

    def run_nows_in_flight(self, collection: CollectionId) -> int:
        """The run-nows in flight of all a collection's jobs: only that column, of only the jobs
        that have any (a job written before the column existed counts none)."""
        query = (
            "PartitionKey eq @pk and RowKey gt @counters and RowKey lt @history"
            f" and {_RUN_NOWS} gt 0"
        )
        parameters = {
            "pk": jobs_partition(collection),
            "counters": _AFTER_COUNTERS,
            "history": _HISTORY_MARK,
        }
        rows = self._jobs.table.query_entities(query, parameters=parameters, select=[_RUN_NOWS])
        return sum(int(row.get(_RUN_NOWS) or 0) for row in rows)

    def jobs_page(
        self, collection: CollectionId, bounds: PageBounds, state: JobState | None = None
    ) -> tuple[list[StoredJob], str | None]:
        """A page of a collection's jobs in name order, optionally only those in one state; and
        the row the next page starts after (None: no more). It reads `skip` + `count` + 1 jobs,
        more only when jobs of other states lie between (the state is filtered here: see
        `jobs`)."""
        count, after, skip = bounds.count, bounds.after, bounds.skip
        query = "PartitionKey eq @pk and RowKey gt @low and RowKey lt @history"
        parameters = {
            "pk": jobs_partition(collection),
            "low": max(after, _AFTER_COUNTERS),
            "history": _HISTORY_MARK,
        }
        rows = self._jobs.table.query_entities(
            query,
            parameters=parameters,
            results_per_page=min(skip + count + 1, LARGEST_QUERY_PAGE),
        )
        found = (self._jobs.from_entity(row) for row in rows)
        matching = (job for job in found if state is None or job.document.state is state)
        page = list(itertools.islice(matching, skip, skip + count + 1))
        following = job_row(page[count - 1].id) if len(page) > count else None
        return page[:count], following

    def job_slot(self, job: JobId, *, counted: bool = False) -> JobSlot:
        """The job, and with `counted` its collection's job count (to delete it, or to read the
        count; creating a job needs no count read beforehand: see `save_job`).

        A point read and a key-range query rather than one query for both: keys joined by `or`
        make Table Storage scan the whole partition, history included (Azure's table design
        guide).
        """
        current = self._jobs.get(job_partition(job), job_row(job))
        if not counted:
            return JobSlot(current, {})
        partition = job_partition(job)
        return JobSlot(
            current, self._read_counters(partition), self._counter_rows.spares(partition)
        )

    def _read_counters(self, partition: str) -> dict[str, Counter]:
        """The collection's counter rows as stored now (and remembered as such)."""
        rows = self._jobs.table.query_entities(
            "PartitionKey eq @pk and RowKey ge @first and RowKey lt @after",
            parameters={"pk": partition, "first": COUNTER_PREFIX, "after": _AFTER_COUNTERS},
        )
        counters = {
            row["RowKey"]: Counter(
                int(row["Jobs"]), row.metadata["etag"], row.metadata.get("timestamp")
            )
            for row in rows
        }
        self._counter_rows.remember(partition, counters)
        return counters

    def save_job(
        self,
        job: JobId,
        document: JobDocument,
        preconditions: Preconditions,
        slot: JobSlot,
        max_jobs: int | None = None,
        *,
        now: datetime | None = None,
        within: StoredCollection | None = None,
    ) -> tuple[StoredJob, bool]:
        """Create or replace a job; a new one counts against `max_jobs` (QuotaExceeded).

        `slot` is what the caller read with `job_slot`; if another writer got there first, the
        slot is read again and the write retried. A new job is counted, then inserted: a creator
        refused by the quota with `now` given first corrects counts that a crash left too high
        (see COUNTERS_QUIET_FOR).

        `within` is the collection as the caller read it: a new job is kept only if that
        collection (that incarnation of it) is still there once the job is in; otherwise the
        job is withdrawn and the answer is NotFound for the collection (see
        `delete_collection`).
        """
        partition = job_partition(job)
        for attempt in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            if attempt:
                slot = JobSlot(self._jobs.get(partition, job_row(job)), {})
            preconditions.check(slot.current)
            entity = _job_entity(job, document, slot.current)
            if slot.current is not None:
                try:
                    metadata = self._jobs.table.update_entity(
                        entity, mode=UpdateMode.REPLACE, **_unchanged_since(slot.current.etag)
                    )
                except (ResourceModifiedError, ResourceNotFoundError):
                    continue
                return self._jobs.from_entity(entity, metadata["etag"]), False
            try:
                row, counted_at = self._count_new_job(partition, max_jobs, now)
            except QuotaExceeded:
                if self._jobs.get(partition, job_row(job)) is None:
                    raise
                continue  # a creator racing for the same name got it in: replace it instead
            try:
                if time.monotonic() - counted_at > COUNTED_INSERT_WITHIN_S:
                    self._uncount(partition, row, counted_at)  # a recount may take it for lost
                    continue
                metadata = self._jobs.table.create_entity(entity)
            except ResourceExistsError:  # created meanwhile by someone else: replace it instead
                self._uncount(partition, row, counted_at)
                continue
            except BaseException:
                with contextlib.suppress(Exception):  # else the place stays lost until a recount
                    self._uncount(partition, row, counted_at)
                raise
            if within is not None and not self._still_there(within):
                self._withdraw(job)
                raise NotFound(within.id)
            return self._jobs.from_entity(entity, metadata["etag"]), True
        raise ModifiedConcurrently("job")

    def _still_there(self, collection: StoredCollection) -> bool:
        current = self.collection(collection.id)
        return current is not None and current.incarnation == collection.incarnation

    def _withdraw(self, job: JobId) -> None:
        """Take back a job inserted into a collection that was deleted meanwhile. Whoever wrote
        it since, it has no collection: it goes unconditionally. Its counted place is not given
        back: the counter row may already count jobs of a collection created anew under the
        name, and a place lost (until a recount) is better than a quota exceeded."""
        with contextlib.suppress(ResourceNotFoundError):
            self._jobs.table.delete_entity(job_partition(job), job_row(job))

    def _count_new_job(
        self, partition: str, max_jobs: int | None, now: datetime | None
    ) -> tuple[str, float]:
        """Count one more job in a counter row with room; returns the row, and the moment
        (monotonic) before the write that counted it. QuotaExceeded when, as stored when it was
        counted, every row is at its allotment: the allotments add up to `max_jobs`, so then the
        collection holds that many jobs.

        A spare place of this process is taken first. Otherwise the creators of a collection
        that come while its previous counter write is under way are counted together, by the
        first of them (see `_CounterRows`).
        """
        spare = self._counter_rows.take_spare(partition, time.monotonic(), self._spares_kept_for_s)
        if spare is not None:
            return spare
        gathering, place = self._counter_rows.join(partition)
        if place:
            gathering.done.wait()
        else:
            try:
                with self._counter_rows.writer(partition):
                    creators = self._counter_rows.close(partition, gathering)
                    rows, refusal = self._take_places(partition, creators, max_jobs, now)
                gathering.outcomes = [*rows, *(refusal() for _ in range(creators - len(rows)))]
            except BaseException as failure:
                gathering.outcomes = [failure] * gathering.creators
                raise
            finally:
                gathering.done.set()
        outcome = gathering.outcomes[place]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _take_places(
        self, partition: str, wanted: int, max_jobs: int | None, now: datetime | None
    ) -> tuple[list[tuple[str, float]], Callable[[], StorageError]]:
        """Count up to `wanted` new jobs in counter rows with room, each write etag-checked: the
        row of each place taken (and the moment before its write), and what refuses those left
        without one (QuotaExceeded, or ModifiedConcurrently when other processes kept winning
        the race). A row with plenty of room gives spare places too."""
        taken: list[tuple[str, float]] = []
        fresh, corrected = False, False
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            rows = self._counter_rows.known(partition)
            if rows is None:
                rows, fresh = self._read_counters(partition), True
            counted = sum(counter.jobs for counter in rows.values())
            if len(taken) == wanted:
                return taken, functools.partial(QuotaExceeded, counted)
            if _unbalanced(rows, max_jobs):
                if fresh:  # else look again first
                    self._balance(partition, rows, max_jobs)
                self._counter_rows.forget(partition)
                fresh = False
                continue
            row, room = _roomiest(rows, max_jobs)
            if room == 0:
                if not fresh:  # full as remembered: look again before refusing
                    self._counter_rows.forget(partition)
                    continue
                if now is None or corrected or not self._correct_counts(partition, now):
                    return taken, functools.partial(QuotaExceeded, counted)
                corrected, fresh = True, False
                continue
            places = wanted - len(taken) if room is None else min(wanted - len(taken), room)
            spare = SPARE_PLACES if _far_from_quota(rows, room, places, max_jobs) else 0
            counter = rows.get(row, Counter(0, None))
            since = time.monotonic()
            try:
                self._write_counter(partition, row, counter, counter.jobs + places + spare)
            except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
                self._counter_rows.forget(partition)  # someone else wrote it: read them again
                fresh = False
                continue
            taken += [(row, since)] * places
            if spare and self._counter_rows.add_spares(partition, row, spare, since):
                threading.Thread(
                    target=self._give_back_spares, name="spare-places", daemon=True
                ).start()
        return taken, lambda: ModifiedConcurrently("job")

    def _balance(self, partition: str, rows: dict[str, Counter], max_jobs: int | None) -> None:
        """Spread the count anew so that no row counts more than its allotment while another
        has room: the count of collections counted before allotments (eight rows, any row), or
        of one whose quota was lowered. One etag-checked batch; a lost race changes nothing."""
        left = sum(counter.jobs for counter in rows.values())
        spread: dict[str, int] = {}
        for row in _COUNTER_ROWS:
            spread[row] = min(left, _allotment(row, max_jobs) or 0)
            left -= spread[row]
        spread[_COUNTER_ROWS[0]] += left  # over the quota: no row has room
        spread |= {row: 0 for row in rows if row not in spread}
        changes: list[Any] = []
        for row, jobs in spread.items():
            counter = rows.get(row, Counter(0, None))
            if jobs == counter.jobs:
                continue
            entity = {"PartitionKey": partition, "RowKey": row, "Jobs": jobs}
            if counter.etag is None:
                changes.append(("create", entity))
            else:
                mode = {"mode": UpdateMode.REPLACE, **_unchanged_since(counter.etag)}
                changes.append(("update", entity, mode))
        with contextlib.suppress(TableTransactionError):
            self._jobs.table.submit_transaction(changes)

    def _give_back_spares(self) -> None:
        """Until no spare place is left: give back those unused for SPARES_KEPT_FOR_S."""
        while True:
            time.sleep(self._spares_kept_for_s / 2)
            expired = self._counter_rows.expired(time.monotonic(), self._spares_kept_for_s)
            if expired is None:
                return
            by_row: dict[tuple[str, str], list[float]] = {}
            for partition, row, since in expired:
                by_row.setdefault((partition, row), []).append(since)
            for (partition, row), taken in by_row.items():
                with contextlib.suppress(Exception):  # else lost until a recount
                    self._uncount(partition, row, min(taken), places=len(taken))
                for _ in taken:
                    self._counter_rows.returned(partition, row)

    def _uncount(self, partition: str, row: str, since: float, places: int = 1) -> None:
        """Give back places that no job uses (taken by a write made at `since`, monotonic),
        unless a recount may already have taken them back."""
        if time.monotonic() - since > GIVE_BACK_WITHIN_S:
            return
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            counter = (self._counter_rows.known(partition) or {}).get(row)
            if counter is None or counter.etag is None:
                counter = self._read_counters(partition).get(row, Counter(0, None))
            if counter.jobs <= 0:
                return
            try:
                self._write_counter(partition, row, counter, max(counter.jobs - places, 0))
                return
            except (ResourceModifiedError, ResourceNotFoundError):
                self._counter_rows.forget(partition)
        raise ModifiedConcurrently("job")

    def _write_counter(self, partition: str, row: str, counter: Counter, jobs: int) -> None:
        """Set a counter row to `jobs` if it is still as `counter` read it (created if it was
        absent); what it now holds is remembered."""
        entity = {"PartitionKey": partition, "RowKey": row, "Jobs": jobs}
        if counter.etag is None:
            metadata = self._jobs.table.create_entity(entity)
        else:
            metadata = self._jobs.table.update_entity(
                entity, mode=UpdateMode.REPLACE, **_unchanged_since(counter.etag)
            )
        self._counter_rows.note(partition, row, Counter(jobs, metadata["etag"]))

    def _correct_counts(self, partition: str, now: datetime) -> bool:
        """Lower counter rows that count more jobs than the collection holds, which a creator's
        crash between counting and inserting leaves behind; only rows that nobody has written
        for COUNTERS_QUIET_FOR, so that no insert can still be on its way. Whether it did."""
        counters = self._read_counters(partition)
        quiet_since = now - COUNTERS_QUIET_FOR
        if any(c.written_at is None or c.written_at > quiet_since for c in counters.values()):
            return False
        excess = sum(c.jobs for c in counters.values()) - self._number_of_jobs(partition)
        corrections: list[Any] = []
        for row, counter in sorted(counters.items(), key=lambda item: -item[1].jobs):
            if excess <= 0 or counter.etag is None:  # every row read has an etag
                break
            lowered = max(counter.jobs - excess, 0)
            excess -= counter.jobs - lowered
            entity = {"PartitionKey": partition, "RowKey": row, "Jobs": lowered}
            corrections.append(
                ("update", entity, {"mode": UpdateMode.REPLACE, **_unchanged_since(counter.etag)})
            )
        self._counter_rows.forget(partition)
        if not corrections:
            return False
        try:
            self._jobs.table.submit_transaction(corrections)
        except TableTransactionError:
            return False  # a counter row changed meanwhile: it was not quiet after all
        return True

    def _number_of_jobs(self, partition: str) -> int:
        keys = self._jobs.table.query_entities(
            "PartitionKey eq @pk and RowKey gt @counters and RowKey lt @history",
            parameters={"pk": partition, "counters": _AFTER_COUNTERS, "history": _HISTORY_MARK},
            select=["RowKey"],
        )
        return sum(1 for _ in keys)

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        """Delete a job and its history; the job and its count go in one transaction."""
        partition = job_partition(job)
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            slot = self.job_slot(job, counted=True)
            preconditions.check(slot.current)
            if slot.current is None:
                return False
            row, lowered = _uncounted(partition, slot.counters, slot.spares)
            try:
                results = self._jobs.table.submit_transaction(
                    [
                        ("delete", _keys_of(slot.current), _unchanged_since(slot.current.etag)),
                        lowered,
                    ]
                )
            except TableTransactionError:
                self._counter_rows.forget(partition)
                continue
            self._counter_rows.note(partition, row, Counter(lowered[1]["Jobs"], results[1]["etag"]))
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
        low, _ = _history_range(job)
        found = self._history_rows(job, status, after="")
        return [(entity["RowKey"][len(low) :], json.loads(entity["Document"])) for entity in found]

    def history_page(
        self, job: JobId, bounds: PageBounds, status: HistoryStatus | None = None
    ) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """A page of a job's history as (id, entry), newest first (entry ids sort newest first),
        optionally only one status; and whether more follow. It reads `count` + 1 entries, and
        only the keys of those it skips."""
        count, after, skip = bounds.count, bounds.after, bounds.skip
        low, _ = _history_range(job)
        if skip:
            keys = self._history_rows(job, status, after, per_page=skip, select=["RowKey"])
            skipped = list(itertools.islice(keys, skip))
            if len(skipped) < skip:
                return [], False
            after = skipped[-1]["RowKey"][len(low) :]
        rows = self._history_rows(job, status, after, per_page=count + 1)
        found = [
            (entity["RowKey"][len(low) :], json.loads(entity["Document"]))
            for entity in itertools.islice(rows, count + 1)
        ]
        return found[:count], len(found) > count

    def _history_rows(
        self,
        job: JobId,
        status: HistoryStatus | None,
        after: str,
        *,
        per_page: int | None = None,
        select: list[str] | None = None,
    ) -> Iterator[Any]:
        """A job's history rows in key order (newest first), after the entry id `after`, read
        `per_page` at a time (the service's own limit, 1,000, when None)."""
        low, high = _history_range(job)
        query = "PartitionKey eq @pk and RowKey gt @low and RowKey lt @high"
        parameters = {"pk": job_partition(job), "low": low + after, "high": high}
        if status is not None:
            query += " and Status eq @status"
            parameters["status"] = status.value
        if per_page is not None:
            per_page = min(per_page, LARGEST_QUERY_PAGE)
        return iter(
            self._jobs.table.query_entities(
                query, parameters=parameters, results_per_page=per_page, select=select
            )
        )

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
    ) -> StoredJob | None:
        """Write a job's new document and history entries if the job is as `stored` read it.

        The document and the newest entries are one batch: an outcome is recorded whole or not
        at all. Returns the job as written (its new etag, for a next write without a read), or
        None when another writer changed the job first.
        """
        room = LARGEST_BATCH - 1
        older, newest = history[:-room] if len(history) > room else [], history[-room:]
        # Entries that do not fit in the batch (postponed occurrences) go first; writing them
        # again after a failed attempt only overwrites them.
        self.add_history(stored.id, list(older))
        operations: list[Any] = [_replacement(Stored(stored.id, document, stored.etag))]
        operations += [("upsert", _history_entity(stored.id, *entry)) for entry in newest]
        try:
            results = self._jobs.table.submit_transaction(operations)
        except TableTransactionError:
            return None
        return Stored(stored.id, document, results[0]["etag"])

    def settle_jobs(self, writes: list[tuple[StoredJob, JobDocument]]) -> list[StoredJob | None]:
        """Write the new documents of several jobs of one collection (at most LARGEST_BATCH, no
        job twice) in one batch, each only if its job is as read: for each, the job as written,
        or None where another writer changed (or deleted) it first. A batch is written whole or
        not at all, so one lost race leaves the batch out and the others go again without it."""
        written: list[StoredJob | None] = [None] * len(writes)
        left = list(range(len(writes)))
        while left:
            operations = [
                _replacement(Stored(writes[at][0].id, writes[at][1], writes[at][0].etag))
                for at in left
            ]
            try:
                results = self._jobs.table.submit_transaction(operations)
            except TableTransactionError as failed:
                if failed.status_code not in _RACES_LOST:
                    raise
                # The operation that failed, where the service names it (else the first): one
                # taken for a loser by mistake was not written either, and only reads again.
                left.pop(min(max(failed.index, 0), len(left) - 1))
                continue
            for at, metadata in zip(left, results, strict=True):
                written[at] = Stored(writes[at][0].id, writes[at][1], metadata["etag"])
            break
        return written

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


def _job_columns(document: JobDocument) -> dict[str, Any]:
    """A job document as table columns: whole, as JSON, its state (which listings filter on)
    and its run-nows in flight (which the run-now bound of its collection adds up). A stored
    job is read back with `JobDocument.from_json`."""
    return {
        "State": document.state.value,
        _RUN_NOWS: document.run_nows_in_flight,
        "Document": _json(document.to_json()),
    }


def _allotment(row: str, max_jobs: int | None) -> int | None:
    """The share of `max_jobs` that a counter row may count (None: no limit). The shares add up
    to `max_jobs`; rows of stripes that no longer exist have none."""
    stripe = row.removeprefix(COUNTER_PREFIX)
    if not stripe.isdigit() or int(stripe) >= COUNTER_SHARDS:
        return 0
    if max_jobs is None:
        return None
    return max_jobs // COUNTER_SHARDS + (1 if int(stripe) < max_jobs % COUNTER_SHARDS else 0)


def _room(row: str, counter: Counter, max_jobs: int | None) -> int | None:
    """How many more jobs a counter row may count (None: any number)."""
    allotment = _allotment(row, max_jobs)
    return None if allotment is None else max(allotment - counter.jobs, 0)


def _roomiest(rows: dict[str, Counter], max_jobs: int | None) -> tuple[str, int | None]:
    """A counter row with the most room, and its room: rows fill evenly, and creators of other
    processes seldom want the same one (ties go to chance). Unlimited, one that counts the
    fewest jobs."""
    nothing = Counter(0, None)
    if max_jobs is None:
        fewest = min(rows.get(row, nothing).jobs for row in _COUNTER_ROWS)
        ties = [row for row in _COUNTER_ROWS if rows.get(row, nothing).jobs == fewest]
        return random.choice(ties), None
    room = {row: _room(row, rows.get(row, nothing), max_jobs) or 0 for row in _COUNTER_ROWS}
    most = max(room.values())
    return random.choice([row for row, places in room.items() if places == most]), most


def _far_from_quota(
    rows: dict[str, Counter], room: int | None, places: int, max_jobs: int | None
) -> bool:
    """Whether a counter write of `places` in a row with `room` may take spares beside them."""
    if max_jobs is None or room is None:
        return True
    counted = sum(counter.jobs for counter in rows.values()) + places + SPARE_PLACES
    return room >= places + 2 * SPARE_PLACES and counted <= max_jobs - SPARE_HEADROOM


def _unbalanced(rows: dict[str, Counter], max_jobs: int | None) -> bool:
    """Whether a row counts more than its allotment while another has room: then the rows with
    room do not tell how much room the collection has."""
    if max_jobs is None:
        return False
    over = any(counter.jobs > (_allotment(row, max_jobs) or 0) for row, counter in rows.items())
    return over and _roomiest(rows, max_jobs)[1] != 0


def _uncounted(
    partition: str, counters: dict[str, Counter], spares: dict[str, int]
) -> tuple[str, tuple[Any, ...]]:
    """The counter row a deletion takes its job from, and the batch operation that does: the row
    that counts the most jobs (this process's spare places aside), which keeps the rows' room
    even and never takes a spare place."""
    row = max(
        counters,
        key=lambda name: counters[name].jobs - spares.get(name, 0),
        default=_COUNTER_ROWS[0],
    )
    counter = counters.get(row, Counter(0, None))
    entity = {"PartitionKey": partition, "RowKey": row, "Jobs": max(counter.jobs - 1, 0)}
    if counter.etag is None:
        return row, ("upsert", entity)
    return row, ("update", entity, {"mode": UpdateMode.REPLACE, **_unchanged_since(counter.etag)})


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
