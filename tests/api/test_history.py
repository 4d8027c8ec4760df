"""Job history over HTTP: newest first, filtered by status, paged, removed with its job."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx

from shared.domain.attempts import Attempt
from shared.domain.ids import CollectionId, JobId
from shared.storage.store import Store
from tests.api.test_jobs import (
    SUBSCRIPTION,
    collection_path,
    http_job,
    job_path,
    new_collection,
    put_job,
)
from tests.conftest import Service


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
    store = Store.from_connection_string(service.storage)
    job = JobId(CollectionId(SUBSCRIPTION, "jobs-rg", collection), name)
    first = datetime(2026, 11, 1, 5, 0, tzinfo=UTC)
    statuses = ["Completed", "Failed", "Completed", "Postponed", "Failed"]
    for n, status in enumerate(statuses):
        expected = first + timedelta(hours=n)
        store.add_history(job, [(Attempt(expected).history_id, entry(status, expected))])

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
    assert store.history(job) == []
    assert api.get(f"{job_path(collection, name)}/history").status_code == 404
    assert api.delete(collection_path(collection)).status_code == 200
