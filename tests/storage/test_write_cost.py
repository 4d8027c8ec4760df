"""What an API write costs in storage requests, and what it leaves behind under racing writers.

A create and a replacing PUT go through the app's own path (the ARM handler with its guard, the
services built by the composition root) on Azurite; every request they send is listed, so that
a request added to the path fails here, not only in a benchmark (docs/performance.md lists
them). Then writers racing over a few names in a collection with a small quota, against the
same storage: the quota holds, the counters count exactly the jobs there are, and every stored
job's pending attempt has its row in the due index (and no row is left of a job that is not
there). Both storage client paths run these (SCHEDULER_STORAGE_CLIENT).
"""

from __future__ import annotations

import json
import os
import random
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func
import pytest
from azure.data.tables import TableClient, TableServiceClient

import shared.services
from shared.api.access import arm_guard
from shared.api.arm import serve
from shared.api.collection_operations import put_collection
from shared.api.job_operations import put_job
from shared.domain.attempts import Delivery
from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import JobBody, JobProperties
from shared.domain.job_document import JobDocument
from shared.domain.problems import Refused
from shared.services import Services, build
from shared.settings import Settings, chosen_storage_client
from shared.storage.activity_log import WRITE_BEHIND_S
from shared.storage.due_index import bucket_of
from shared.storage.errors import NotFound, QuotaExceeded
from shared.storage.interface import Preconditions
from shared.storage.jobs import JOBS_TABLE
from shared.storage.keys import incarnation_row, jobs_partition
from tests.job_properties import properties_in
from tests.pipeline import Pipeline

KEY = "write-cost-key"
SUBSCRIPTION, GROUP = "write-cost", "rg"
API_VERSION = "2016-03-01"


class Requests:
    """The storage requests each thread sent (the clients' raw_request_hook): a test reads
    its own thread's only, so that a background give-back of spare places is not counted."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> None:
        sent = request.http_request
        with self._lock:
            self.sent.append((threading.get_ident(), sent.method, sent.url))

    @property
    def count(self) -> int:
        return len(self.sent)

    def of_this_thread(self, since: int) -> list[str]:
        """'<method> <table>' of each request this thread sent since the `since`th."""
        me = threading.get_ident()
        return [
            f"{method} {_table(url)}" for thread, method, url in self.sent[since:] if thread == me
        ]


def _table(url: str) -> str:
    path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
    return path.rsplit("/", 1)[-1].split("(", 1)[0]


DUE_TABLE = f"cost{uuid.uuid4().hex[:10]}"


def recording_services(storage: str, requests: Requests) -> Services:
    """The app's services as one process builds them, its storage requests recorded."""
    patch = pytest.MonkeyPatch()
    patch.setattr(shared.services, "STORAGE_REQUESTS", requests)  # the hook build() hands on
    settings = Settings(
        storage_connection=storage, lookahead=timedelta(minutes=5), outbound_allowlist="",
        outbound_ca_file=None, authority_host="https://login.invalid", function_key=KEY,
        storage_client=chosen_storage_client(os.environ),
    )  # fmt: skip
    services = build(settings, queue_name=DUE_TABLE, due_table=DUE_TABLE)
    patch.undo()
    return services


@pytest.fixture(scope="module")
def recorded(storage: str) -> Iterator[tuple[Services, Requests]]:
    requests = Requests()
    services = recording_services(storage, requests)
    yield services, requests
    services.close()


@pytest.fixture
def elsewhere(storage: str, recorded: tuple[Services, Requests]) -> Iterator[Services]:
    """Another process's services, on the same storage (its requests recorded too), its
    execution side built: the queue's create, once a process, is not a write's."""
    services = recording_services(storage, recorded[1])
    services.dispatcher  # noqa: B018
    yield services
    services.close()


def arm_put(services: Services, path: str, route: dict[str, str], body: Any, guard: str) -> int:
    operation = put_job if guard == "put_job" else put_collection
    request = func.HttpRequest(
        "PUT", f"http://127.0.0.1:7071{path}?api-version={API_VERSION}",
        headers={"content-type": "application/json", "x-functions-key": KEY},
        params={"api-version": API_VERSION}, route_params=route, body=json.dumps(body).encode(),
    )  # fmt: skip
    return serve(request, operation, lambda: services, guard=arm_guard(guard)).status_code


def job_body(hours_later: int = 0) -> dict[str, Any]:
    """A job that starts tomorrow: each write puts its first attempt in the due index."""
    tomorrow = datetime.now(UTC) + timedelta(days=1, hours=hours_later)
    start = tomorrow.replace(microsecond=0).isoformat()
    return {
        "properties": {
            "startTime": start,
            "action": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}},
            "recurrence": {"frequency": "Hour", "interval": 1},
        }
    }


def test_an_instance_starting_on_storage_set_up_before_asks_once_for_its_tables(
    storage: str, recorded: tuple[Services, Requests]
) -> None:
    """One query finds the tables there (not a create of each, refused). The queue is created
    with the execution side, on its first use, so an instance that only reads never sends it;
    its create is answered 204 where it exists, so it stays."""
    requests = recorded[1]
    before = requests.count
    services = recording_services(storage, requests)
    assert requests.of_this_thread(before) == ["GET Tables"]
    assert services.dispatcher is services.dispatcher  # built once, on first use
    assert requests.of_this_thread(before) == ["GET Tables", f"PUT {DUE_TABLE}"]
    services.close()


def test_what_a_create_a_replace_and_a_put_of_the_same_definition_send(
    recorded: tuple[Services, Requests],
) -> None:
    services, requests = recorded
    activity_log = services.activity_log
    activity_log.flush()
    activity_log.write_behind_s = 3600  # written when the test says (a flush), not on a timer
    name = f"jc-{uuid.uuid4().hex[:8]}"
    route = {"subscriptionId": SUBSCRIPTION, "resourceGroupName": GROUP, "jobCollectionName": name}
    path = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Scheduler/jobCollections/{name}"
    collection = {"location": "westeurope", "properties": {"sku": {"name": "P20Premium"}}}
    assert arm_put(services, path, route, collection, "put_job_collection") == 201

    def put(job: str, body: dict[str, Any]) -> list[str]:
        before = requests.count
        status = arm_put(services, f"{path}/jobs/{job}", route | {"jobName": job}, body, "put_job")
        assert status in (200, 201)
        return requests.of_this_thread(before)

    # This process created the collection: it knows its terms, and that it holds no job and
    # no counter row yet. The collection's first job writes a counter row too (with spare
    # places for the next creators of this process), and reads nothing.
    body = job_body()
    first = put("first", body)
    assert first == [f"PUT {DUE_TABLE}", "POST jobs", "POST $batch"], first
    created, same, changed = put("second", body), put("second", body), put("second", job_body(1))
    # The job's own write and its collection's check (the mark of its terms) are one batch;
    # the due index row is one write (shared with writers that come at the same time).
    assert created == [f"PUT {DUE_TABLE}", "POST $batch"]
    # The same definition again: nothing to send or write; the collection's terms are read,
    # since no write checks them.
    assert same == ["GET jobs", "GET jobcollections"]
    assert changed == ["GET jobs", f"PUT {DUE_TABLE}", "POST $batch"]
    # The activity log's events of all five PUTs (and the collection's): one batch, written
    # behind the answers.
    before = requests.count
    activity_log.flush()
    assert requests.of_this_thread(before) == ["POST $batch"]
    activity_log.write_behind_s = WRITE_BEHIND_S
    logged = list(
        activity_log.events(
            datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC), lambda e: True
        )
    )
    assert sum(1 for _, event in logged if f"/jobCollections/{name}" in json.dumps(event)) == 5


def test_a_collection_without_a_mark_is_still_checked_after_each_insert(
    recorded: tuple[Services, Requests],
) -> None:
    """Collections without a mark (created before marks, or its write failed): a creator reads
    the collection again after its insert (one request more), and a deletion meanwhile
    withdraws the job."""
    services, requests = recorded
    store = services.storage
    collection = CollectionId(SUBSCRIPTION, GROUP, f"old-{uuid.uuid4().hex[:8]}")
    body = CollectionBody.model_validate(
        {"location": "westeurope", "properties": {"sku": {"name": "Standard"}}}
    )
    stored, _ = store.collections.save_collection(
        collection, CollectionDocument.created(body), Preconditions()
    )
    _jobs_table(services).delete_entity(
        jobs_partition(collection), incarnation_row(stored.incarnation, stored.version)
    )
    definition = JobBody.model_validate(job_body()).properties
    now = datetime.now(UTC)
    before = requests.count
    services.scheduling.save_definition(JobId(collection, "kept"), definition, now)
    sent = requests.of_this_thread(before)
    assert sent.count("GET jobcollections") == 2 and "POST $batch" in sent, sent
    assert store.jobs.job(JobId(collection, "kept")) is not None
    before = requests.count  # found without a mark once: the next insert goes alone at once
    services.scheduling.save_definition(JobId(collection, "next"), definition, now)
    sent = requests.of_this_thread(before)
    assert sent.count("GET jobcollections") == 1 and "POST $batch" not in sent, sent
    # Deleted between a creator's read of it and its insert: the job does not outlive it.
    for marked in (False, True):
        collection = CollectionId(SUBSCRIPTION, GROUP, f"gone-{marked}-{uuid.uuid4().hex[:8]}")
        stored, _ = store.collections.save_collection(
            collection, CollectionDocument.created(body), Preconditions()
        )
        if not marked:
            _jobs_table(services).delete_entity(
                jobs_partition(collection), incarnation_row(stored.incarnation, stored.version)
            )
        job = JobId(collection, "late")
        slot = store.jobs.job_slot(job)
        store.collections.delete_collection(collection, Preconditions())
        with pytest.raises(NotFound):
            store.jobs.save_job(
                job,
                JobDocument(properties_in("Enabled"), now),
                Preconditions(),
                slot,
                now=now,
                within=stored,
            )
        assert store.jobs.jobs(collection) == [], f"marked={marked}"


def recurring(every: str = "Hour") -> JobProperties:
    """A job that recurs once every `every` (Hour, Minute, ...)."""
    body = job_body()
    body["properties"]["recurrence"] = {"frequency": every, "interval": 1}
    return JobBody.model_validate(body).properties


def new_collection(services: Services, quota: dict[str, Any] | None = None) -> CollectionId:
    collection = CollectionId(SUBSCRIPTION, GROUP, f"terms-{uuid.uuid4().hex[:8]}")
    properties: dict[str, Any] = {"sku": {"name": "P20Premium"}}
    if quota is not None:
        properties["quota"] = quota
    body = CollectionBody.model_validate({"location": "westeurope", "properties": properties})
    services.scheduling.save_collection_with_jobs(
        collection, CollectionDocument.created(body), datetime.now(UTC),
        preconditions=Preconditions(), previous=None,
    )  # fmt: skip
    return collection


def test_a_process_that_did_not_create_the_collection_lists_its_jobs_once(
    recorded: tuple[Services, Requests], elsewhere: Services
) -> None:
    services, requests = recorded
    collection = new_collection(services)
    services.scheduling.save_definition(JobId(collection, "there"), recurring(), datetime.now(UTC))
    sent = []
    for name in ("new", "newer", "there"):
        before = requests.count
        elsewhere.scheduling.save_definition(
            JobId(collection, name), recurring("Minute"), datetime.now(UTC)
        )
        sent.append(requests.of_this_thread(before))
    # Its first write reads the collection's terms and lists its jobs' names (a query, which
    # the request list shows as a GET of the table), and its counter rows before counting...
    assert sent[0][:2] == ["GET jobcollections", "GET jobs"], sent[0]
    assert sent[0][2:] == [f"PUT {DUE_TABLE}", "GET jobs", "POST jobs", "POST $batch"], sent[0]
    # ... then a new name is written unread, and a name that is there is read first.
    assert sent[1] == [f"PUT {DUE_TABLE}", "POST $batch"], sent[1]
    assert sent[2] == ["GET jobs", f"PUT {DUE_TABLE}", "POST $batch"], sent[2]
    assert {job.id.name for job in services.storage.jobs.jobs(collection)} == {
        "there", "new", "newer"
    }  # fmt: skip


def test_terms_changed_by_another_process_hold_for_this_ones_next_write(
    recorded: tuple[Services, Requests], elsewhere: Services
) -> None:
    """This process took the collection's terms when it created it; another changes them:
    this one's next replace, create and PUT of the same definition are held to the new terms
    (a write's batch finds the old terms' mark gone; then the collection is read again)."""
    services, requests = recorded
    collection = new_collection(services)
    now = datetime.now(UTC)
    services.scheduling.save_definition(JobId(collection, "hourly"), recurring(), now)
    services.scheduling.save_definition(JobId(collection, "minutely"), recurring(), now)

    def change_elsewhere(patch: dict[str, Any]) -> None:
        current = elsewhere.storage.collections.existing_collection(collection)
        changed = current.document.patched(CollectionBody.model_validate(patch))
        elsewhere.scheduling.save_collection_with_jobs(
            collection, changed, now, preconditions=Preconditions(), previous=current
        )

    change_elsewhere(
        {"properties": {"quota": {"maxRecurrence": {"frequency": "Hour", "interval": 1}}}}
    )
    before = requests.count
    with pytest.raises(Refused):
        services.scheduling.save_definition(
            JobId(collection, "minutely"), recurring("Minute"), now
        )
    assert "GET jobcollections" in requests.of_this_thread(before)
    change_elsewhere({"location": "northeurope"})
    before = requests.count
    saved, created = services.scheduling.save_definition(
        JobId(collection, "another"), recurring(), now
    )
    assert "GET jobcollections" in requests.of_this_thread(before)
    assert created and saved.document.region == "North Europe"
    change_elsewhere({"location": "westeurope"})
    # The same definition again: no write checks the terms, so they are read.
    saved, created = services.scheduling.save_definition(
        JobId(collection, "another"), recurring(), now
    )
    assert not created and saved.document.region == "West Europe"
    stored = services.storage.jobs.jobs(collection)
    assert {job.id.name for job in stored} == {"another", "hourly", "minutely"}
    assert all(job.document.properties.recurrence == recurring().recurrence for job in stored)


def test_a_name_created_by_another_process_meanwhile_is_replaced(
    recorded: tuple[Services, Requests], elsewhere: Services
) -> None:
    """This process believes the name free (it created the collection); another creates the
    job first: this write's insert fails, and it replaces that job instead, counted once."""
    services, _ = recorded
    collection = new_collection(services)
    job = JobId(collection, "contested")
    now = datetime.now(UTC)
    elsewhere.scheduling.save_definition(job, recurring(), now - timedelta(seconds=1))
    saved, created = services.scheduling.save_definition(job, recurring("Minute"), now)
    assert not created
    assert saved.document.properties.recurrence == recurring("Minute").recurrence
    assert services.storage.jobs.jobs(collection) == [saved]
    # Counted once: what the counter rows hold, less each process's spare places.
    slot = services.storage.jobs.job_slot(job, counted=True)
    spares_elsewhere = elsewhere.storage.jobs.job_slot(job, counted=True).spares
    assert slot.jobs_in_collection - sum(spares_elsewhere.values()) == 1


def test_a_collection_created_anew_by_another_process_takes_the_next_job(
    recorded: tuple[Services, Requests], elsewhere: Services
) -> None:
    services, _ = recorded
    collection = new_collection(services)
    now = datetime.now(UTC)
    services.scheduling.save_definition(JobId(collection, "old"), recurring(), now)
    elsewhere.scheduling.delete_collection(collection, Preconditions())
    again = CollectionBody.model_validate(
        {"location": "northeurope", "properties": {"sku": {"name": "Free"}}}
    )
    elsewhere.scheduling.save_collection_with_jobs(
        collection, CollectionDocument.created(again), now,
        preconditions=Preconditions(), previous=None,
    )  # fmt: skip
    with pytest.raises(Refused):  # every minute: more often than Free allows
        services.scheduling.save_definition(
            JobId(collection, "new"), recurring("Minute"), now
        )
    saved, created = services.scheduling.save_definition(JobId(collection, "new"), recurring(), now)
    assert created and saved.document.region == "North Europe"
    assert [job.id.name for job in elsewhere.storage.jobs.jobs(collection)] == ["new"]


def _jobs_table(services: Services) -> TableClient:
    connection = services.settings.storage_connection
    return TableServiceClient.from_connection_string(connection).get_table_client(JOBS_TABLE)


# --- racing writers ---------------------------------------------------------------------------

WRITERS = 8
NAMES = 10
MAX_JOBS = 6


def test_creates_and_replaces_racing_leave_the_due_index_and_the_counters_exact(
    storage: str,
) -> None:
    """Writers of two processes race over the names: the one that created the collection,
    which knows its terms and that it holds no job yet, and another that learns both."""
    pipeline = Pipeline(storage)
    processes = [pipeline.services, pipeline.another_process()]
    collection = CollectionId("sub-pipeline", "group", f"race-{uuid.uuid4().hex[:8]}")
    body = {
        "location": "westeurope",
        "properties": {"sku": {"name": "P20Premium"}, "quota": {"maxJobCount": MAX_JOBS}},
    }
    pipeline.services.scheduling.save_collection_with_jobs(
        collection, CollectionDocument.created(CollectionBody.model_validate(body)),
        pipeline.clock(), preconditions=Preconditions(), previous=None,
    )  # fmt: skip
    start = bucket_of(pipeline.clock() + timedelta(hours=2))  # one bucket holds every first run
    failures: list[BaseException] = []

    def writer(number: int) -> None:
        chance = random.Random(number)
        for round_ in range(2 * NAMES):
            name = f"job-{chance.randrange(NAMES)}"
            # Each write its own definition, but every third one the same as others (a
            # definition already stored is left as it is: that path races too).
            at = start + timedelta(seconds=0 if round_ % 3 == 0 else number * 20 + round_)
            properties = {
                "startTime": at.isoformat(),
                "action": {
                    "type": "Http",
                    "request": {"uri": "https://example.org/", "method": "GET"},
                },
                "recurrence": {"frequency": "Hour", "interval": 1},
            }
            definition = JobBody.model_validate({"properties": properties}).properties
            try:
                processes[number % 2].scheduling.save_definition(
                    JobId(collection, name), definition, pipeline.clock()
                )
            except (QuotaExceeded, Refused):
                continue
            except BaseException as failure:
                failures.append(failure)
                raise

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not any(thread.is_alive() for thread in threads)
    processes[1].close()
    assert failures == []
    stored = pipeline.store.jobs.jobs(collection)
    assert len(stored) == MAX_JOBS  # ten names were tried: the quota holds, and is filled
    # No spare places: a collection this small holds none.
    counted = pipeline.store.jobs.job_slot(
        JobId(collection, "any"), counted=True
    ).jobs_in_collection
    assert counted == MAX_JOBS
    rows = pipeline.index.due(start, start + timedelta(minutes=5))
    indexed = {
        (row.delivery.job, row.delivery.defined_at, row.delivery.pending.due) for row in rows
    }
    for job in stored:
        for pending in job.document.pending:
            expected = Delivery(job.id, job.document.defined_at, pending)
            assert (expected.job, expected.defined_at, expected.pending.due) in indexed, job.id.name
    # Rows of refused writes were taken back: every row belongs to a job that is there.
    assert {row.delivery.job for row in rows} <= {job.id for job in stored}
