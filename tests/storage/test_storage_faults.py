"""The storage clients under the faults Azure Storage produces and Azurite never does, injected by
tests/fault_proxy.py between the clients and Azurite: a busy service retried after its
Retry-After, and a write whose answer was lost (500 OperationTimedOut after it was applied, a
dropped connection) resolved by reading what storage holds, never applied twice. Also what the
quota does when a job's insert was applied but its answer lost (the SDK's client retries it and
meets its own first copy: 409)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableServiceClient, UpdateMode

from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_document import JobDocument
from shared.storage.clients import tables_from_connection_string
from shared.storage.errors import QuotaExceeded
from shared.storage.interface import Preconditions, Storage
from shared.storage.table_store import table_storage
from tests.fault_proxy import FaultProxy, before
from tests.job_properties import properties_in

TABLE = "faults"
DOCUMENT = JobDocument(properties_in("Enabled"), datetime(2026, 11, 28, tzinfo=UTC))
FREE_QUOTA = 5


@pytest.fixture(scope="module")
def proxy(storage: str) -> Iterator[FaultProxy]:
    started = before(storage)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def direct(storage: str) -> Any:
    """The table read straight from Azurite, past the proxy: what storage really holds."""
    service = TableServiceClient.from_connection_string(storage)
    with contextlib.suppress(ResourceExistsError):
        service.create_table(TABLE)
    return service.get_table_client(TABLE)


def own_table(proxy: FaultProxy) -> Any:
    account = tables_from_connection_string(proxy.connection_string())
    table = account.get_table_client(TABLE)
    table._endpoint.sleep = lambda _s: None  # no pauses: the retries are counted, not waited
    return table


def posts(method: str, path: str, _body: bytes) -> bool:
    return method == "POST" and "$batch" not in path


def entity(**properties: Any) -> dict[str, Any]:
    return {"PartitionKey": "p", "RowKey": uuid.uuid4().hex, **properties}


@pytest.mark.parametrize("fault", ["timed_out", "dropped"])
def test_an_insert_applied_with_its_answer_lost_succeeds_once(
    proxy: FaultProxy, direct: Any, fault: Any
) -> None:
    table, row = own_table(proxy), entity(Text="it's 100% done", Number=2**40)
    proxy.fail_next(fault, posts)
    metadata = table.create_entity(row)
    stored = direct.get_entity("p", row["RowKey"])
    assert stored["Text"] == "it's 100% done" and stored["Number"].value == 2**40
    assert metadata["etag"] == stored.metadata["etag"]


def test_an_insert_lost_then_taken_by_another_writer_is_refused_as_existing(
    proxy: FaultProxy, direct: Any
) -> None:
    table, row = own_table(proxy), entity(Text="mine")
    direct.create_entity({**row, "Text": "someone else's"})
    proxy.fail_next("dropped", posts)
    with pytest.raises(ResourceExistsError):
        table.create_entity(row)
    assert direct.get_entity("p", row["RowKey"])["Text"] == "someone else's"


def test_an_etag_checked_update_whose_answer_was_lost_is_not_refused_by_its_own_first_copy(
    proxy: FaultProxy, direct: Any
) -> None:
    table, row = own_table(proxy), entity(Count=1)
    etag = direct.create_entity(row)["etag"]
    proxy.fail_next("timed_out", lambda method, *_: method == "PUT")
    metadata = table.update_entity(
        {**row, "Count": 2}, mode=UpdateMode.REPLACE, etag=etag,
        match_condition=MatchConditions.IfNotModified,
    )  # fmt: skip
    stored = direct.get_entity("p", row["RowKey"])
    assert stored["Count"] == 2 and metadata["etag"] == stored.metadata["etag"]


def test_a_batch_applied_with_its_answer_lost_is_resolved_not_sent_again(
    proxy: FaultProxy, direct: Any
) -> None:
    table = own_table(proxy)
    first, second = entity(N=1), entity(N=2)
    etag = direct.create_entity(first)["etag"]
    batches = lambda method, path, _body: "$batch" in path  # noqa: E731
    proxy.fail_next("timed_out", batches)
    sent_before = len(proxy.seen)
    results = table.submit_transaction(
        [
            ("update", {**first, "N": 10}, {"mode": UpdateMode.MERGE, "etag": etag,
                                            "match_condition": MatchConditions.IfNotModified}),
            ("create", second),
        ]
    )  # fmt: skip
    assert direct.get_entity("p", first["RowKey"])["N"] == 10
    assert direct.get_entity("p", second["RowKey"])["N"] == 2
    assert all(result["etag"] for result in results)
    sent = [each for each in proxy.seen[sent_before:] if "$batch" in each.path]
    assert len(sent) == 1  # resolved by reading: not sent a second time


def test_a_busy_service_is_retried_after_its_retry_after(proxy: FaultProxy, direct: Any) -> None:
    table, row = own_table(proxy), entity(N=1)
    direct.create_entity(row)
    pauses: list[float] = []
    table._endpoint.sleep = pauses.append
    proxy.rates.retry_after_s = 3
    proxy.fail_next("busy", lambda method, *_: method == "GET", times=2)
    try:
        assert table.get_entity("p", row["RowKey"])["N"] == 1
    finally:
        proxy.rates.retry_after_s = 1
    assert len(pauses) == 2 and all(pause >= 3 for pause in pauses)


# --- the quota (issue 42's finding) ------------------------------------------------------


def sdk_store(proxy: FaultProxy) -> Storage:
    """A store on the SDK's TableServiceClient through the proxy: its retries send a lost insert
    again, as the finding's client did."""
    service = TableServiceClient.from_connection_string(
        proxy.connection_string(), retry_backoff_factor=0.01
    )
    store = table_storage(service)
    store.create_tables()
    return store


def own_store(proxy: FaultProxy) -> Storage:
    return table_storage(tables_from_connection_string(proxy.connection_string()))


def job_inserts(method: str, path: str, body: bytes) -> bool:
    resource = path.split("?", maxsplit=1)[0]
    return method == "POST" and resource.endswith("/jobs") and b'"Document"' in body


@pytest.mark.parametrize("client", ["sdk", "own"])
def test_a_job_insert_whose_answer_was_lost_keeps_the_free_quota_exact(
    proxy: FaultProxy, client: str
) -> None:
    store = sdk_store(proxy) if client == "sdk" else own_store(proxy)
    collection = CollectionId("fault-tests", "rg", f"free-{uuid.uuid4().hex[:6]}")
    created = []
    for n in range(FREE_QUOTA + 3):
        job = JobId(collection, f"job-{n}")
        proxy.fail_next("timed_out", job_inserts)  # every insert applied, its answer lost
        try:
            _, was_created = store.jobs.save_job(
                job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), max_jobs=FREE_QUOTA
            )
        except QuotaExceeded:
            continue
        created.append(was_created)
    assert len(store.jobs.jobs(collection)) == FREE_QUOTA
    assert created == [True] * FREE_QUOTA
    counted = store.jobs.job_slot(JobId(collection, "any"), counted=True).jobs_in_collection
    assert counted == FREE_QUOTA


def batches(method: str, path: str, _body: bytes) -> bool:
    return method == "POST" and "$batch" in path


@pytest.mark.parametrize("client", ["sdk", "own"])
def test_a_job_insert_batched_with_its_collections_mark_whose_answer_was_lost_counts_once(
    proxy: FaultProxy, client: str
) -> None:
    """A create in a collection with an incarnation mark is one batch (the insert and the
    mark's rewrite); its answer lost, the job is there once, counted once, and created."""
    store = sdk_store(proxy) if client == "sdk" else own_store(proxy)
    collection = CollectionId("fault-tests", "rg", f"marked-{uuid.uuid4().hex[:6]}")
    body = CollectionBody.model_validate(
        {"location": "westeurope", "properties": {"sku": {"name": "Free"}}}
    )
    within, _ = store.collections.save_collection(collection, CollectionDocument.created(body), Preconditions())
    created, sent_before = [], len(proxy.seen)
    for n in range(FREE_QUOTA + 2):
        job = JobId(collection, f"job-{n}")
        proxy.fail_next("timed_out", batches)  # the batch applied, its answer lost
        try:
            _, was_created = store.jobs.save_job(
                job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), max_jobs=FREE_QUOTA,
                within=within,
            )  # fmt: skip
        except QuotaExceeded:
            continue
        created.append(was_created)
    assert created == [True] * FREE_QUOTA
    assert sum("$batch" in each.path for each in proxy.seen[sent_before:]) >= FREE_QUOTA
    assert len(store.jobs.jobs(collection)) == FREE_QUOTA
    counted = store.jobs.job_slot(JobId(collection, "any"), counted=True).jobs_in_collection
    assert counted == FREE_QUOTA
