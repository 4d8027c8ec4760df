"""Jobs in storage: one row each in their collection's jobs partition, the document whole as
JSON beside the columns that listings filter on (state, run-nows in flight). Creating a job
counts it (job_counting.py) and deleting it uncounts it, in the same partition.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
)

from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import JobState
from shared.domain.job_document import JobDocument
from shared.storage.batches import (
    LARGEST_QUERY_PAGE,
    RACES_LOST,
    unchanged_since,
    update_if_unchanged,
)
from shared.storage.concurrency import CONTENDED_WRITE_ATTEMPTS, optimistic_attempts
from shared.storage.counter_rows import Counter
from shared.storage.documents import (
    DocumentTable,
    JobSlot,
    PageBounds,
    Preconditions,
    RunNowsInFlight,
    Stored,
    StoredCollection,
    StoredJob,
)
from shared.storage.errors import (
    ChangedSinceRead,
    CollectionChanged,
    ModifiedConcurrently,
    NotFound,
    QuotaExceeded,
)
from shared.storage.history import History
from shared.storage.job_codec import decode_job, encode_job
from shared.storage.job_collections import Collections
from shared.storage.job_counting import COUNTED_INSERT_WITHIN_S, JobCounting, uncounted
from shared.storage.job_names import REMEMBERED_NAMES, JobNames
from shared.storage.job_rows import (
    NamedJobRow,
    job_entity,
    job_id_of,
    job_keys,
    mark_rewrite,
    replacement,
)
from shared.storage.keys import (
    AFTER_COUNTERS,
    HISTORY_MARK,
    RUN_NOW_GATE,
    incarnation_row,
    job_row,
    jobs_partition,
)
from shared.storage.table_http import TableLike
from shared.storage.table_terms import transaction_failures

JOBS_TABLE = "jobs"
_RUN_NOWS = "RunNowsInFlight"


class Jobs:
    """The jobs of every collection, in the jobs table."""

    def __init__(
        self,
        table: TableLike,
        counting: JobCounting,
        history: History,
        collections: Collections,
        names: JobNames,
    ) -> None:
        self._jobs = DocumentTable(table, job_id_of, encode_job, decode_job, "job")
        self._counting, self._history, self._collections = counting, history, collections
        self._names = names

    def job(self, job: JobId) -> StoredJob | None:
        partition, row = jobs_partition(job.collection), job_row(job)
        stored = self._jobs.get(partition, row)
        self._names.seen(partition, row, there=stored is not None)
        return stored

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
            "counters": AFTER_COUNTERS,
            "history": HISTORY_MARK,
        }
        found = self._jobs.query(query, **parameters)
        # Filtered here, not by the query: the State column of rows written before the state's
        # spelling changed says "Enabled", of later ones "enabled"; a document reads either.
        return [job for job in found if state is None or job.document.state is state]

    def run_nows_in_flight(self, collection: CollectionId) -> RunNowsInFlight:
        """The run-nows in flight of all a collection's jobs: only that column, of only the jobs
        that have any (a job written before the column existed counts none).

        The gate is read first: a run-now accepted after that changes it, so a count that misses
        it cannot be acted on (`accept_run_now`)."""
        try:
            gate = self._jobs.table.get_entity(
                jobs_partition(collection), RUN_NOW_GATE, select=["RowKey"]
            ).metadata["etag"]
        except ResourceNotFoundError:
            gate = None
        query = (
            "PartitionKey eq @pk and RowKey gt @counters and RowKey lt @history"
            f" and {_RUN_NOWS} gt 0"
        )
        parameters = {
            "pk": jobs_partition(collection),
            "counters": AFTER_COUNTERS,
            "history": HISTORY_MARK,
        }
        rows = self._jobs.table.query_entities(query, parameters=parameters, select=[_RUN_NOWS])
        count = sum(int(row.get(_RUN_NOWS) or 0) for row in rows)
        return RunNowsInFlight(count, gate)

    def accept_run_now(
        self, stored: StoredJob, document: JobDocument, in_flight: RunNowsInFlight
    ) -> StoredJob | None:
        """Write the job's document holding one more run-now, and the collection's run-now gate,
        in one batch, only if neither changed since they were read (`stored`, `in_flight`): the
        job as now stored, or None when another run-now of the collection (or another writer of
        the job) came first."""
        gate = {"PartitionKey": jobs_partition(stored.id.collection), "RowKey": RUN_NOW_GATE}
        gate_write: tuple[Any, ...] = (
            ("create", gate)
            if in_flight.gate is None
            else ("update", gate, update_if_unchanged(in_flight.gate))
        )
        try:
            written = self._jobs.table.submit_transaction(
                [replacement(Stored(stored.id, document, stored.etag)), gate_write]
            )
        except transaction_failures() as failed:
            # 409: the gate row that was not there when counted has been created since.
            if failed.status_code in RACES_LOST or failed.status_code == 409:
                return None
            raise
        return Stored(stored.id, document, written[0]["etag"], stored.incarnation)

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
            "low": max(after, AFTER_COUNTERS),
            "history": HISTORY_MARK,
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

    def job_slot(
        self, job: JobId, *, counted: bool = False, trust_known_absence: bool = False
    ) -> JobSlot:
        """The job, and with `counted` its collection's job count (to delete it, or to read the
        count; creating a job needs no count read beforehand: see `save_job`). With
        `trust_known_absence`, a job this process knows is not there is not read (job_names.py):
        the collection's names are listed first if it knows none.

        A point read and a key-range query rather than one query for both: keys joined by `or`
        make Table Storage scan the whole partition, history included (Azure's table design
        guide).
        """
        partition, row = jobs_partition(job.collection), job_row(job)
        if trust_known_absence and not counted:
            absent = self._names.absent(partition, row)
            if absent is None:
                self._list_names(partition)
                absent = self._names.absent(partition, row)
            if absent:
                return JobSlot(None, {})
        current = self.job(job)
        if not counted:
            return JobSlot(current, {})
        return JobSlot(
            current, self._counting.read_counters(partition), self._counting.rows.spares(partition)
        )

    def _list_names(self, partition: str) -> None:
        """Learn which jobs a collection holds: one query for their keys alone (two, when it
        holds more than are remembered)."""
        rows = self._jobs.table.query_entities(
            "PartitionKey eq @pk and RowKey gt @counters and RowKey lt @history",
            parameters={"pk": partition, "counters": AFTER_COUNTERS, "history": HISTORY_MARK},
            select=["RowKey"],
            results_per_page=REMEMBERED_NAMES,
        )
        names = [str(row["RowKey"]) for row in itertools.islice(rows, REMEMBERED_NAMES + 1)]
        self._names.learn(partition, names if len(names) <= REMEMBERED_NAMES else None)

    def save_job(
        self, job: JobId, document: JobDocument, preconditions: Preconditions, slot: JobSlot,
        max_jobs: int | None = None, *, now: datetime | None = None,
        within: StoredCollection | None = None,
    ) -> tuple[StoredJob, bool]:  # fmt: skip
        """Create or replace a job (the contract: interface.py). A replace is one etag-checked
        write. A new job is counted, then inserted (job_counting.py): a creator refused by the
        quota with `now` given first corrects counts that a crash left too high (see
        COUNTERS_QUIET_FOR). The collection the document was built for (`within`: that
        incarnation, those terms) is checked in the write's own batch, by its mark (`_insert`,
        `_replace`); a collection without one is read again once a new job is in, and if that
        incarnation is gone, the job is withdrawn (see `delete_collection`).
        """
        partition = jobs_partition(job.collection)
        built_on = slot.current  # what `document` was built from: only over that may it go
        for attempt in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            if attempt:
                slot = JobSlot(self._jobs.get(partition, job_row(job)), {})
                if _etag_of(slot.current) != _etag_of(built_on):
                    raise ChangedSinceRead(job)
            preconditions.check(slot.current)
            entity = job_entity(job, document, slot.current)
            if slot.current is not None:
                metadata = self._replace(job, entity, slot.current.etag, within)
                return self._jobs.from_entity(entity, metadata["etag"]), False
            # A mark of this insert alone: a row of the same content that another creator of the
            # same name inserted at the same moment is not this one (`_held`).
            inserted = {**entity, "InsertId": uuid.uuid4().hex}
            try:
                row, counted_at = self._counting.count_new_job(partition, max_jobs, now)
            except QuotaExceeded:
                if self._jobs.get(partition, job_row(job)) is None:
                    raise
                # A creator racing for the same name got it in: the caller replaces it, with a
                # document built on it.
                raise ChangedSinceRead(job) from None
            try:
                if time.monotonic() - counted_at > COUNTED_INSERT_WITHIN_S:
                    self._counting.uncount(
                        partition, row, counted_at
                    )  # a recount may take it for lost
                    continue
                metadata, checked = self._insert(job, inserted, within)
            except ResourceExistsError:
                # Either created meanwhile by someone else (replace it instead), or this very
                # insert, applied by storage, its answer lost and sent again by a retry: then
                # the counted place is the job's own and must stay taken.
                self._names.seen(partition, job_row(job), there=True)
                held = self._held(inserted)
                if held is None:
                    self._counting.uncount(partition, row, counted_at)
                    raise ChangedSinceRead(job) from None
                metadata, checked = {"etag": held.metadata["etag"]}, within is not None
            except ServiceRequestError:  # never reached storage: the place is free again
                with contextlib.suppress(Exception):
                    self._counting.uncount(partition, row, counted_at)
                raise
            except BaseException:
                self._release_unless_inserted(partition, row, counted_at, inserted)
                raise
            self._names.seen(partition, job_row(job), there=True)
            if within is not None and not checked and not self._collections.still_there(within):
                self.withdraw(job)
                raise NotFound(within.id)
            return self._jobs.from_entity(entity, metadata["etag"]), True
        raise ModifiedConcurrently("job")

    def _insert(
        self, job: JobId, inserted: Mapping[str, Any], within: StoredCollection | None
    ) -> tuple[Mapping[str, Any], bool]:
        """Insert a new job's row; and whether that checked the collection it was created
        `within` (that incarnation and version) is still there. It did when the collection has
        a mark of them (job_collections.py): then the insert and a rewrite of the mark are one
        batch, which lands only while the mark is there. A collection without one (created
        before marks) is checked by the caller, by reading it again.

        A 409 is raised as a lone insert's (ResourceExistsError): the name is taken, maybe by
        this very batch, applied and sent again after its answer was lost (`_held` tells).
        """
        if within is None or not self._marked(within):
            return self._jobs.table.create_entity(inserted), False
        try:
            written = self._jobs.table.submit_transaction(
                [("create", inserted), mark_rewrite(within)]
            )
        except transaction_failures() as failed:
            if failed.status_code == 409:
                raise ResourceExistsError(message=str(failed)) from failed
            if failed.status_code != 404:
                raise
            self._raise_unless_mark_alone_missing(job, within)
            return self._jobs.table.create_entity(inserted), False
        return written[0], True

    def _replace(
        self, job: JobId, entity: NamedJobRow, etag: str, within: StoredCollection | None
    ) -> Mapping[str, Any]:
        """Replace a job's row if it still has `etag`: where the collection the document was
        built for (`within`) has a mark, in one batch with a rewrite of it, so that it lands
        only while those terms hold. ChangedSinceRead when the job was written meanwhile (the
        executor's settlement, another PUT) or deleted: the document would put back what that
        write changed."""
        condition = update_if_unchanged(etag)
        written: list[Mapping[str, Any]]
        if within is None or not self._marked(within):
            try:
                written = [self._jobs.table.update_entity(entity, **condition)]
            except (ResourceModifiedError, ResourceNotFoundError):
                raise ChangedSinceRead(job) from None
            return written[0]
        try:
            written = self._jobs.table.submit_transaction(
                [("update", entity, condition), mark_rewrite(within)]
            )
        except transaction_failures() as failed:
            if failed.status_code == 412:
                raise ChangedSinceRead(job) from None
            if failed.status_code != 404:
                raise
            self._raise_unless_mark_alone_missing(job, within)
            return self._replace(job, entity, etag, within)  # noted as unmarked: alone now
        return written[0]

    def _marked(self, within: StoredCollection) -> bool:
        """Whether writes into this collection check its mark (not one created before marks,
        or one of its versions that a write found without its mark)."""
        return bool(within.incarnation) and not self._collections.unmarked(within)

    def _raise_unless_mark_alone_missing(self, job: JobId, within: StoredCollection) -> None:
        """After a batch with the collection's mark found a row missing: NotFound when the
        collection is gone, CollectionChanged when it was created anew or its terms changed
        (the write is built again on it as it is now), ChangedSinceRead when its mark is there
        (the job was deleted); else the collection is there, unchanged, without a mark, and is
        noted as such."""
        current = self._collections.collection(within.id)
        if current is None:
            raise NotFound(within.id)
        if not current.has_terms_of(within):
            raise CollectionChanged(job)
        try:
            self._jobs.table.get_entity(
                jobs_partition(within.id),
                incarnation_row(within.incarnation, within.version),
                select=["RowKey"],
            )
        except ResourceNotFoundError:
            self._collections.note_unmarked(current)
            return
        raise ChangedSinceRead(job)

    def _held(self, entity: Mapping[str, Any]) -> Any | None:
        """The stored row with this entity's keys if it holds exactly this entity (a write of
        ours), else None."""
        try:
            stored = self._jobs.table.get_entity(entity["PartitionKey"], entity["RowKey"])
        except ResourceNotFoundError:
            return None
        same = all(stored.get(name) == value for name, value in entity.items())
        return stored if same else None

    def _release_unless_inserted(
        self, partition: str, row: str, counted_at: float, entity: Mapping[str, Any]
    ) -> None:
        """After an insert whose outcome is unknown (its answer lost, storage failing): give
        its counted place back only if storage shows the job is not there. A job that is in
        keeps its place; if storage cannot even be read, the place stays taken (lost until a
        recount), since a quota passed is worse than a place lost."""
        try:
            if self._held(entity) is not None:
                return
        except Exception:
            return
        with contextlib.suppress(Exception):
            self._counting.uncount(partition, row, counted_at)

    def withdraw(self, job: JobId) -> None:
        """Take back a job inserted into a collection that was deleted meanwhile. Whoever wrote
        it since, it has no collection: it goes unconditionally. Its counted place is not given
        back: the counter row may already count jobs of a collection created anew under the
        name, and a place lost (until a recount) is better than a quota exceeded."""
        with contextlib.suppress(ResourceNotFoundError):
            self._jobs.table.delete_entity(jobs_partition(job.collection), job_row(job))
        self._names.seen(jobs_partition(job.collection), job_row(job), there=False)

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        """Delete a job and its history; the job and its count go in one transaction."""
        partition = jobs_partition(job.collection)
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            slot = self.job_slot(job, counted=True)
            preconditions.check(slot.current)
            if slot.current is None:
                return False
            row, lowered = uncounted(partition, slot.counters, slot.spares)
            try:
                results = self._jobs.table.submit_transaction(
                    [
                        ("delete", job_keys(slot.current), unchanged_since(slot.current.etag)),
                        lowered,
                    ]
                )
            except transaction_failures():
                self._counting.rows.forget(partition)
                continue
            self._counting.rows.note(
                partition, row, Counter(lowered[1]["Jobs"], results[1]["etag"])
            )
            self._names.seen(partition, job_row(job), there=False)
            self._history.delete_all(job)
            return True
        raise ModifiedConcurrently("job")


def _etag_of(stored: StoredJob | None) -> str | None:
    return None if stored is None else stored.etag
