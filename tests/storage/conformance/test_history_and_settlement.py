"""History, the executor's gate and settlement, as every store keeps them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.attempts import Attempt, Claim, Pending
from shared.domain.ids import JobId
from shared.domain.job_definition import HistoryStatus, JobState
from shared.domain.job_document import JobDocument
from shared.storage.errors import ModifiedConcurrently
from shared.storage.interface import (
    PageBounds,
    Preconditions,
    Storage,
    Stored,
    StoredCollection,
    StoredJob,
)

AT = datetime(2026, 11, 22, tzinfo=UTC)
ENABLED = JobDocument({"state": "Enabled"}, AT)
DISABLED = JobDocument({"state": "Disabled"}, AT)


def created(store: Storage, job: JobId) -> StoredJob:
    return store.jobs.save_job(job, ENABLED, Preconditions(), store.jobs.job_slot(job))[0]


def entry(status: str, note: str = "") -> dict[str, object]:
    return {"status": status, "message": note, "nested": {"list": [1, 2]}}


def test_history_newest_first_by_status_rewritten_and_removed(
    store: Storage, collection: StoredCollection
) -> None:
    job = JobId(collection.id, "storied")
    other = JobId(collection.id, "storied2")  # a name that extends this one's: kept apart
    store.history.add(other, [("0000", entry("Completed"))])
    store.history.add(job, [("0003", entry("Failed")), ("0001", entry("Completed"))])
    store.history.add(job, [("0002", entry("Completed")), ("0003", entry("Completed", "again"))])
    assert store.history.entries(job) == [
        ("0001", entry("Completed")), ("0002", entry("Completed")),
        ("0003", entry("Completed", "again")),
    ]  # fmt: skip
    assert [i for i, _ in store.history.entries(job, HistoryStatus.COMPLETED)] == ["0001", "0002", "0003"]
    assert store.history.entries(job, HistoryStatus.FAILED) == []
    assert store.history.ids(job) == ["0001", "0002", "0003"]
    assert store.history.ids(job, after="0001") == ["0002", "0003"]
    store.history.remove(job, ["0002", "9999"])
    assert store.history.ids(job) == ["0001", "0003"]
    assert store.history.entries(other) == [("0000", entry("Completed"))]


def test_history_pages(store: Storage, collection: StoredCollection) -> None:
    job = JobId(collection.id, "paged")
    store.history.add(
        job, [(f"{n:04d}", entry("Failed" if n % 3 == 0 else "Completed")) for n in range(7)]
    )
    ids = lambda page: [i for i, _ in page]  # noqa: E731
    page, more = store.history.page(job, PageBounds(3))
    assert ids(page) == ["0000", "0001", "0002"] and more
    page, more = store.history.page(job, PageBounds(3, after="0002"))
    assert ids(page) == ["0003", "0004", "0005"] and more
    page, more = store.history.page(job, PageBounds(3, after="0005"))
    assert ids(page) == ["0006"] and not more
    page, more = store.history.page(job, PageBounds(2, skip=4))
    assert ids(page) == ["0004", "0005"] and more
    page, more = store.history.page(job, PageBounds(2, skip=1), HistoryStatus.FAILED)
    assert ids(page) == ["0003", "0006"] and not more
    assert store.history.page(job, PageBounds(2, skip=7)) == ([], False)
    assert store.history.page(job, PageBounds(2, skip=9)) == ([], False)


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
