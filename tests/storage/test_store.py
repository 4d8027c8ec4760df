"""The store under concurrency, on Azurite: the job count stays exact and quotas are never exceeded."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from shared.domain.ids import CollectionId, JobId
from shared.domain.job_document import JobDocument
from shared.storage.errors import QuotaExceeded
from shared.storage.interface import Preconditions, Storage
from shared.storage.table_store import table_storage_from_connection_string
from tests.job_properties import properties_in

WRITERS = 8
DOCUMENT = JobDocument(properties_in("Enabled"), datetime(2026, 11, 22, tzinfo=UTC))


@pytest.fixture(scope="module")
def store(storage: str) -> Storage:
    connected = table_storage_from_connection_string(storage)
    connected.create_tables()
    return connected


def in_parallel(work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(writer,)) for writer in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def create(store: Storage, job: JobId, max_jobs: int | None = None) -> None:
    store.jobs.save_job(job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), max_jobs=max_jobs)


def test_concurrent_creators_never_exceed_the_quota(store: Storage) -> None:
    collection = CollectionId("store-tests", "rg", f"tight-{uuid.uuid4().hex[:6]}")
    refused: list[int] = []

    def creator(writer: int) -> None:
        for n in range(6):
            try:
                create(store, JobId(collection, f"job-{writer}-{n}"), max_jobs=20)
            except QuotaExceeded:
                refused.append(1)

    in_parallel(creator)
    stored = len(store.jobs.jobs(collection))
    # Creators racing for the last places may all take themselves back out: never over the
    # quota, and at most one refused too many per writer.
    assert 20 - WRITERS <= stored <= 20
    assert store.jobs.job_slot(JobId(collection, "any"), counted=True).jobs_in_collection == stored
    assert len(refused) == WRITERS * 6 - stored
    # Alone, a creator fills the collection to exactly its quota.
    for n in range(20 - stored):
        create(store, JobId(collection, f"later-{n}"), max_jobs=20)
    with pytest.raises(QuotaExceeded):
        create(store, JobId(collection, "one-too-many"), max_jobs=20)
    assert len(store.jobs.jobs(collection)) == 20


def test_the_count_stays_exact_through_concurrent_creates_and_deletes(store: Storage) -> None:
    collection = CollectionId("store-tests", "rg", f"busy-{uuid.uuid4().hex[:6]}")

    def churn(writer: int) -> None:
        for n in range(8):
            create(store, JobId(collection, f"job-{writer}-{n}"))
        for n in range(0, 8, 2):
            assert store.jobs.delete_job(JobId(collection, f"job-{writer}-{n}"), Preconditions())

    in_parallel(churn)
    assert len(store.jobs.jobs(collection)) == WRITERS * 4
    assert store.jobs.job_slot(JobId(collection, "any"), counted=True).jobs_in_collection == WRITERS * 4


def test_documents_written_together_each_lose_only_their_own_race(store: Storage) -> None:
    collection = CollectionId("store-tests", "rg", f"batch-{uuid.uuid4().hex[:6]}")
    jobs = [JobId(collection, f"job-{n}") for n in range(5)]
    for job in jobs:
        create(store, job)
    read = [store.jobs.existing_job(job) for job in jobs]
    store.executor.settle_job(read[3], replace(DOCUMENT, occurrences=7), [])  # another writer, first
    changed = replace(DOCUMENT, occurrences=1)
    written = store.executor.settle_jobs([(stored, changed) for stored in read])
    assert [stored is None for stored in written] == [False, False, False, True, False]
    for stored in written:
        if stored is not None:  # its etag is the one now stored: a next write needs no read
            assert stored == store.jobs.existing_job(stored.id)
    assert store.jobs.existing_job(jobs[3]).document.occurrences == 7


def test_settling_a_job_returns_the_version_it_wrote_which_the_next_settle_is_checked_against(
    store: Storage,
) -> None:
    job = JobId(CollectionId("store-tests", "rg", f"settle-{uuid.uuid4().hex[:6]}"), "job")
    create(store, job)
    read = store.jobs.existing_job(job)
    ran = replace(read.document, occurrences=1)
    settled = store.executor.settle_job(read, ran, [("entry-1", {"status": "Completed"})])
    assert settled is not None
    assert settled.document == ran
    assert settled == store.jobs.existing_job(job)  # its new etag, as a read gives it
    assert store.executor.settle_job(read, ran, []) is None  # the version it replaced no longer holds
    again = store.executor.settle_job(settled, replace(ran, occurrences=2), [])
    assert again is not None and again.etag != settled.etag
    assert store.jobs.existing_job(job).document.occurrences == 2
