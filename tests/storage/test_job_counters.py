"""The job counters on Azurite: each stripe holds its share of maxJobCount, so the quota is exact
under races (in one process and across processes), a crash between counting and inserting only
ever loses a place, and a refused creator wins that place back once the counters are quiet; a
create far from the quota takes a spare place of its process without writing a counter, spares
left unused go back, and none are taken near the quota."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.data.tables import TableClient, TableServiceClient

from shared.domain.ids import CollectionId, JobId
from shared.domain.job_document import JobDocument
from shared.storage.counter_rows import COUNTER_SHARDS, SPARE_HEADROOM, SPARE_PLACES, Counter
from shared.storage.errors import ChangedSinceRead, QuotaExceeded
from shared.storage.interface import Preconditions, Storage
from shared.storage.job_counting import COUNTERS_QUIET_FOR
from shared.storage.jobs import JOBS_TABLE
from shared.storage.keys import COUNTER_PREFIX, jobs_partition
from shared.storage.table_store import table_storage, table_storage_from_connection_string
from tests.job_properties import properties_in

WRITERS = 8
DOCUMENT = JobDocument(properties_in("Enabled"), datetime(2026, 11, 22, tzinfo=UTC))


@pytest.fixture(scope="module")
def store(storage: str) -> Storage:
    connected = table_storage_from_connection_string(storage)
    connected.create_tables()
    return connected


@pytest.fixture(scope="module")
def jobs_table(storage: str) -> TableClient:
    return TableServiceClient.from_connection_string(storage).get_table_client(JOBS_TABLE)


def new_collection(purpose: str) -> CollectionId:
    return CollectionId("counter-tests", "rg", f"{purpose}-{uuid.uuid4().hex[:6]}")


def in_parallel(work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(writer,)) for writer in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)


def create(
    store: Storage, job: JobId, max_jobs: int | None = None, now: datetime | None = None
) -> bool:
    """Save the job; whether it was created (rather than replaced)."""
    _, created = store.jobs.save_job(
        job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), max_jobs=max_jobs, now=now
    )
    return created


def create_as_a_writer_does(store: Storage, job: JobId, max_jobs: int) -> bool:
    """`create`, read again after ChangedSinceRead (another writer got there between this one's
    read and its write), as Scheduling.save_definition does; whether it was created."""
    for _ in range(10):
        try:
            return create(store, job, max_jobs=max_jobs)
        except ChangedSinceRead:
            continue
    raise AssertionError(f"{job.name} was still changing after 10 reads")


def count(store: Storage, collection: CollectionId) -> int:
    return store.jobs.job_slot(JobId(collection, "any"), counted=True).jobs_in_collection


def fill_racing(stores: list[Storage], collection: CollectionId, max_jobs: int) -> list[int]:
    """WRITERS creators, each on one of `stores`, try 6 jobs each; the refusals."""
    refused: list[int] = []

    def creator(writer: int) -> None:
        for n in range(6):
            try:
                create(stores[writer % len(stores)], JobId(collection, f"job-{writer}-{n}"), max_jobs)
            except QuotaExceeded:
                refused.append(1)

    in_parallel(creator)
    return refused


@pytest.mark.parametrize(
    "max_jobs",
    [20, 5, COUNTER_SHARDS + 1],
    ids=["more-jobs-than-stripes", "fewer-jobs-than-stripes-as-free", "one-stripe-with-two"],
)
def test_racing_creators_fill_the_quota_exactly_and_no_more(store: Storage, max_jobs: int) -> None:
    collection = new_collection("exact")
    refused = fill_racing([store], collection, max_jobs)
    assert len(store.jobs.jobs(collection)) == max_jobs
    assert count(store, collection) == max_jobs
    assert len(refused) == WRITERS * 6 - max_jobs


def test_creators_in_two_processes_share_the_quota_exactly(storage: str) -> None:
    # Two stores remember counter rows separately, as two worker processes do.
    stores = [table_storage_from_connection_string(storage) for _ in range(2)]
    collection = new_collection("two-processes")
    refused = fill_racing(stores, collection, 30)
    assert len(stores[0].jobs.jobs(collection)) == 30
    assert count(stores[1], collection) == 30
    assert len(refused) == WRITERS * 6 - 30


def test_creators_racing_for_one_name_count_it_once(store: Storage) -> None:
    collection = new_collection("one-name")
    job = JobId(collection, "contested")
    created: list[bool] = []
    in_parallel(lambda writer: created.append(create_as_a_writer_does(store, job, max_jobs=100)))
    assert len(created) == WRITERS  # every writer wrote: one created it, the others replaced it
    assert created.count(True) == 1
    assert count(store, collection) == 1
    # The places that the losers took for a moment were given back.
    for n in range(2):
        create(store, JobId(collection, f"more-{n}"), max_jobs=3)
    with pytest.raises(QuotaExceeded):
        create(store, JobId(collection, "one-too-many"), max_jobs=3)


def test_a_collection_counted_in_the_eight_rows_of_before_fills_to_its_quota(
    storage: str, store: Storage, jobs_table: TableClient
) -> None:
    # Before the stripes had allotments, 12 jobs could all be counted in one of eight rows.
    collection = new_collection("before")
    for n in range(12):  # a quota this tight leaves no spare places behind (see below)
        create(store, JobId(collection, f"old-{n}"), max_jobs=12)
    partition = jobs_partition(collection)
    for row in store.jobs.job_slot(JobId(collection, "any"), counted=True).counters:
        jobs_table.delete_entity(partition, row)
    jobs_table.upsert_entity({"PartitionKey": partition, "RowKey": f"{COUNTER_PREFIX}3", "Jobs": 12})
    fresh = table_storage_from_connection_string(storage)  # a process that never saw the old rows
    refused = fill_racing([fresh], collection, 20)
    assert len(store.jobs.jobs(collection)) == 20
    assert count(store, collection) == 20
    assert len(refused) == WRITERS * 6 - 8


def test_a_place_lost_in_a_crash_is_won_back_once_the_counters_are_quiet(
    store: Storage, jobs_table: TableClient
) -> None:
    collection = new_collection("crash")
    for n in range(3):
        create(store, JobId(collection, f"job-{n}"), max_jobs=4)
    # A creator counted a fourth job and died before inserting it.
    row = f"{COUNTER_PREFIX}{COUNTER_SHARDS - 1}"
    before = store.jobs.job_slot(JobId(collection, "any"), counted=True).counters.get(row)
    jobs = (before or Counter(0, None)).jobs + 1
    jobs_table.upsert_entity({"PartitionKey": jobs_partition(collection), "RowKey": row, "Jobs": jobs})
    assert count(store, collection) == 4
    written = max(_written_at(store, collection).values())
    # While its insert could still be on its way, the place stays taken.
    with pytest.raises(QuotaExceeded):
        create(store, JobId(collection, "soon-after"), max_jobs=4, now=written + timedelta(minutes=1))
    # Without a clock, nothing is corrected.
    with pytest.raises(QuotaExceeded):
        create(store, JobId(collection, "no-clock"), max_jobs=4)
    # Once no one has written the counters for long enough, the refused creator recounts.
    later = written + COUNTERS_QUIET_FOR + timedelta(seconds=1)
    assert create(store, JobId(collection, "later"), max_jobs=4, now=later)
    assert len(store.jobs.jobs(collection)) == 4
    assert count(store, collection) == 4
    with pytest.raises(QuotaExceeded):
        create(store, JobId(collection, "one-too-many"), max_jobs=4, now=later)


def test_a_warm_create_writes_its_counter_row_and_its_job_and_reads_nothing(storage: str) -> None:
    seen: list[str] = []

    def hook(request: Any) -> None:
        seen.append(request.http_request.method)

    store = table_storage(TableServiceClient.from_connection_string(storage, raw_request_hook=hook))
    store.create_tables()
    collection = new_collection("calls")
    for n in range(3):
        create(store, JobId(collection, f"warm-{n}"), max_jobs=100)
    job = JobId(collection, "counted")
    slot = store.jobs.job_slot(job)
    seen.clear()
    store.jobs.save_job(job, DOCUMENT, Preconditions(), slot, max_jobs=100)
    # The job inserted (POST) and one counter row written (PUT, or POST for its first job).
    assert len(seen) == 2 and "GET" not in seen
    seen.clear()
    store.jobs.save_job(job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), max_jobs=100)
    assert seen == ["GET", "PUT"]  # a replace: the job read and written, no counter touched


def _written_at(store: Storage, collection: CollectionId) -> dict[str, datetime]:
    counters = store.jobs.job_slot(JobId(collection, "any"), counted=True).counters
    return {row: c.written_at for row, c in counters.items() if c.written_at is not None}


def test_a_lowered_quota_is_filled_exactly_from_rows_that_counted_under_the_higher_one(
    store: Storage,
) -> None:
    collection = new_collection("lowered")
    for n in range(20):
        create(store, JobId(collection, f"first-{n}"), max_jobs=40)
    refused = fill_racing([store], collection, 30)
    assert len(store.jobs.jobs(collection)) == 30
    assert count(store, collection) == 30
    assert len(refused) == WRITERS * 6 - 10


def test_a_create_takes_a_spare_place_of_its_process_without_a_counter_write(
    storage: str,
) -> None:
    seen: list[str] = []

    def hook(request: Any) -> None:
        seen.append(f"{request.http_request.method} {request.http_request.body!r}")

    store = table_storage(TableServiceClient.from_connection_string(storage, raw_request_hook=hook))
    store.create_tables()
    collection = new_collection("spare")
    create(store, JobId(collection, "first"), max_jobs=1000)  # counted with spares beside it
    job = JobId(collection, "second")
    slot = store.jobs.job_slot(job)
    seen.clear()
    store.jobs.save_job(job, DOCUMENT, Preconditions(), slot, max_jobs=1000)
    assert len(seen) == 1 and seen[0].startswith("POST") and "second" in seen[0]
    assert count(store, collection) == 2  # its own spare places are not jobs


def test_spare_places_left_unused_go_back(storage: str) -> None:
    store = table_storage_from_connection_string(storage, spares_kept_for_s=0.2)
    collection = new_collection("unused")
    create(store, JobId(collection, "only"), max_jobs=1000)
    other_process = table_storage_from_connection_string(storage)
    assert count(other_process, collection) == 1 + SPARE_PLACES
    assert count(store, collection) == 1
    deadline = time.monotonic() + 10
    while count(other_process, collection) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert count(other_process, collection) == 1
    assert count(store, collection) == 1


def test_no_spare_place_is_taken_within_the_headroom_of_the_quota(storage: str) -> None:
    seen: list[str] = []

    def hook(request: Any) -> None:
        seen.append(f"{request.http_request.method} {request.http_request.url}")

    store = table_storage(TableServiceClient.from_connection_string(storage, raw_request_hook=hook))
    store.create_tables()
    collection = new_collection("headroom")
    near = SPARE_HEADROOM + SPARE_PLACES  # a first create with spares would leave too little
    create(store, JobId(collection, "first"), max_jobs=near)  # reads the counter rows
    for n in range(3):
        job = JobId(collection, f"job-{n}")
        slot = store.jobs.job_slot(job)
        seen.clear()
        store.jobs.save_job(job, DOCUMENT, Preconditions(), slot, max_jobs=near)
        assert len(seen) == 2, seen  # the job and a counter row, every time
    other_process = table_storage_from_connection_string(storage)
    assert count(other_process, collection) == 4
