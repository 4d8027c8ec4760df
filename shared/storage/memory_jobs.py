"""Jobs in memory (memory_store.py says what for): each collection's jobs partition as Table
Storage keeps it (the jobs by row key, the executor's gate, the run-now gate), their count, and
the executor's writes to them. Every call takes the store's lock, so that it is one atomic change.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from shared.domain.history import HistoryEntry
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import JobState
from shared.domain.job_document import JobDocument
from shared.storage.batches import LARGEST_BATCH
from shared.storage.counter_rows import Counter
from shared.storage.documents import (
    JobSlot,
    PageBounds,
    Preconditions,
    RunNowsInFlight,
    Stored,
    StoredCollection,
    StoredJob,
    as_json,
)
from shared.storage.errors import (
    ChangedSinceRead,
    CollectionChanged,
    ModifiedConcurrently,
    NotFound,
    QuotaExceeded,
)
from shared.storage.job_codec import decode_job, encode_job
from shared.storage.job_rows import claim_column
from shared.storage.keys import COUNTER_PREFIX, job_row, jobs_partition
from shared.storage.memory_records import HistoryInMemory, new_etag

# The one counter a collection's jobs are counted in here (Table Storage spreads them over rows).
COUNTER_ROW = f"{COUNTER_PREFIX}memory"


@dataclass(frozen=True)
class _Job:
    """A job as stored: the names it was created under, its document's JSON, and its etag."""

    names: JobId
    text: str
    etag: str

    def stored(self) -> StoredJob:
        return Stored(self.names, decode_job(json.loads(self.text)), self.etag)


@dataclass
class _Partition:
    """What Table Storage keeps in one collection's jobs partition: the jobs (by row key), the
    executor's gate (its state) and the run-now gate (its etag)."""

    jobs: dict[str, _Job]
    state: str | None = None
    run_now_gate: str | None = None


class JobsInMemory:
    """Every collection's jobs partition: the jobs and the executor's records in them (see
    interface.py's JobStore and ExecutorStore for what each call promises). `stored_terms` says
    which incarnation and version of a collection is stored (memory_store.py keeps those)."""

    def __init__(
        self,
        lock: threading.RLock,
        history: HistoryInMemory,
        stored_terms: Callable[[CollectionId], tuple[str, str] | None],
    ) -> None:
        self._lock, self._history, self._stored_terms = lock, history, stored_terms
        self._partitions: dict[str, _Partition] = {}

    def sweep(self, collection: CollectionId, *, keep_state: bool) -> None:
        """Empty a collection's jobs partition: jobs, their history, the run-now gate; and the
        executor's gate unless kept."""
        partition = jobs_partition(collection)
        with self._lock:
            swept = self._partitions.pop(partition, None)
            self._history.drop_partition(partition)
            if keep_state and swept is not None and swept.state is not None:
                self._partitions[partition] = _Partition({}, swept.state)

    # --- jobs -----------------------------------------------------------------------------

    def job(self, job: JobId) -> StoredJob | None:
        with self._lock:
            row = self._row(job)
        return row.stored() if row is not None else None

    def existing_job(self, job: JobId) -> StoredJob:
        stored = self.job(job)
        if stored is None:
            raise NotFound(job)
        return stored

    def jobs(self, collection: CollectionId, state: JobState | None = None) -> list[StoredJob]:
        found = (row.stored() for row in self._rows_after(collection, ""))
        return [job for job in found if state is None or job.document.state is state]

    def jobs_page(
        self, collection: CollectionId, bounds: PageBounds, state: JobState | None = None
    ) -> tuple[list[StoredJob], str | None]:
        count, skip = bounds.count, bounds.skip
        found = (row.stored() for row in self._rows_after(collection, bounds.after))
        matching = (job for job in found if state is None or job.document.state is state)
        page = list(itertools.islice(matching, skip, skip + count + 1))
        following = job_row(page[count - 1].id) if len(page) > count else None
        return page[:count], following

    def run_nows_in_flight(self, collection: CollectionId) -> RunNowsInFlight:
        with self._lock:
            partition = self._partitions.get(jobs_partition(collection))
            if partition is None:
                return RunNowsInFlight(0, None)
            rows, gate = list(partition.jobs.values()), partition.run_now_gate
        return RunNowsInFlight(sum(row.stored().document.run_nows_in_flight for row in rows), gate)

    def accept_run_now(
        self, stored: StoredJob, document: JobDocument, in_flight: RunNowsInFlight
    ) -> StoredJob | None:
        with self._lock:
            partition = self._partitions.get(jobs_partition(stored.id.collection))
            gate = partition.run_now_gate if partition is not None else None
            if gate != in_flight.gate or partition is None or not self._unchanged(stored):
                return None
            partition.run_now_gate = new_etag()
            return self._rewrite(stored, document)

    def job_slot(
        self, job: JobId, *, counted: bool = False, trust_known_absence: bool = False
    ) -> JobSlot:
        with self._lock:
            row, jobs = self._row(job), self._count(job.collection)
        current = row.stored() if row is not None else None
        return JobSlot(current, {COUNTER_ROW: Counter(jobs, None)} if counted else {})

    def save_job(
        self, job: JobId, document: JobDocument, preconditions: Preconditions, slot: JobSlot,
        max_jobs: int | None = None, *, now: datetime | None = None,
        within: StoredCollection | None = None,
    ) -> tuple[StoredJob, bool]:  # fmt: skip
        # `now` lets Table Storage correct counts a crash left too high; nothing crashes here.
        preconditions.check(slot.current)
        text = as_json(encode_job(document))
        with self._lock:
            row = self._row(job)
            read = None if slot.current is None else slot.current.etag
            if (None if row is None else row.etag) != read:
                # Another writer came first: the document was built on what it changed.
                raise ChangedSinceRead(job)
            if within is not None:
                self._check_terms(job, within)
            if row is not None:
                written = _Job(row.names, text, new_etag())
            else:
                jobs = self._count(job.collection)
                if max_jobs is not None and jobs >= max_jobs:
                    raise QuotaExceeded(jobs)
                written = _Job(job, text, new_etag())
            partition = self._partitions.setdefault(jobs_partition(job.collection), _Partition({}))
            partition.jobs[job_row(job)] = written
        return written.stored(), row is None

    def _check_terms(self, job: JobId, within: StoredCollection) -> None:
        """A job's write lands only while the collection it was built for (`within`) is there,
        the same incarnation with the same terms for jobs (version): NotFound when it is gone,
        CollectionChanged when it was created anew or its terms changed."""
        stored = self._stored_terms(within.id)
        if stored is None:
            raise NotFound(within.id)
        if stored != (within.incarnation, within.version):
            raise CollectionChanged(job)

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        with self._lock:
            row = self._row(job)
            preconditions.check(row.stored() if row is not None else None)
            if row is None:
                return False
            del self._partitions[jobs_partition(job.collection)].jobs[job_row(job)]
            self._history.remove_all(job)
        return True

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
            job = row.stored()
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

    # --- what the calls above share (each caller holds the lock) ---------------------------

    def _row(self, job: JobId) -> _Job | None:
        partition = self._partitions.get(jobs_partition(job.collection))
        return partition.jobs.get(job_row(job)) if partition is not None else None

    def _rows_after(self, collection: CollectionId, after: str) -> list[_Job]:
        """The jobs of a collection whose row keys sort after `after`, in key order."""
        with self._lock:
            partition = self._partitions.get(jobs_partition(collection))
            jobs = {} if partition is None else partition.jobs
            return [jobs[key] for key in sorted(jobs) if key > after]

    def _count(self, collection: CollectionId) -> int:
        partition = self._partitions.get(jobs_partition(collection))
        return len(partition.jobs) if partition is not None else 0

    def _unchanged(self, stored: StoredJob) -> bool:
        row = self._row(stored.id)
        return row is not None and row.etag == stored.etag

    def _rewrite(self, stored: StoredJob, document: JobDocument) -> StoredJob:
        """Write a job's new document, keeping the names it was created under."""
        row = self._row(stored.id)
        assert row is not None  # the caller checked that it is unchanged
        written = _Job(row.names, as_json(encode_job(document)), new_etag())
        self._partitions[jobs_partition(stored.id.collection)].jobs[job_row(stored.id)] = written
        return Stored(stored.id, document, written.etag, stored.incarnation)
