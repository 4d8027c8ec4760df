"""Crash safety and downtime, with the real local host killed (SIGKILL) and restarted.

About five minutes of wall time: jobs recur at most once a minute, so several occurrences take
minutes.
"""

from __future__ import annotations

import random
import secrets
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from devhost import azurite
from shared.domain.wire import iso, parse_iso
from tests.conftest import API_VERSION, launch_host
from tests.targets import Target

pytestmark = pytest.mark.services  # it starts an Azurite and hosts of its own
CHAOS_JOBS = 100
OCCURRENCES = 3
STEADY_JOBS = 10
DOWNTIME = timedelta(seconds=130)
SUB, GROUP = "sub-resilience", "group"


@dataclass
class Host:
    storage: str
    port: int
    key: str
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = launch_host(self.storage, self.port, self.key, self.log)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()  # SIGKILL: no clean-up of any kind
        self.process.wait(timeout=10)

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30.0,
                            headers={"x-functions-key": self.key}, params={"api-version": API_VERSION})  # fmt: skip


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    emulator = azurite.start()  # its own: the session's host must not run these jobs
    host = Host(emulator.connection_string, azurite.free_port(), secrets.token_urlsafe(16),
                tmp_path_factory.mktemp("resilience") / "host.log")  # fmt: skip
    host.start()
    yield host
    if host.process and host.process.poll() is None:
        host.kill()
    emulator.stop()


def jobs_path(collection: str) -> str:
    return f"/subscriptions/{SUB}/resourceGroups/{GROUP}/providers/Microsoft.Scheduler/jobCollections/{collection}"


@pytest.mark.timeout(600)
def test_killed_hosts_lose_no_occurrence_and_downtime_runs_each_job_once(host: Host) -> None:
    target = Target()
    target.answer("/chaos", 200)
    target.answer("/steady", 200)
    collection = f"jc-{uuid.uuid4().hex[:6]}"
    base = jobs_path(collection)
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
    with host.api() as api:
        put = api.put(base, json={"location": "West Europe", "properties": {"sku": {"name": "P20Premium"}}})
        assert put.status_code == 201
        for n in range(CHAOS_JOBS):
            api.put(f"{base}/jobs/chaos-{n}", json=job(target, "/chaos", start + timedelta(seconds=n % 20), count=OCCURRENCES)).raise_for_status()
        for n in range(STEADY_JOBS):
            api.put(f"{base}/jobs/steady-{n}", json=job(target, "/steady", start + timedelta(seconds=n))).raise_for_status()

    # Chaos: until every chaos occurrence is due (the last at start + 2:19), kill and restart.
    chaos_ends = start + timedelta(minutes=OCCURRENCES - 1, seconds=25)
    rng = random.Random(7)
    kills = 0
    while datetime.now(UTC) < chaos_ends:
        time.sleep(rng.uniform(2, 8))
        host.kill()
        kills += 1
        time.sleep(rng.uniform(0, 2))
        host.start()
    # Downtime: down across two occurrences of every steady job, then back.
    time.sleep(5)
    down_at = datetime.now(UTC)
    host.kill()
    time.sleep(DOWNTIME.total_seconds())
    back_at = datetime.now(UTC)
    host.start()
    time.sleep(20)

    with host.api() as api:
        chaos = {n: history(api, f"{base}/jobs/chaos-{n}") for n in range(CHAOS_JOBS)}
        steady = {n: history(api, f"{base}/jobs/steady-{n}") for n in range(STEADY_JOBS)}
        states = {job["name"]: job["properties"]["state"] for job in api.get(f"{base}/jobs").json()["value"]}
    target.close()
    assert kills >= 12

    # Every occurrence has exactly one final entry, none lost; every call of one occurrence
    # carried the same execution id.
    for n, entries in chaos.items():
        first = start + timedelta(seconds=n % 20)
        by_time = defaultdict(list)
        for entry in entries:
            by_time[entry["expectedExecutionTime"]].append(entry["status"])
        assert set(by_time) == {iso(first + timedelta(minutes=m)) for m in range(OCCURRENCES)}, n
        assert all(len(statuses) == 1 and statuses[0] in ("Completed", "Postponed") for statuses in by_time.values()), by_time
        assert states[f"{collection}/chaos-{n}"] == "completed"
    identities: dict[tuple[str, str], set[str]] = defaultdict(set)
    for call in target.received():
        key = (call.headers["x-ms-scheduler-jobid"], call.headers["x-ms-scheduler-expected-execution-time"])
        identities[key].add(call.headers["x-ms-scheduler-execution-id"])
    assert all(len(ids) == 1 for ids in identities.values())
    completed = sum(entry["status"] == "Completed" for entries in chaos.values() for entry in entries)
    called = {key for key in identities if "/jobs/chaos-" in key[0]}
    assert len(called) >= completed

    # After the downtime: one run for the latest missed occurrence, the rest Postponed.
    for n, entries in steady.items():
        since_down = sorted((entry for entry in entries if parse_iso(entry["expectedExecutionTime"]) > down_at),
                            key=lambda entry: entry["expectedExecutionTime"])  # fmt: skip
        statuses = [entry["status"] for entry in since_down]
        ran = statuses.index("Completed")
        assert ran >= 1 and set(statuses[:ran]) == {"Postponed"}, (n, statuses)
        assert parse_iso(since_down[ran]["expectedExecutionTime"]) <= back_at + timedelta(seconds=15)


def job(target: Target, path: str, start: datetime, count: int | None = None) -> dict[str, Any]:
    recurrence: dict[str, Any] = {"frequency": "Minute", "interval": 1}
    if count is not None:
        recurrence["count"] = count
    action = {"type": "Http", "request": {"uri": target.url(path), "method": "POST"},
              "retryPolicy": {"retryType": "None"}}  # fmt: skip
    return {"properties": {"startTime": iso(start), "action": action, "recurrence": recurrence}}


def history(api: httpx.Client, job_path: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    url: str | None = f"{job_path}/history"
    while url:
        page = api.get(url).json()
        entries += [item["properties"] for item in page["value"]]
        url = page.get("nextLink")
    return entries
