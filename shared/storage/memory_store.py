"""The Store (interface.py) in this process's memory: for tests that should need no Azurite, and
never for production (nothing survives the process, and two processes share nothing).

It answers as TableStore answers wherever a caller can tell: documents go through the same JSON
they are stored as (a caller never holds the stored object), every write gives a new etag, keys
fold names to one case as keys.py does and listings come in key order, a replace keeps the
names' case from the creation. One lock makes every call atomic, so a race that Table Storage
settles with etags is settled here by coming second: a write checked against an etag still
loses when another writer came first. tests/storage/conformance/ runs the same tests on both.

Collections and jobs live here; history and the classic API's records in memory_records.py.
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CloudServiceId, CollectionId, JobId
from shared.domain.job_definition import HistoryStatus, JobState
from shared.domain.job_document import JobDocument
from shared.storage.batches import LARGEST_BATCH
from shared.storage.counter_rows import Counter
from shared.storage.documents import (
    HistoryEntry,
    JobSlot,
    PageBounds,
    Preconditions,
    RunNowsInFlight,
    Stored,
    StoredCloudService,
    StoredCollection,
    StoredJob,
    as_json,
)
from shared.storage.errors import ModifiedConcurrently, NotFound, QuotaExceeded
from shared.storage.interface import Store
from shared.storage.jobs import claim_column
from shared.storage.keys import (
    COUNTER_PREFIX,
    collection_partition,
    collection_row,
    job_row,
    jobs_partition,
    table_key,
)
from shared.storage.memory_records import ClassicRecordsInMemory, HistoryInMemory, new_etag

# The one counter a collection's jobs are counted in here (Table Storage spreads them over rows).
COUNTER_ROW = f"{COUNTER_PREFIX}memory"


@dataclass(frozen=True)
class _Row:
    """A document as stored: its JSON text, the names it was written under, and its etag."""

    names: CollectionId | JobId
    text: str
    etag: str
    incarnation: str = ""


@dataclass
class _Partition:
    """What Table Storage keeps in one collection's jobs partition: the jobs (by row key), the
    executor's gate (its state) and the run-now gate (its etag)."""

    jobs: dict[str, _Row]
    state: str | None = None
    run_now_gate: str | None = None


class MemoryStore:
    """The Store in memory (see interface.py for what each call promises)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._collections: dict[tuple[str, str], _Row] = {}
        self._partitions: dict[str, _Partition] = {}
        self._history = HistoryInMemory(self._lock)
        self._classic = ClassicRecordsInMemory(self._lock)

    def create_tables(self) -> None:
        """Nothing to create: the dictionaries exist from the start."""

    # --- collections ----------------------------------------------------------------------

    def collection(self, collection: CollectionId) -> StoredCollection | None:
        with self._lock:
            row = self._collections.get(_collection_key(collection))
        return _stored_collection(row) if row is not None else None

    def existing_collection(self, collection: CollectionId) -> StoredCollection:
        stored = self.collection(collection)
        if stored is None:
            raise NotFound(collection)
        return stored

    def collections(
        self, subscription: str, resource_group: str | None = None
    ) -> list[StoredCollection]:
        partition = table_key(subscription)
        prefix = None if resource_group is None else table_key(resource_group) + ":"
        with self._lock:
            rows = sorted(
                (key[1], row)
                for key, row in self._collections.items()
                if key[0] == partition and (prefix is None or key[1].startswith(prefix))
            )
        return [_stored_collection(row) for _, row in rows]

    def all_collections(self) -> Iterator[StoredCollection]:
        with self._lock:
            rows = [row for _, row in sorted(self._collections.items())]
        return (_stored_collection(row) for row in rows)

    def save_collection(
        self, collection: CollectionId, document: CollectionDocument, preconditions: Preconditions
    ) -> tuple[StoredCollection, bool]:
        key = _collection_key(collection)
        text = as_json(document.to_wire())
        with self._lock:
            current = self._collections.get(key)
            preconditions.check(_stored_collection(current) if current is not None else None)
            if current is None:
                row = _Row(collection, text, new_etag(), uuid.uuid4().hex)
                # A new incarnation starts with an empty partition, but for the executor's gate.
                self._sweep(jobs_partition(collection), keep_state=True)
            else:
                # The subscription's case is the latest writer's (it is not a kept column).
                assert isinstance(current.names, CollectionId)
                names = replace(current.names, subscription=collection.subscription)
                row = _Row(names, text, new_etag(), current.incarnation)
            self._collections[key] = row
        return _stored_collection(row), current is None

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        key = _collection_key(collection)
        with self._lock:
            current = self._collections.get(key)
            preconditions.check(_stored_collection(current) if current is not None else None)
            self._collections.pop(key, None)
            self._sweep(jobs_partition(collection), keep_state=False)
        return current is not None

    def _sweep(self, partition: str, *, keep_state: bool) -> None:
        """Empty a collection's jobs partition: jobs, their history, the run-now gate; and the
        executor's gate unless kept."""
        swept = self._partitions.pop(partition, None)
        self._history.drop_partition(partition)
        if keep_state and swept is not None and swept.state is not None:
            self._partitions[partition] = _Partition({}, swept.state)

    # --- jobs -----------------------------------------------------------------------------

    def job(self, job: JobId) -> StoredJob | None:
        with self._lock:
            row = self._job_row(job)
        return _stored_job(row) if row is not None else None

    def existing_job(self, job: JobId) -> StoredJob:
        stored = self.job(job)
        if stored is None:
            raise NotFound(job)
        return stored

    def jobs(self, collection: CollectionId, state: JobState | None = None) -> list[StoredJob]:
        found = (_stored_job(row) for row in self._rows_after(collection, ""))
        return [job for job in found if state is None or job.document.state is state]

    def jobs_page(
        self, collection: CollectionId, bounds: PageBounds, state: JobState | None = None
    ) -> tuple[list[StoredJob], str | None]:
        count, skip = bounds.count, bounds.skip
        found = (_stored_job(row) for row in self._rows_after(collection, bounds.after))
        matching = (job for job in found if state is None or job.document.state is state)
        page = list(itertools.islice(matching, skip, skip + count + 1))
        following = job_row(page[count - 1].id) if len(page) > count else None
        return page[:count], following

    def _rows_after(self, collection: CollectionId, after: str) -> list[_Row]:
        """The job rows of a collection whose keys sort after `after`, in key order."""
        with self._lock:
            partition = self._partitions.get(jobs_partition(collection))
            jobs = {} if partition is None else partition.jobs
            return [jobs[key] for key in sorted(jobs) if key > after]

    def run_nows_in_flight(self, collection: CollectionId) -> RunNowsInFlight:
        with self._lock:
            partition = self._partitions.get(jobs_partition(collection))
            if partition is None:
                return RunNowsInFlight(0, None)
            rows = list(partition.jobs.values())
            gate = partition.run_now_gate
        return RunNowsInFlight(
            sum(_stored_job(row).document.run_nows_in_flight for row in rows), gate
        )

    def accept_run_now(
        self, stored: StoredJob, document: JobDocument, in_flight: RunNowsInFlight
    ) -> StoredJob | None:
        with self._lock:
            partition = self._partitions.get(jobs_partition(stored.id.collection))
            gate = partition.run_now_gate if partition is not None else None
            if gate != in_flight.gate or not self._unchanged(stored):
                return None
            assert partition is not None  # the job is there, so is its partition
            partition.run_now_gate = new_etag()
            return self._rewrite(stored, document)

    def job_slot(self, job: JobId, *, counted: bool = False) -> JobSlot:
        with self._lock:
            row = self._job_row(job)
            jobs = self._count(job.collection)
        current = _stored_job(row) if row is not None else None
        return JobSlot(current, {COUNTER_ROW: Counter(jobs, None)} if counted else {})

    def save_job(
        self, job: JobId, document: JobDocument, preconditions: Preconditions, slot: JobSlot,
        max_jobs: int | None = None, *, now: datetime | None = None,
        within: StoredCollection | None = None,
    ) -> tuple[StoredJob, bool]:  # fmt: skip
        # `now` lets TableStore correct counts a crash left too high; nothing crashes here.
        preconditions.check(slot.current)
        text = as_json(document.to_wire())
        with self._lock:
            row = self._job_row(job)
            if row is not None:
                if slot.current is None or slot.current.etag != row.etag:
                    # Another writer came first: decided again on what is stored now.
                    preconditions.check(_stored_job(row))
                written = _Row(row.names, text, new_etag())
            else:
                if slot.current is not None:
                    preconditions.check(None)
                jobs = self._count(job.collection)
                if max_jobs is not None and jobs >= max_jobs:
                    raise QuotaExceeded(jobs)
                if within is not None and not self._still_there(within):
                    raise NotFound(within.id)
                written = _Row(job, text, new_etag())
            partition = self._partitions.setdefault(jobs_partition(job.collection), _Partition({}))
            partition.jobs[job_row(job)] = written
        return _stored_job(written), row is None

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        with self._lock:
            row = self._job_row(job)
            preconditions.check(_stored_job(row) if row is not None else None)
            if row is None:
                return False
            del self._partitions[jobs_partition(job.collection)].jobs[job_row(job)]
            self._history.remove_all(job)
        return True

    def _job_row(self, job: JobId) -> _Row | None:
        partition = self._partitions.get(jobs_partition(job.collection))
        return partition.jobs.get(job_row(job)) if partition is not None else None

    def _count(self, collection: CollectionId) -> int:
        partition = self._partitions.get(jobs_partition(collection))
        return len(partition.jobs) if partition is not None else 0

    def _still_there(self, collection: StoredCollection) -> bool:
        current = self._collections.get(_collection_key(collection.id))
        return current is not None and current.incarnation == collection.incarnation

    def _unchanged(self, stored: StoredJob) -> bool:
        row = self._job_row(stored.id)
        return row is not None and row.etag == stored.etag

    def _rewrite(self, stored: StoredJob, document: JobDocument) -> StoredJob:
        """Write a job's new document (the caller holds the lock and checked its etag)."""
        row = self._job_row(stored.id)
        assert row is not None
        written = _Row(row.names, as_json(document.to_wire()), new_etag())
        self._partitions[jobs_partition(stored.id.collection)].jobs[job_row(stored.id)] = written
        return Stored(stored.id, document, written.etag, stored.incarnation)

    # --- history --------------------------------------------------------------------------

    def add_history(self, job: JobId, entries: list[HistoryEntry]) -> None:
        self._history.add(job, entries)

    def history(self, job: JobId, status: HistoryStatus | None = None) -> list[HistoryEntry]:
        return self._history.entries(job, status)

    def history_page(
        self, job: JobId, bounds: PageBounds, status: HistoryStatus | None = None
    ) -> tuple[list[HistoryEntry], bool]:
        return self._history.page(job, bounds, status)

    def history_ids(self, job: JobId, after: str = "") -> list[str]:
        return self._history.ids(job, after)

    def remove_history(self, job: JobId, entry_ids: Iterable[str]) -> None:
        self._history.remove(job, entry_ids)

    # --- the executor's gate and settlement -----------------------------------------------

    def collection_state(self, collection: CollectionId) -> str | None:
        with self._lock:
            partition = self._partitions.get(jobs_partition(collection))
            return partition.state if partition is not None else None

    def set_collection_state(self, collection: CollectionId, state: str) -> None:
        with self._lock:
            self._partitions.setdefault(jobs_partition(collection), _Partition({})).state = state

    def settle_job(
        self, stored: StoredJob, document: JobDocument, history: list[HistoryEntry]
    ) -> StoredJob | None:
        room = LARGEST_BATCH - 1
        older, newest = history[:-room] if len(history) > room else [], history[-room:]
        with self._lock:
            # As on Table Storage: what does not fit in the batch is written first, whatever
            # becomes of the batch (writing it again only overwrites it).
            self._history.add(stored.id, list(older))
            if not self._unchanged(stored):
                return None
            self._history.add(stored.id, list(newest))
            return self._rewrite(stored, document)

    def overdue_claims(self, before: datetime, at_most: int) -> int:
        return len(self.jobs_with_overdue_claims(before, at_most))

    def jobs_with_overdue_claims(self, before: datetime, at_most: int) -> list[StoredJob]:
        deadline = claim_column(before)
        with self._lock:
            rows = [
                partition.jobs[key]
                for _, partition in sorted(self._partitions.items())
                for key in sorted(partition.jobs)
            ]
        found: list[StoredJob] = []
        for row in rows:
            job = _stored_job(row)
            claimed = claim_column(job.document.claimed_until)
            if claimed and claimed < deadline and len(found) < at_most:
                found.append(job)
        return found

    def settle_jobs(self, writes: list[tuple[StoredJob, JobDocument]]) -> list[StoredJob | None]:
        if len({job_row(stored.id) for stored, _ in writes}) < len(writes):
            raise ValueError("settle_jobs writes each job at most once")
        with self._lock:
            return [
                self._rewrite(stored, document) if self._unchanged(stored) else None
                for stored, document in writes
            ]

    def replace_jobs(self, jobs: Iterable[StoredJob]) -> None:
        # In batches as on Table Storage: a lost race leaves its batch out, not those before.
        every = list(jobs)
        for start in range(0, len(every), LARGEST_BATCH):
            batch = every[start : start + LARGEST_BATCH]
            with self._lock:
                if not all(self._unchanged(stored) for stored in batch):
                    raise ModifiedConcurrently("job")
                for stored in batch:
                    self._rewrite(stored, stored.document)

    # --- the classic API's records --------------------------------------------------------

    def cloud_service(self, cloud_service: CloudServiceId) -> StoredCloudService | None:
        return self._classic.cloud_service(cloud_service)

    def cloud_services(self, subscription: str) -> list[StoredCloudService]:
        return self._classic.cloud_services(subscription)

    def create_cloud_service(
        self, cloud_service: CloudServiceId, document: dict[str, str]
    ) -> StoredCloudService:
        return self._classic.create_cloud_service(cloud_service, document)

    def delete_cloud_service(self, cloud_service: CloudServiceId) -> bool:
        return self._classic.delete_cloud_service(cloud_service)

    def record_operation(self, subscription: str, request_id: str) -> None:
        self._classic.record_operation(subscription, request_id)

    def operation_recorded(self, subscription: str, request_id: str) -> bool:
        return self._classic.operation_recorded(subscription, request_id)

    def remove_operations_before(self, instant: datetime) -> int:
        return self._classic.remove_operations_before(instant)


def _collection_key(collection: CollectionId) -> tuple[str, str]:
    return collection_partition(collection), collection_row(collection)


def _stored_collection(row: _Row) -> StoredCollection:
    assert isinstance(row.names, CollectionId)
    document = CollectionDocument.from_wire(json.loads(row.text))
    return Stored(row.names, document, row.etag, row.incarnation)


def _stored_job(row: _Row) -> StoredJob:
    assert isinstance(row.names, JobId)
    return Stored(row.names, JobDocument.from_wire(json.loads(row.text)), row.etag)


if TYPE_CHECKING:  # mypy holds the memory store to the protocol's signatures
    _IS_A_STORE: Store = MemoryStore()
