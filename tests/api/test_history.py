"""Job history over HTTP: newest first, filtered by status, paged, removed with its job."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
from azure.data.tables import TableServiceClient

from shared.api.arm import ApiRequest
from shared.api.job_operations import list_history
from shared.domain.attempts import Attempt
from shared.domain.ids import CollectionId, JobId
from shared.storage.jobs import JOBS_TABLE
from shared.storage.table_store import table_storage, table_storage_from_connection_string
from tests.api.test_jobs import (
    SUBSCRIPTION,
    collection_path,
    http_job,
    job_path,
    new_collection,
    put_job,
)
from tests.conftest import Service
from tests.pipeline import Pipeline


def entry(status: str, expected: datetime, retry: int = 0) -> dict[str, object]:
    return {
        "startTime": (expected + timedelta(milliseconds=40)).isoformat().replace("+00:00", "Z"),
        "endTime": (expected + timedelta(milliseconds=90)).isoformat().replace("+00:00", "Z"),
        "expectedExecutionTime": expected.isoformat().replace("+00:00", "Z"),
        "actionName": "MainAction",
        "status": status,
        "message": "Http Action - Response from host 'example.org': 'OK' Response Headers: ...",
        "retryCount": retry,
        "repeatCount": 1,
    }


def test_history_lists_newest_first_filters_pages_and_goes_with_the_job(api: httpx.Client, service: Service) -> None:
    collection = new_collection(api)
    name = f"hist-{uuid.uuid4().hex[:6]}"
    assert put_job(api, collection, http_job(), name=name).status_code == 201
    store = table_storage_from_connection_string(service.storage)
    job = JobId(CollectionId(SUBSCRIPTION, "jobs-rg", collection), name)
    first = datetime(2026, 11, 1, 5, 0, tzinfo=UTC)
    statuses = ["Completed", "Failed", "Completed", "Postponed", "Failed"]
    for n, status in enumerate(statuses):
        expected = first + timedelta(hours=n)
        store.history.add(job, [(Attempt(expected).history_id, entry(status, expected))])

    history = api.get(f"{job_path(collection, name)}/history").json()["value"]
    assert [item["properties"]["status"] for item in history] == statuses[::-1]
    newest = history[0]
    assert newest["type"] == "Microsoft.Scheduler/jobCollections/jobs/history"
    assert newest["id"].startswith(f"{job_path(collection, name)}/history/")
    assert newest["name"] == f"{collection}/{name}/{newest['id'].rsplit('/', 1)[1]}"
    assert newest["properties"]["expectedExecutionTime"] == "2026-11-01T09:00:00Z"

    failed = api.get(f"{job_path(collection, name)}/history", params={"$filter": "status eq 'failed'"}).json()
    assert [item["properties"]["expectedExecutionTime"] for item in failed["value"]] == [
        "2026-11-01T09:00:00Z", "2026-11-01T06:00:00Z",
    ]
    page = api.get(f"{job_path(collection, name)}/history", params={"$top": 2, "$skip": 1}).json()
    assert [item["properties"]["status"] for item in page["value"]] == ["Postponed", "Completed"]
    assert "$skip=3" in page["nextLink"]
    bad = api.get(f"{job_path(collection, name)}/history", params={"$filter": "status eq 'Lost'"})
    assert bad.status_code == 400
    assert "use status eq '<one of Completed, Failed, Postponed>'" in bad.json()["error"]["message"]

    assert api.delete(job_path(collection, name)).status_code == 200
    assert store.history.entries(job) == []
    assert api.get(f"{job_path(collection, name)}/history").status_code == 404
    assert api.delete(collection_path(collection)).status_code == 200


# --- the cost of a page -------------------------------------------------------------------------

HISTORY_LENGTH = 1_022


class RowsRead:
    """The jobs table's rows that storage answered with, and the requests, as a response hook."""

    def __init__(self) -> None:
        self.rows = self.requests = 0

    def __call__(self, response: Any) -> None:
        request = response.http_request
        if request.method != "GET" or f"/{JOBS_TABLE}" not in request.url:
            return
        self.requests += 1
        body = json.loads(response.http_response.text() or "{}")
        self.rows += len(body["value"]) if "value" in body else 1


def history_request(url: str) -> ApiRequest:
    parts = urlsplit(url)
    names = parts.path.split("/")
    route = {"subscriptionId": names[2], "resourceGroupName": names[4], "jobCollectionName": names[8], "jobName": names[10]}
    query = {name.lower(): value for name, value in parse_qsl(parts.query, keep_blank_values=True)}
    return ApiRequest("GET", url, route, query, {"host": parts.netloc}, b"")


def test_a_history_page_reads_only_the_entries_it_shows(storage: str) -> None:
    counted = RowsRead()
    store = table_storage(TableServiceClient.from_connection_string(storage, raw_response_hook=counted))
    pipeline = Pipeline(storage, store=store)
    job = pipeline.put_job("long-history", {"startTime": "2026-11-01T05:00:00Z", "recurrence": {"frequency": "Minute"},
                                            "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/", "method": "GET"}}})  # fmt: skip
    first = datetime(2026, 11, 1, 5, 0, tzinfo=UTC)
    written = [(Attempt(first + timedelta(minutes=n)).history_id,
                entry("Failed" if n % 3 == 0 else "Completed", first + timedelta(minutes=n))) for n in range(HISTORY_LENGTH)]  # fmt: skip
    store.history.add(job, written)
    newest_first = sorted(entry_id for entry_id, _ in written)
    services = replace(pipeline.services, settings=replace(pipeline.services.settings, public_base_url="https://scheduler.example.com"))

    def walk(query: str, top: int, skipped: int = 0) -> list[str]:
        seen: list[str] = []
        url: str | None = f"http://forged.example{job.arm_id}/history?api-version=2016-03-01&code=the-key&{query}"
        while url:
            counted.rows = counted.requests = 0
            answer = list_history(history_request(url), services).body
            assert isinstance(answer, dict)
            # The job's own row, and one entry more than the page shows (whether more follow);
            # a `$skip` of the client's own also reads the keys of the entries it skips, once.
            assert counted.rows <= top + 2 + skipped and counted.requests <= 2 + (skipped > 0), (counted.rows, counted.requests)
            skipped = 0
            seen += [item["id"].rsplit("/", 1)[1] for item in answer["value"]]
            url = answer["nextLink"]
            if url is not None:
                assert url.startswith(f"https://scheduler.example.com{job.arm_id}/history?")
                assert "code=" not in url and "forged" not in url
        return seen

    assert walk("$top=100", 100) == newest_first
    failed = [entry_id for entry_id, item in sorted(written) if item["status"] == "Failed"]
    assert walk("$top=25&$filter=status eq 'Failed'", 25) == failed
    assert walk("$top=7&$skip=1000", 7, skipped=1000) == newest_first[1000:]
