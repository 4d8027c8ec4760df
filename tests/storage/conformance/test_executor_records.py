"""The executor's records (its gate, settlement and claims), as every storage keeps them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.attempts import Attempt, Claim, Pending
from shared.domain.ids import JobId
from shared.domain.job_definition import JobState
from shared.domain.job_document import JobDocument
from shared.storage.errors import ModifiedConcurrently
from shared.storage.interface import (
    Preconditions,
    Storage,
    Stored,
    StoredCollection,
    StoredJob,
)
from tests.job_properties import properties_in
from tests.storage.conformance.conftest import entry

AT = datetime(2026, 11, 22, tzinfo=UTC)
ENABLED = JobDocument(properties_in("Enabled"), AT)
DISABLED = JobDocument(properties_in("Disabled"), AT)


def created(store: Storage, job: JobId) -> StoredJob:
    return store.jobs.save_job(job, ENABLED, Preconditions(), store.jobs.job_slot(job))[0]




def test_the_collection_state_is_one_record(store: Storage, collection: StoredCollection) -> None:
    assert store.executor.collection_state(collection.id) is None
    store.executor.set_collection_state(collection.id, "Suspended")
    store.executor.set_collection_state(collection.id, "Enabled")
    assert store.executor.collection_state(collection.id) == "Enabled"
    # A replace of the collection leaves it.
    store.collections.save_collection(collection.id, collection.document, Preconditions())
    assert store.executor.collection_state(collection.id) == "Enabled"


def test_a_settle_writes_document_and_history_only_on_the_etag_read(
    store: Storage, collection: StoredCollection
) -> None:
    job = JobId(collection.id, "settle")
    stored = created(store, job)
    settled = store.executor.settle_job(stored, DISABLED, [("0001", entry("Completed"))])
    assert settled is not None and settled.etag != stored.etag
    assert store.jobs.existing_job(job) == settled
    assert store.executor.settle_job(stored, ENABLED, [("0000", entry("Failed"))]) is None
    assert store.jobs.existing_job(job).document.state is JobState.DISABLED
    assert store.history.ids(job) == ["0001"]
    store.jobs.delete_job(job, Preconditions())
    assert store.executor.settle_job(settled, ENABLED, [("0002", entry("Failed"))]) is None
    assert store.jobs.job(job) is None


def test_a_lost_settle_of_many_entries_leaves_only_those_beyond_one_batch(
    store: Storage, collection: StoredCollection
) -> None:
    job = JobId(collection.id, "postponed")
    stored = created(store, job)
    store.jobs.save_job(job, DISABLED, Preconditions(), store.jobs.job_slot(job))
    many = [(f"{n:04d}", entry("Postponed")) for n in range(120)]
    assert store.executor.settle_job(stored, ENABLED, many) is None
    # The oldest 21 went first, outside the batch that carries the document and the newest 99.
    assert store.history.ids(job) == [f"{n:04d}" for n in range(21)]


def test_several_settles_of_one_collection_each_on_its_own_etag(
    store: Storage, collection: StoredCollection
) -> None:
    jobs = [created(store, JobId(collection.id, f"batch-{n}")) for n in range(4)]
    changed, _ = store.jobs.save_job(jobs[1].id, DISABLED, Preconditions(), store.jobs.job_slot(jobs[1].id))
    store.jobs.delete_job(jobs[2].id, Preconditions())
    written = store.executor.settle_jobs([(stored, DISABLED) for stored in jobs])
    assert [w is not None for w in written] == [True, False, False, True]
    for stored, result in zip(jobs, written, strict=True):
        if result is not None:
            assert result.etag != stored.etag and store.jobs.existing_job(stored.id) == result
    assert store.jobs.existing_job(jobs[1].id) == changed
    assert store.executor.settle_jobs([]) == []


def test_replacing_jobs_refuses_a_batch_with_a_stale_job(
    store: Storage, collection: StoredCollection
) -> None:
    jobs = [created(store, JobId(collection.id, f"swap-{n}")) for n in range(3)]
    store.executor.replace_jobs([Stored(s.id, DISABLED, s.etag) for s in jobs[:2]])
    assert [store.jobs.existing_job(s.id).document.state for s in jobs] == [
        JobState.DISABLED, JobState.DISABLED, JobState.ENABLED,
    ]  # fmt: skip
    with pytest.raises(ModifiedConcurrently):
        store.executor.replace_jobs([Stored(s.id, ENABLED, s.etag) for s in jobs])
    # The batch was refused whole: the third, whose etag still held, is unchanged too.
    assert [store.jobs.existing_job(s.id).document.state for s in jobs] == [
        JobState.DISABLED, JobState.DISABLED, JobState.ENABLED,
    ]  # fmt: skip


def claimed(document: JobDocument, until: datetime) -> JobDocument:
    attempt = Attempt(AT)
    waiting = document.waiting_for([Pending(attempt, AT)])
    return waiting.claimed(attempt, Claim("holder", until))


def test_overdue_claims_are_found_up_to_a_limit(store: Storage, collection: StoredCollection) -> None:
    # Claims far in the past (year 2000): no other test's claims on the same tables are older.
    long_ago = datetime(2000, 1, 1, tzinfo=UTC)
    jobs = [JobId(collection.id, name) for name in ("live", "dead-0", "dead-1", "dead-2")]
    try:
        live = created(store, jobs[0])
        store.executor.settle_job(live, claimed(ENABLED, long_ago + timedelta(days=30)), [])
        for job, minutes in zip(jobs[1:], (3, 1, 2), strict=True):
            stored = created(store, job)
            store.executor.settle_job(stored, claimed(ENABLED, long_ago + timedelta(minutes=minutes)), [])
        before = long_ago + timedelta(days=1)
        assert store.executor.overdue_claims(before, 10) == 3
        assert store.executor.overdue_claims(before, 2) == 2
        found = store.executor.jobs_with_overdue_claims(before, 10)
        assert [j.id.name for j in found] == ["dead-0", "dead-1", "dead-2"]
        assert found[0] == store.jobs.existing_job(found[0].id)
        assert len(store.executor.jobs_with_overdue_claims(before, 1)) == 1
    finally:  # claims long past their deadline on the session's tables make /health degraded
        for job in jobs:
            store.jobs.delete_job(job, Preconditions())


def test_replacing_more_than_a_batch_writes_the_batches_before_a_stale_one(
    store: Storage, collection: StoredCollection
) -> None:
    jobs = [created(store, JobId(collection.id, f"many-{n:03d}")) for n in range(105)]
    store.jobs.save_job(jobs[102].id, DISABLED, Preconditions(), store.jobs.job_slot(jobs[102].id))
    with pytest.raises(ModifiedConcurrently):
        store.executor.replace_jobs([Stored(s.id, DISABLED, s.etag) for s in jobs])
    states = [store.jobs.existing_job(s.id).document.state for s in jobs]
    # The first 100 were one batch, written; the next, holding the stale job, none of it.
    assert states[:100] == [JobState.DISABLED] * 100
    assert states[100:] == [JobState.ENABLED, JobState.ENABLED, JobState.DISABLED] + [JobState.ENABLED] * 2
