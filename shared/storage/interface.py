"""The storage interface: what the execution and API layers may ask of storage, one small
protocol per aggregate (collections, jobs, history, the executor's records, the classic API's
records), and the records they get back. Its docstrings are the contract; each protocol is kept
once on Table Storage (table_store.py wires those parts) and once in memory (memory_store.py),
and a test that needs storage to misbehave wraps the one aggregate it cares about. `Storage`
holds one implementation of each; the composition root (shared/services.py) builds it.

A save or delete that loses a race to another writer is tried again with what is stored now,
and raises ModifiedConcurrently when it keeps losing (`settle_job` and `replace_jobs` say
instead what a lost race does to them); a write whose Preconditions do not hold raises
EtagMismatch; a read of a resource that must exist raises NotFound (shared/storage/errors.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from shared.domain.collection_document import CollectionDocument
from shared.domain.history import HistoryEntry
from shared.domain.ids import CloudServiceId, CollectionId, JobId
from shared.domain.job_definition import HistoryStatus, JobState
from shared.domain.job_document import JobDocument
from shared.storage.documents import (
    JobSlot,
    PageBounds,
    Preconditions,
    RunNowsInFlight,
    Stored,
    StoredCloudService,
    StoredCollection,
    StoredJob,
)

__all__ = [
    "ClassicStore",
    "CollectionStore",
    "ExecutorStore",
    "HistoryEntry",
    "HistoryStore",
    "JobSlot",
    "JobStore",
    "PageBounds",
    "Preconditions",
    "RunNowsInFlight",
    "Storage",
    "Stored",
    "StoredCloudService",
    "StoredCollection",
    "StoredJob",
]


class CollectionStore(Protocol):
    """Job collections, one record each."""

    def collection(self, collection: CollectionId) -> StoredCollection | None:
        """The collection as stored, or None."""

    def existing_collection(self, collection: CollectionId) -> StoredCollection:
        """The collection as stored, or NotFound."""

    def collection_for_jobs(self, collection: CollectionId) -> StoredCollection:
        """The collection as a job's write takes it (`save_job`'s `within`), or NotFound: read
        recently, not necessarily now; the write checks that it still holds."""

    def collections(
        self, subscription: str, resource_group: str | None = None
    ) -> list[StoredCollection]:
        """A subscription's collections, or one resource group's, in name order."""

    def all_collections(self) -> Iterator[StoredCollection]:
        """Every collection of every subscription (for maintenance, not for requests)."""

    def save_collection(
        self, collection: CollectionId, document: CollectionDocument, preconditions: Preconditions
    ) -> tuple[StoredCollection, bool]:
        """Create or replace a collection; what is now stored, and whether it was created. A
        replace keeps the case of the names it was created with, and its incarnation; its
        version changes when its terms for jobs (SKU, quota, region) do. A new
        collection (a new incarnation) starts with no jobs and no history, whatever a deletion
        of the same name left behind; only its recorded state (`set_collection_state`) stays."""

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        """Delete a collection, every job in it and their history; whether there was one. A job
        created in it at the same moment is not kept: a deletion wins over a creation (see
        `save_job`'s `within`)."""


class JobStore(Protocol):
    """The jobs of every collection, counted against their collection's quota."""

    def job(self, job: JobId) -> StoredJob | None:
        """The job as stored, or None."""

    def existing_job(self, job: JobId) -> StoredJob:
        """The job as stored, or NotFound."""

    def jobs(self, collection: CollectionId, state: JobState | None = None) -> list[StoredJob]:
        """The jobs of a collection in name order, optionally only those in one state."""

    def jobs_page(
        self, collection: CollectionId, bounds: PageBounds, state: JobState | None = None
    ) -> tuple[list[StoredJob], str | None]:
        """A page of a collection's jobs in name order, optionally only those in one state; and
        what the next page starts after (None: no more)."""

    def run_nows_in_flight(self, collection: CollectionId) -> RunNowsInFlight:
        """The run-nows accepted and not yet recorded, of all a collection's jobs, with what
        `accept_run_now` checks to know that none was accepted since."""

    def accept_run_now(
        self, stored: StoredJob, document: JobDocument, in_flight: RunNowsInFlight
    ) -> StoredJob | None:
        """Write a job's document holding one more run-now if neither the job nor its
        collection's run-nows changed since `stored` and `in_flight` were read: the job as
        written, or None when another writer came first (read both again and decide again)."""

    def job_slot(
        self, job: JobId, *, counted: bool = False, trust_known_absence: bool = False
    ) -> JobSlot:
        """The job as read for a write (`save_job`, or a read-modify-write of the caller's); with
        `counted`, its collection's job count too. With `trust_known_absence` a job known not to
        be there may be taken as absent unread (for a write checked by `save_job`: one created
        meanwhile makes it ChangedSinceRead)."""

    def save_job(
        self, job: JobId, document: JobDocument, preconditions: Preconditions, slot: JobSlot,
        max_jobs: int | None = None, *, now: datetime | None = None,
        within: StoredCollection | None = None,
    ) -> tuple[StoredJob, bool]:  # fmt: skip
        """Create or replace a job; what is now stored, and whether it was created.

        `slot` is what the caller read with `job_slot`, and what `document` was built from; if
        another writer changed, created or deleted the job since, nothing is written and the
        answer is ChangedSinceRead (read it again and build the document anew). A new job
        counts against `max_jobs` (QuotaExceeded when the collection holds that many): the
        count is exact under races, and a crash may only ever leave it too high, never too low;
        a creator refused with `now` given first corrects counts left too high by crashes long
        enough ago. With `within` (the collection as the caller read it, whose terms the
        document was built on), a new job is kept only if that collection is still there once
        the job is in; otherwise it is withdrawn and the answer is NotFound for the collection.
        A write built on another incarnation of it (deleted and created anew since), or on
        terms that have changed since (its version), is not made: the answer is
        CollectionChanged (a ChangedSinceRead: read the collection and the job again and build
        the document anew).
        """

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        """Delete a job and its history, and uncount it; whether there was one."""


class HistoryStore(Protocol):
    """Each job's history of execution attempts."""

    def add(self, job: JobId, entries: list[HistoryEntry]) -> None:
        """Record execution attempts as (entry id, entry); an id written again replaces its
        entry. Ids order the entries, newest first (shared/domain/history.py)."""

    def entries(self, job: JobId, status: HistoryStatus | None = None) -> list[HistoryEntry]:
        """A job's history, newest first, as (id, entry); optionally only one status."""

    def page(
        self, job: JobId, bounds: PageBounds, status: HistoryStatus | None = None
    ) -> tuple[list[HistoryEntry], bool]:
        """A page of a job's history, newest first, optionally only one status; and whether
        more follow. Only the entries shown are read whole."""

    def ids(self, job: JobId, after: str = "") -> list[str]:
        """The ids of a job's history entries (only those sorting after `after`), newest first."""

    def remove(self, job: JobId, entry_ids: Iterable[str]) -> None:
        """Forget these entries of a job's history (those already gone are no matter)."""


class ExecutorStore(Protocol):
    """The executor's gate and settlement: what it reads before a run and writes after one."""

    def collection_state(self, collection: CollectionId) -> str | None:
        """The state the executor checks before running any job of the collection (None if
        never recorded): one point read, whatever the collection holds."""

    def set_collection_state(self, collection: CollectionId, state: str) -> None:
        """Record the state the executor checks before running any job of the collection."""

    def settle_job(
        self, stored: StoredJob, document: JobDocument, history: list[HistoryEntry]
    ) -> StoredJob | None:
        """Write a job's new document and history entries if the job is still as `stored` read
        it; the job as now stored, with its new etag (what the next write of the same job is
        checked against), or None when another writer changed (or deleted) the job first. The
        document and the newest entries are written together: an outcome is recorded whole or
        not at all."""

    def overdue_claims(self, before: datetime, at_most: int) -> int:
        """How many jobs (up to `at_most`) hold a claim on a try that ran out before `before`:
        its holder died, and no delivery has taken it over yet."""

    def jobs_with_overdue_claims(self, before: datetime, at_most: int) -> list[StoredJob]:
        """The jobs `overdue_claims` counts (up to `at_most`), as stored: for an operator to see
        which tries are claimed by a holder that died. Like it, a read of the whole table."""

    def settle_jobs(self, writes: list[tuple[StoredJob, JobDocument]]) -> list[StoredJob | None]:
        """Write the new documents of several jobs of one collection (at most 100, no job
        twice) together, each only if its job is still as read: for each, the job as now
        stored, or None where another writer changed (or deleted) it first."""

    def replace_jobs(self, jobs: Iterable[StoredJob]) -> None:
        """Write back changed documents of one collection's jobs, in batches; ModifiedConcurrently
        when one of them changed (or went) since it was read, and its batch was not written
        (the batches before it were)."""


class ClassicStore(Protocol):
    """The classic API's own records: cloud services and the changes clients poll for."""

    def cloud_service(self, cloud_service: CloudServiceId) -> StoredCloudService | None:
        """The cloud service's own record, or None."""

    def cloud_services(self, subscription: str) -> list[StoredCloudService]:
        """A subscription's cloud service records, in name order."""

    def create_cloud_service(
        self, cloud_service: CloudServiceId, document: dict[str, str]
    ) -> StoredCloudService:
        """Create a cloud service's record; EtagMismatch if one of that name exists."""

    def delete_cloud_service(self, cloud_service: CloudServiceId) -> bool:
        """Delete a cloud service's own record (its collections are the caller's to delete)."""

    def record_operation(self, subscription: str, request_id: str) -> None:
        """Keep a change's request id, for the clients that poll for its outcome."""

    def operation_recorded(self, subscription: str, request_id: str) -> bool:
        """Whether a change with this request id was recorded (and not yet forgotten)."""

    def remove_operations_before(self, instant: datetime) -> int:
        """Forget the changes recorded before `instant`; how many were forgotten."""


@dataclass(frozen=True)
class Storage:
    """One implementation of each aggregate, as the composition root wired them (a plain
    holder: callers ask the aggregate they need, e.g. `storage.jobs.save_job(...)`)."""

    collections: CollectionStore
    jobs: JobStore
    history: HistoryStore
    executor: ExecutorStore
    classic: ClassicStore
    create_tables: Callable[[], None]
    """Make sure what the records are kept in exists (once per process, before any use)."""
