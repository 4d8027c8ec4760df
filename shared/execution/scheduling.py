"""The commands: every write the API makes goes through `Scheduling`. Putting a definition, a
run-now or a change of state into effect: the job's write, and the attempts it now waits for
sent where the executor will find them on time; a collection's change, carried to its jobs;
deletes; the classic API's own records (cloud services, operations).

What is sent goes out before the write that makes it pending, so that no crash can leave a job
waiting for a message never sent; until the write lands the executor waits (`NotYet`). A write
the store refuses takes back what it sent (`_withdrawn_if_refused`); what a crash or a failed
delete leaves is skipped once its first send is SAVE_GRACE old (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime

from azure.core.exceptions import AzureError

from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.collection import CollectionState, over_limits
from shared.domain.collection_document import CollectionDocument
from shared.domain.decisions import resumed
from shared.domain.ids import CloudServiceId, CollectionId, JobId
from shared.domain.job_definition import JobProperties, JobState
from shared.domain.job_document import JobDocument, occurrences_of, stored_properties
from shared.domain.job_rules import definition_problems, recurrence_conflict
from shared.domain.job_secrets import keeping_stored_secrets
from shared.domain.problems import InvalidRequest, Refused
from shared.domain.run_now import run_now_refusal
from shared.execution.dispatch import Dispatched, Dispatcher
from shared.logs import app_logger
from shared.storage.concurrency import CONTENDED_WRITE_ATTEMPTS, optimistic_attempts
from shared.storage.errors import (
    ChangedSinceRead,
    CollectionChanged,
    EtagMismatch,
    ModifiedConcurrently,
    StorageError,
)
from shared.storage.interface import (
    JobSlot,
    Preconditions,
    RunNowsInFlight,
    Storage,
    Stored,
    StoredCloudService,
    StoredCollection,
    StoredJob,
)

log = app_logger("scheduler.scheduling")


def _same_as_stored(document: JobDocument, stored: JobDocument) -> bool:
    """Whether a new definition's document says nothing that the stored one does not: equal to
    it but for the moment it was defined (then the stored one's deliveries serve it as well)."""
    return replace(document, defined_at=stored.defined_at) == stored


class Scheduling:
    """Every write of the API: those that change what a job waits for with what each sends,
    the deletes, and the classic API's records."""

    def __init__(self, storage: Storage, dispatcher: Dispatcher) -> None:
        self._storage, self._dispatcher = storage, dispatcher

    def save_definition(
        self,
        job: JobId,
        properties: JobProperties,
        now: datetime,
        *,
        preconditions: Preconditions | None = None,
        slot: JobSlot | None = None,
        state_reason: str | None = None,
    ) -> tuple[StoredJob, bool]:
        """Create or replace a job's definition, checked against every rule and its collection's
        quotas; what is now stored, and whether it was created. `slot` is the job as the caller
        read it, if it did; `state_reason` why its state is set (the classic `stateDetails`).

        The collection is taken as recently read (its terms: SKU, quota, region), and the job,
        unless an If-Match needs it, as not there without a read where that is known; the write
        checks both (CollectionChanged, ChangedSinceRead), and a lost check is one more round.
        """
        collection = self._storage.collections.collection_for_jobs(job.collection)
        unread_if_absent = preconditions is None or preconditions.if_match is None
        slot = slot or self._storage.jobs.job_slot(job, trust_known_absence=unread_if_absent)
        # A writer that lost its race (the executor settled the job, another PUT landed) builds
        # its document again on the job as it is now: written over the newer job, the document
        # built on the older one would put back the counts and state that write changed.
        sent_by_lost_attempts: list[Dispatched] = []
        try:
            for attempt in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
                if attempt:
                    slot = self._storage.jobs.job_slot(job)
                    collection = self._storage.collections.collection_for_jobs(job.collection)
                try:
                    saved = self._save_definition_on(
                        job, properties, now, collection, slot,
                        preconditions=preconditions or Preconditions(), state_reason=state_reason,
                    )  # fmt: skip
                except _LostRace as lost:
                    sent_by_lost_attempts.append(lost.dispatched)
                    continue
                except CollectionChanged:
                    continue
                break
            else:
                raise ModifiedConcurrently("job")
        except (StorageError, Refused):
            self._withdraw_all_but(sent_by_lost_attempts, None)
            raise
        try:
            self._withdraw_all_but(sent_by_lost_attempts, saved[0])
        except AzureError:
            # The write stands: a row left behind is of a definition the job no longer has, and
            # the executor drops its delivery as stale when it comes due.
            log.warning("job %s: what a lost attempt sent stays until it comes due", job.name)
        return saved

    def _withdraw_all_but(self, sent: list[Dispatched], stored: StoredJob | None) -> None:
        """Take back what lost attempts sent, except the due-index rows `stored` waits for. An
        attempt of the same definition at the same instant as the write that beat it indexes
        the very rows that write indexed (a row's key is its delivery): taking them back would
        leave the winner's job missing from the due index."""
        kept: set[tuple[JobId, datetime, datetime]] = set()
        if stored is not None:
            document = stored.document
            kept = {(stored.id, document.defined_at, pending.due) for pending in document.pending}
        for dispatched in sent:
            self._dispatcher.withdraw(
                replace(
                    dispatched,
                    indexed=tuple(
                        row
                        for row in dispatched.indexed
                        if (row.job, row.defined_at, row.pending.due) not in kept
                    ),
                )
            )

    def _save_definition_on(
        self, job: JobId, properties: JobProperties, now: datetime, collection: StoredCollection,
        slot: JobSlot, *, preconditions: Preconditions, state_reason: str | None,
    ) -> tuple[StoredJob, bool]:  # fmt: skip
        """One attempt of `save_definition`, on the job as `slot` read it; ChangedSinceRead
        (with what it sent taken back) when the job changed since."""
        sku = collection.document.sku
        current = slot.current
        if current is not None:  # what a read showed masked, sent back: the stored values
            properties = keeping_stored_secrets(properties, current.document.properties)
        problems = definition_problems(properties, sku=sku, now=now)
        if problems:
            raise InvalidRequest(problems)
        if current is not None and current.document.final:
            raise Refused(
                f"The job '{job.name}' is {current.document.state.value}, a final state: "
                "it can no longer be changed, only deleted."
            )
        definition = stored_properties(properties)
        quota = collection.document.effective_quota
        conflict = recurrence_conflict(occurrences_of(definition, now), quota)
        if conflict:
            raise Refused(conflict)
        document = JobDocument.defined(
            definition,
            now,
            sku=sku,
            region=collection.document.location or "",
            previous=current.document if current else None,
            state_reason=state_reason,
        )
        if current is not None and _same_as_stored(document, current.document):
            # The same definition again (a template deployed again does this to every job):
            # what is stored already says it all, and what it waits for was sent before it was
            # written. Nothing to send or write; the job keeps its etag. No write checks the
            # collection's terms here, so they are read now.
            preconditions.check(current)
            now_stored = self._storage.collections.existing_collection(job.collection)
            if not now_stored.has_terms_of(collection):
                raise CollectionChanged(job)
            return current, False
        dispatched = self._dispatcher.dispatch(
            [Delivery(job, now, entry) for entry in document.pending], now
        )
        try:
            with self._withdrawn_if_refused(dispatched):
                return self._storage.jobs.save_job(
                    job, document, preconditions, slot,
                    max_jobs=quota.max_job_count, now=now, within=collection,
                )  # fmt: skip
        except ChangedSinceRead:
            raise _LostRace(dispatched) from None

    def run_now(self, job: JobId, now: datetime) -> None:
        """An immediate execution of the job, through the same path as scheduled ones; Refused
        when the job or its collection has as many run-nows in flight as it may."""
        stored, in_flight = self._run_now_room(job)
        entry = Pending(Attempt(now, run_now=True), now)
        dispatched = self._dispatcher.dispatch(
            [Delivery(stored.id, stored.document.defined_at, entry)], now
        )
        with self._withdrawn_if_refused(dispatched):
            # Simultaneous run-nows of one collection collide on its gate, one winning a round.
            for attempt in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
                if attempt:
                    stored, in_flight = self._run_now_room(job)
                document = stored.document.waiting_for([*stored.document.pending, entry])
                if self._storage.jobs.accept_run_now(stored, document, in_flight):
                    return
            raise ModifiedConcurrently("job")

    def _run_now_room(self, job: JobId) -> tuple[StoredJob, RunNowsInFlight]:
        """The job and its collection's run-nows in flight, as read for accepting one more;
        Refused past a bound. Both counts are exact: the write that acts on them is checked
        against the job and the collection's run-now gate as read here."""
        stored = self._storage.jobs.existing_job(job)
        in_flight = self._storage.jobs.run_nows_in_flight(job.collection)
        refusal = run_now_refusal(job.name, stored.document.run_nows_in_flight, in_flight.count)
        if refusal:
            raise Refused(refusal)
        return stored, in_flight

    @contextlib.contextmanager
    def _withdrawn_if_refused(self, dispatched: Dispatched) -> Iterator[None]:
        """What was sent ahead of a write is taken back when the write is refused (a
        precondition, a quota, a bound, a race lost every time), so that a refused write leaves
        no message behind. A write that failed otherwise (storage unreachable, a timeout) may
        have landed: what it sent stays, and if the write did not land, it dies of its age."""
        try:
            yield
        except ChangedSinceRead:
            raise  # what it sent is taken back once the write is decided (`save_definition`)
        except (StorageError, Refused):
            self._dispatcher.withdraw(dispatched)
            raise

    def switch_jobs(
        self, collection: CollectionId, state: JobState, now: datetime, *, reason: str | None
    ) -> list[StoredJob]:
        """Every job of the collection that is not final put in `state`, for `reason` (the
        classic API's change of a collection's jobs); the jobs as they now are. Enabling is
        checked as one job's change is: if a job would run more often than the collection's
        quota now allows, the change is Refused before anything is written."""
        stored = self._storage.collections.existing_collection(collection)
        if state is JobState.ENABLED:
            quota = stored.document.effective_quota
            for job in self._storage.jobs.jobs(collection):
                if job.document.final or job.document.enabled:
                    continue
                conflict = recurrence_conflict(job.document.schedule, quota)
                if conflict:
                    raise Refused(f"The job '{job.id.name}' cannot be enabled. {conflict}")
        self.set_job_states(collection, state, now, reason=reason)
        return self._storage.jobs.jobs(collection)

    def set_job_states(
        self,
        collection: CollectionId,
        state: JobState | None,
        now: datetime,
        *,
        reason: str | None = None,
    ) -> None:
        """Set every job's state (None keeps each one's), for `reason` if one was given; enabled
        jobs resume, without catch-up. A job written meanwhile by someone else is read again and
        changed as it now is."""
        for _ in optimistic_attempts():
            try:
                self._set_job_states_once(collection, state, now, reason)
                return
            except ModifiedConcurrently:
                continue
        raise ModifiedConcurrently("job collection")

    def _set_job_states_once(
        self, collection: CollectionId, state: JobState | None, now: datetime, reason: str | None
    ) -> None:
        changed, deliveries = [], []
        for stored in self._storage.jobs.jobs(collection):
            if stored.document.final:
                continue
            document = stored.document
            if state is not None:
                document = document.with_state(state, reason)
            added: list[Pending] = []
            if document.enabled:
                document, added = resumed(document, now)
            if document == stored.document:
                continue
            changed.append(Stored(stored.id, document, stored.etag))
            deliveries += [Delivery(stored.id, document.defined_at, entry) for entry in added]
        # Not withdrawn when refused: the jobs are written in batches, and those of a batch that
        # landed before another was refused wait for what was sent. What the others' attempts
        # sent is dropped once SAVE_GRACE old (docs/architecture.md).
        self._dispatcher.dispatch(deliveries, now)
        self._storage.executor.replace_jobs(changed)

    def save_collection_with_jobs(
        self,
        collection: CollectionId,
        document: CollectionDocument,
        now: datetime,
        *,
        preconditions: Preconditions,
        previous: StoredCollection | None,
        jobs_state: JobState | None = None,
    ) -> tuple[StoredCollection, bool]:
        """Save a collection (`save_collection`) and carry the change to its jobs: their
        executor sees its state change, and they resume with it. With `jobs_state`, every job
        that is not final takes that state too (POST enable and disable). A change of SKU or
        quota that would leave the jobs it holds over its new limits is Refused, before
        anything is written."""
        if previous is not None:
            self._refuse_if_over_limits(collection, previous.document, document)
        state = document.state.value
        if not document.enabled:  # off before the document says so: nothing runs in between
            self._storage.executor.set_collection_state(collection, state)
        stored, created = self._storage.collections.save_collection(
            collection, document, preconditions
        )
        if not document.enabled and jobs_state is not None:
            self.set_job_states(stored.id, jobs_state, now)
        if document.enabled:
            self._storage.executor.set_collection_state(collection, state)
            was_off = previous is not None and not previous.document.enabled
            if was_off or jobs_state is not None:
                self.set_job_states(stored.id, jobs_state, now)
        return stored, created

    def _refuse_if_over_limits(
        self, collection: CollectionId, before: CollectionDocument, after: CollectionDocument
    ) -> None:
        quota = after.effective_quota
        if quota == before.effective_quota:
            return
        jobs = self._storage.jobs.jobs(collection)
        too_often = [
            stored.id.name
            for stored in jobs
            if not stored.document.final
            and recurrence_conflict(stored.document.schedule, quota) is not None
        ]
        changed = after.sku is not before.sku
        conflict = over_limits(quota, len(jobs), too_often, new_sku=after.sku if changed else None)
        if conflict:
            raise Refused(conflict)

    def switch_collection(
        self, collection: CollectionId, state: CollectionState, jobs_state: JobState, now: datetime
    ) -> None:
        """The collection in `state` and its jobs in `jobs_state` (POST enable and disable),
        without losing a change made to the collection meanwhile."""
        for _ in optimistic_attempts():
            current = self._storage.collections.existing_collection(collection)
            try:
                self.save_collection_with_jobs(
                    collection, current.document.with_state(state), now,
                    preconditions=Preconditions(if_match=current.etag), previous=current,
                    jobs_state=jobs_state,
                )  # fmt: skip
                return
            except EtagMismatch:
                continue
        raise ModifiedConcurrently("job collection")

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        """Delete a job with its history and its count; whether there was one. What it waited
        for stays on the queue or in the due index, and finds no job: the executor skips it."""
        return self._storage.jobs.delete_job(job, preconditions)

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        """Delete a collection with its jobs and their history; whether there was one."""
        return self._storage.collections.delete_collection(collection, preconditions)

    # --- the classic API's own records

    def create_cloud_service(
        self, cloud_service: CloudServiceId, document: dict[str, str]
    ) -> StoredCloudService:
        """Create a cloud service's record; EtagMismatch if one of that name exists."""
        return self._storage.classic.create_cloud_service(cloud_service, document)

    def delete_cloud_service(
        self, cloud_service: CloudServiceId, collections: list[StoredCollection]
    ) -> None:
        """Delete a cloud service: these, its collections, first, then its own record."""
        for collection in collections:
            self.delete_collection(collection.id, Preconditions())
        self._storage.classic.delete_cloud_service(cloud_service)

    def record_operation(self, subscription: str, request_id: str) -> None:
        """Keep a classic change's request id, for the clients that poll for its outcome."""
        self._storage.classic.record_operation(subscription, request_id)


class _LostRace(Exception):
    """An attempt of `save_definition` lost its race (ChangedSinceRead): what it sent, which
    is taken back once a later attempt has decided what the job waits for."""

    def __init__(self, dispatched: Dispatched) -> None:
        super().__init__("lost its race")
        self.dispatched = dispatched
