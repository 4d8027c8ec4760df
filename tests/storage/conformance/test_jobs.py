"""Jobs, their count, run-nows and races between writers, as every store keeps them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from shared.domain.attempts import Attempt, Pending
from shared.domain.ids import JobId
from shared.domain.job_definition import JobState
from shared.domain.job_document import JobDocument
from shared.storage.errors import ChangedSinceRead, EtagMismatch, NotFound, QuotaExceeded
from shared.storage.interface import PageBounds, Preconditions, Storage, StoredCollection, StoredJob
from tests.job_properties import properties_in

AT = datetime(2026, 11, 22, tzinfo=UTC)
ENABLED = JobDocument(properties_in("Enabled"), AT)
DISABLED = JobDocument(properties_in("Disabled"), AT)
WRITERS = 6


def create(
    store: Storage, job: JobId, document: JobDocument = ENABLED, max_jobs: int | None = None
) -> tuple[StoredJob, bool]:
    """Save as the scheduling layer does: a write that lost its race reads the job again."""
    while True:
        try:
            return store.jobs.save_job(job, document, Preconditions(), store.jobs.job_slot(job), max_jobs)
        except ChangedSinceRead:
            continue


def in_parallel(work: Callable[[int], None], writers: int = WRITERS) -> None:
    threads = [threading.Thread(target=work, args=(writer,)) for writer in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()


def test_a_job_is_none_or_not_found_until_saved(store: Storage, collection: StoredCollection) -> None:
    job = JobId(collection.id, "missing")
    assert store.jobs.job(job) is None
    with pytest.raises(NotFound):
        store.jobs.existing_job(job)
    assert store.jobs.job_slot(job).current is None
    assert not store.jobs.delete_job(job, Preconditions())


def test_a_replace_keeps_the_names_case_and_changes_the_etag(
    store: Storage, collection: StoredCollection
) -> None:
    job = JobId(collection.id, "MixedCase")
    created, was_created = create(store, job)
    assert was_created and created.id == job
    shouted = JobId(collection.id, "MIXEDCASE")
    replaced, was_created = store.jobs.save_job(
        shouted, DISABLED, Preconditions(if_match=created.etag), store.jobs.job_slot(shouted)
    )
    assert not was_created
    assert replaced.id == job and replaced.etag != created.etag
    assert store.jobs.existing_job(shouted) == replaced
    assert replaced.document.state is JobState.DISABLED


def test_preconditions_hold_against_what_is_stored(store: Storage, collection: StoredCollection) -> None:
    job = JobId(collection.id, "guarded")
    first, _ = create(store, job)
    with pytest.raises(EtagMismatch):
        store.jobs.save_job(job, DISABLED, Preconditions(if_none_match="*"), store.jobs.job_slot(job))
    stale_slot = store.jobs.job_slot(job)
    second, _ = store.jobs.save_job(job, DISABLED, Preconditions(), store.jobs.job_slot(job))
    # A write on a slot read before another writer's writes nothing: its document was built on
    # what that writer changed. Read again, the precondition is decided on what is stored now.
    with pytest.raises(ChangedSinceRead):
        store.jobs.save_job(job, ENABLED, Preconditions(if_match=first.etag), stale_slot)
    with pytest.raises(ChangedSinceRead):
        store.jobs.save_job(job, ENABLED, Preconditions(), stale_slot)
    assert store.jobs.existing_job(job) == second
    with pytest.raises(EtagMismatch):
        store.jobs.save_job(job, ENABLED, Preconditions(if_match=first.etag), store.jobs.job_slot(job))
    third, created = store.jobs.save_job(job, ENABLED, Preconditions(), store.jobs.job_slot(job))
    assert not created and third.etag not in (first.etag, second.etag)
    with pytest.raises(EtagMismatch):
        store.jobs.delete_job(job, Preconditions(if_match=first.etag))
    with pytest.raises(EtagMismatch):
        store.jobs.save_job(JobId(collection.id, "other"), ENABLED, Preconditions(if_match="*"),
                       store.jobs.job_slot(JobId(collection.id, "other")))  # fmt: skip
    assert store.jobs.job(JobId(collection.id, "other")) is None
    assert store.jobs.delete_job(job, Preconditions(if_match=third.etag))


def test_a_slot_read_before_a_deletion_writes_nothing_and_read_again_creates_the_job_anew(
    store: Storage, collection: StoredCollection
) -> None:
    job = JobId(collection.id, "phoenix")
    create(store, job)
    slot = store.jobs.job_slot(job)
    store.jobs.delete_job(job, Preconditions())
    with pytest.raises(ChangedSinceRead):
        store.jobs.save_job(job, DISABLED, Preconditions(), slot)
    assert store.jobs.job(job) is None
    with pytest.raises(EtagMismatch):
        store.jobs.save_job(job, ENABLED, Preconditions(if_match="*"), store.jobs.job_slot(job))
    stored, created = store.jobs.save_job(job, DISABLED, Preconditions(), store.jobs.job_slot(job))
    assert created and store.jobs.existing_job(job) == stored


def test_listings_in_name_order_by_state_and_pages(store: Storage, collection: StoredCollection) -> None:
    names = ["delta", "Alpha", "charlie", "bravo", "echo"]
    for index, name in enumerate(names):
        create(store, JobId(collection.id, name), DISABLED if index % 2 else ENABLED)
    assert [j.id.name for j in store.jobs.jobs(collection.id)] == ["Alpha", "bravo", "charlie", "delta", "echo"]
    assert [j.id.name for j in store.jobs.jobs(collection.id, JobState.DISABLED)] == ["Alpha", "bravo"]
    page, following = store.jobs.jobs_page(collection.id, PageBounds(2))
    assert [j.id.name for j in page] == ["Alpha", "bravo"] and following == "bravo"
    page, following = store.jobs.jobs_page(collection.id, PageBounds(2, after="bravo"))
    assert [j.id.name for j in page] == ["charlie", "delta"] and following == "delta"
    page, following = store.jobs.jobs_page(collection.id, PageBounds(2, after="delta"))
    assert [j.id.name for j in page] == ["echo"] and following is None
    page, following = store.jobs.jobs_page(collection.id, PageBounds(1, skip=1), JobState.ENABLED)
    assert [j.id.name for j in page] == ["delta"] and following == "delta"
    page, following = store.jobs.jobs_page(collection.id, PageBounds(5, skip=1), JobState.ENABLED)
    assert [j.id.name for j in page] == ["delta", "echo"] and following is None


def test_the_quota_counts_jobs_and_a_deletion_frees_a_place(
    store: Storage, collection: StoredCollection
) -> None:
    for name in ("one", "two"):
        create(store, JobId(collection.id, name), max_jobs=2)
    with pytest.raises(QuotaExceeded) as refused:
        create(store, JobId(collection.id, "three"), max_jobs=2)
    assert refused.value.jobs == 2
    assert store.jobs.job(JobId(collection.id, "three")) is None
    # A replace is no new job: the quota does not stop it.
    _, created = create(store, JobId(collection.id, "one"), DISABLED, max_jobs=2)
    assert not created
    assert store.jobs.job_slot(JobId(collection.id, "x"), counted=True).jobs_in_collection == 2
    store.history.add(JobId(collection.id, "one"), [("0001", {"status": "Completed"})])
    assert store.jobs.delete_job(JobId(collection.id, "one"), Preconditions())
    assert store.history.entries(JobId(collection.id, "one")) == []
    assert store.jobs.job_slot(JobId(collection.id, "x"), counted=True).jobs_in_collection == 1
    create(store, JobId(collection.id, "three"), max_jobs=2)


def test_racing_creators_never_exceed_the_quota_and_the_count_stays_exact(
    store: Storage, collection: StoredCollection
) -> None:
    refused: list[str] = []

    def creator(writer: int) -> None:
        for n in range(4):
            try:
                create(store, JobId(collection.id, f"job-{writer}-{n}"), max_jobs=10)
            except QuotaExceeded:
                refused.append(f"{writer}-{n}")

    in_parallel(creator)
    stored = len(store.jobs.jobs(collection.id))
    # Table Storage may refuse one creator too many per writer in the last places' races.
    assert 10 - WRITERS <= stored <= 10
    assert store.jobs.job_slot(JobId(collection.id, "x"), counted=True).jobs_in_collection == stored
    assert len(refused) == WRITERS * 4 - stored


def test_racing_creators_of_one_name_create_it_once(
    store: Storage, collection: StoredCollection
) -> None:
    created: list[bool] = []
    job = JobId(collection.id, "contested")

    def creator(_writer: int) -> None:
        created.append(create(store, job, max_jobs=50)[1])

    in_parallel(creator)
    assert created.count(True) == 1 and len(created) == WRITERS
    assert store.jobs.job_slot(job, counted=True).jobs_in_collection == 1


def test_racing_writers_of_one_etag_have_exactly_one_winner(
    store: Storage, collection: StoredCollection
) -> None:
    job = JobId(collection.id, "settled")
    stored, _ = create(store, job)
    results: list[object] = []

    def settler(writer: int) -> None:
        results.append(store.executor.settle_job(stored, DISABLED, [(f"{writer:04d}", {"status": "Completed"})]))

    in_parallel(settler)
    winners = [r for r in results if r is not None]
    assert len(winners) == 1 and len(results) == WRITERS
    assert store.jobs.existing_job(job) == winners[0]
    assert len(store.history.entries(job)) == 1


def run_now(document: JobDocument) -> JobDocument:
    attempt = Attempt(AT, run_now=True)
    return document.waiting_for([*document.pending, Pending(attempt, AT)])


def test_run_nows_are_counted_and_one_of_two_accepted_on_one_count(
    store: Storage, collection: StoredCollection
) -> None:
    first, _ = create(store, JobId(collection.id, "first"))
    second, _ = create(store, JobId(collection.id, "second"))
    in_flight = store.jobs.run_nows_in_flight(collection.id)
    assert in_flight.count == 0
    accepted = store.jobs.accept_run_now(first, run_now(first.document), in_flight)
    assert accepted is not None and accepted.etag != first.etag
    assert store.jobs.existing_job(first.id) == accepted
    # Another job's run-now counted before that one came: refused, to count again.
    assert store.jobs.accept_run_now(second, run_now(second.document), in_flight) is None
    assert store.jobs.existing_job(second.id) == second
    again = store.jobs.run_nows_in_flight(collection.id)
    assert again.count == 1 and again.gate != in_flight.gate
    # A job changed since it was read: refused too.
    assert store.jobs.accept_run_now(first, run_now(first.document), again) is None
    later = store.jobs.accept_run_now(second, run_now(second.document), again)
    assert later is not None
    assert store.jobs.run_nows_in_flight(collection.id).count == 2


def test_racing_deleters_of_one_job_delete_it_once(store: Storage, collection: StoredCollection) -> None:
    job = JobId(collection.id, "doomed")
    create(store, job)
    deleted: list[bool] = []
    in_parallel(lambda _writer: deleted.append(store.jobs.delete_job(job, Preconditions())))
    assert deleted.count(True) == 1 and len(deleted) == WRITERS
    assert store.jobs.job(job) is None
    assert store.jobs.job_slot(job, counted=True).jobs_in_collection == 0


def test_a_deletion_racing_creators_leaves_no_job_behind(
    store: Storage, collection: StoredCollection
) -> None:
    outcomes: list[str] = []

    def creator(writer: int) -> None:
        if writer == 0:
            store.collections.delete_collection(collection.id, Preconditions())
            outcomes.append("deleted")
            return
        for n in range(3):
            job = JobId(collection.id, f"late-{writer}-{n}")
            try:
                store.jobs.save_job(job, ENABLED, Preconditions(), store.jobs.job_slot(job), within=collection)
                outcomes.append("created")
            except NotFound:
                outcomes.append("refused")

    in_parallel(creator)
    assert "deleted" in outcomes and len(outcomes) == 1 + (WRITERS - 1) * 3
    assert store.collections.collection(collection.id) is None
    assert store.jobs.jobs(collection.id) == []


def test_racing_run_nows_of_a_collection_are_accepted_one_per_count(
    store: Storage, collection: StoredCollection
) -> None:
    jobs = [create(store, JobId(collection.id, f"runner-{n}"))[0] for n in range(WRITERS)]
    in_flight = store.jobs.run_nows_in_flight(collection.id)
    accepted: list[bool] = []

    def runner(writer: int) -> None:
        stored = jobs[writer]
        accepted.append(store.jobs.accept_run_now(stored, run_now(stored.document), in_flight) is not None)

    in_parallel(runner)
    assert accepted.count(True) == 1 and len(accepted) == WRITERS
    assert store.jobs.run_nows_in_flight(collection.id).count == 1
