"""Jobs run in the local host exactly as in Azure: the timer and queue triggers, end to end."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from shared.domain.wire import parse_iso
from tests.api.test_jobs import job_path, new_collection
from tests.targets import Target

# The executor needs a moment after the target answers to write the history.
SETTLE_S = 5.0
# "At once" and "on time" within this, on a CI machine busy with the rest of the suite: the queue
# is polled every 0.5 s at most, and a call took 1.04 s there once. How late calls come under
# load is the benchmarks' measure (bench/pipeline.py), not a test's.
PROMPT_S = 3.0


def job_calling(target: Target, path: str, **properties: Any) -> dict[str, Any]:
    action = {"type": "Http", "request": {"uri": target.url(path), "method": "POST", "body": "run"}}
    return {"properties": {"action": action} | properties}


def history(api: httpx.Client, collection: str, name: str, count: int) -> list[dict[str, Any]]:
    deadline = datetime.now(UTC) + timedelta(seconds=SETTLE_S)
    while True:
        entries = api.get(f"{job_path(collection, name)}/history").json()["value"]
        if len(entries) >= count or datetime.now(UTC) > deadline:
            return [entry["properties"] for entry in entries]


def test_run_now_calls_the_target_and_records_history(api: httpx.Client, target: Target) -> None:
    collection, name = new_collection(api), f"now-{uuid.uuid4().hex[:6]}"
    target.answer(f"/{name}", 200, b"ran")
    in_a_day = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert api.put(job_path(collection, name), json=job_calling(target, f"/{name}", startTime=in_a_day)).status_code == 201
    asked = datetime.now(UTC)
    assert api.post(f"{job_path(collection, name)}/run").status_code == 200
    [call] = target.wait_for(f"/{name}")
    assert call.at - asked < timedelta(seconds=PROMPT_S)  # its own time is a day away
    assert call.headers["x-ms-scheduler-jobid"].endswith(f"/jobs/{name}")
    [entry] = history(api, collection, name, 1)
    assert (entry["status"], entry["actionName"]) == ("Completed", "MainAction")
    job = api.get(job_path(collection, name)).json()["properties"]
    assert job["status"]["executionCount"] == 1
    assert job["status"]["nextExecutionTime"] == job["startTime"]  # its schedule is untouched


def test_a_job_without_start_time_runs_at_once_and_completes(api: httpx.Client, target: Target) -> None:
    collection, name = new_collection(api), f"once-{uuid.uuid4().hex[:6]}"
    target.answer(f"/{name}", 200)
    assert api.put(job_path(collection, name), json=job_calling(target, f"/{name}")).status_code == 201
    target.wait_for(f"/{name}")
    history(api, collection, name, 1)
    job = api.get(job_path(collection, name)).json()["properties"]
    assert job["state"] == "completed"
    assert "nextExecutionTime" not in job["status"]


def test_a_job_beyond_the_horizon_goes_through_the_timer_and_runs_on_time(api: httpx.Client, target: Target) -> None:
    collection, name = new_collection(api), f"timer-{uuid.uuid4().hex[:6]}"
    target.answer(f"/{name}", 200)
    start = (datetime.now(UTC) + timedelta(seconds=7)).replace(microsecond=0)
    body = job_calling(target, f"/{name}", startTime=start.isoformat())
    assert api.put(job_path(collection, name), json=body).status_code == 201
    [call] = target.wait_for(f"/{name}", timeout=15)
    assert parse_iso(call.headers["x-ms-scheduler-expected-execution-time"]) == start
    assert timedelta(0) <= call.at - start < timedelta(seconds=PROMPT_S)  # never early


def test_a_job_deleted_before_its_time_never_runs(api: httpx.Client, target: Target) -> None:
    collection, name = new_collection(api), f"gone-{uuid.uuid4().hex[:6]}"
    target.answer(f"/{name}", 200)
    start = datetime.now(UTC) + timedelta(seconds=2)
    assert api.put(job_path(collection, name), json=job_calling(target, f"/{name}", startTime=start.isoformat())).status_code == 201
    assert api.delete(job_path(collection, name)).status_code == 200
    target.answer("/marker", 200)
    marker = f"marker-{uuid.uuid4().hex[:6]}"
    later = datetime.now(UTC) + timedelta(seconds=3)
    api.put(job_path(collection, marker), json=job_calling(target, "/marker", startTime=later.isoformat()))
    target.wait_for("/marker", timeout=10)  # a later job ran: the deleted one had its chance
    assert target.received(f"/{name}") == []
