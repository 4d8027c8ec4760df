"""The whole app under storage faults: the local host on an Azurite of its own, reached only
through the fault proxy (tests/fault_proxy.py) that answers about 5% of storage requests with
ServerBusy, OperationTimedOut after applying, a dropped connection after applying, or a delay of
seconds. Thirty jobs recur every minute for three occurrences each, while jobs are written through
the API and run now. Then the faults stop, and the test checks what a user relies on: no
occurrence lost, repeated calls only with their first call's execution id and at most 1% of
occurrences, every write answered 2xx stored, 503 (never 500) when storage failed a request,
one final history entry per occurrence, no claim past its deadline, no poison message.

Its pace is the app's real minute (the recurrence is read from the host's clock, which the
local host does not let a test move): about three minutes of wall time, spent waiting, not
computing, so it shares the machine well with the rest of the suite."""

from __future__ import annotations

import secrets
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from devhost import azurite
from tests.conftest import API_VERSION, launch_host
from tests.fault_proxy import FaultProxy, Rates, before
from tests.targets import Target

JOBS = 30
OCCURRENCES = 3
FAULTS = Rates(busy=0.02, timed_out=0.01, dropped=0.01, delayed=0.01, delay_s=1.5)
SUBSCRIPTION, GROUP = "faults-sub", "faults-rg"
# After the last occurrence: the time for its call, its outcome and any redelivery (a claim
# whose holder lost its outcome is taken over 80 s after its call began).
SETTLE_S = 120.0


@pytest.fixture(scope="module")
def faulty_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, FaultProxy]]:
    emulator = azurite.start()
    proxy = before(emulator.connection_string)
    port, key = azurite.free_port(), secrets.token_urlsafe(24)
    log = tmp_path_factory.mktemp("faulty-host") / "output.log"
    host = launch_host(proxy.connection_string(), port, key, log)
    yield f"http://127.0.0.1:{port}", key, proxy
    host.terminate()
    host.wait(timeout=10)
    proxy.stop()
    emulator.stop()


class Api:
    """The management API, each write tried again (as ARM clients do) after a 503, every
    answer's status kept."""

    def __init__(self, base_url: str, key: str) -> None:
        self.http = httpx.Client(base_url=base_url, headers={"x-functions-key": key},
                                 params={"api-version": API_VERSION}, timeout=60.0)  # fmt: skip
        self.statuses: Counter[int] = Counter()
        self.without_retry_after = 0

    def send(self, method: str, path: str, body: Any = None) -> httpx.Response:
        for _ in range(10):
            answer = self.http.request(method, path, json=body)
            self.statuses[answer.status_code] += 1
            if answer.status_code != 503:
                return answer
            if "Retry-After" not in answer.headers:
                self.without_retry_after += 1
            time.sleep(0.5)  # shorter than asked: the test has minutes, not hours
        return answer


def collection_path(name: str) -> str:
    return (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Scheduler"
            f"/jobCollections/{name}")  # fmt: skip


def job_body(target: Target, path: str, **properties: Any) -> dict[str, Any]:
    action = {"type": "Http", "request": {"uri": target.url(path), "method": "POST"},
              "retryPolicy": {"retryType": "None"}}  # fmt: skip
    return {"properties": {"action": action, **properties}}


@pytest.mark.services
@pytest.mark.timeout(480)
def test_the_app_keeps_its_promises_while_storage_misbehaves(
    faulty_host: tuple[str, str, FaultProxy], tmp_path: Path
) -> None:
    base_url, key, proxy = faulty_host
    api, target = Api(base_url, key), Target()
    collection = collection_path(f"faults-{uuid.uuid4().hex[:6]}")
    start = (datetime.now(UTC) + timedelta(seconds=25)).replace(microsecond=0)
    recurrence = {"frequency": "Minute", "interval": 1, "count": OCCURRENCES}
    with proxy.faults(FAULTS):
        created = api.send("PUT", collection, {"location": "West Europe",
                                               "properties": {"sku": {"name": "Standard"}}})  # fmt: skip
        assert created.status_code in (200, 201), created.text
        for n in range(JOBS):
            target.answer(f"/job-{n}", 200)
            answer = api.send("PUT", f"{collection}/jobs/job-{n}", job_body(
                target, f"/job-{n}", startTime=start.isoformat(), recurrence=recurrence))  # fmt: skip
            assert answer.status_code in (200, 201), answer.text
        # While the occurrences run: writes of jobs for later, and run-nows.
        later = (start + timedelta(days=1)).isoformat()
        written = []
        ran_now = []
        while datetime.now(UTC) < start + timedelta(minutes=OCCURRENCES - 1, seconds=20):
            name = f"later-{len(written)}"
            target.answer(f"/{name}", 200)
            answer = api.send("PUT", f"{collection}/jobs/{name}",
                              job_body(target, f"/{name}", startTime=later))  # fmt: skip
            if answer.status_code in (200, 201):
                written.append(name)
            if len(written) % 4 == 0:
                run = api.send("POST", f"{collection}/jobs/{name}/run")
                if run.status_code in (200, 202):
                    ran_now.append(name)
            time.sleep(2.0)
    faults_seen = sum(proxy.count(fault) for fault in ("busy", "timed_out", "dropped", "delayed"))
    # Faults stopped: everything recorded within SETTLE_S.
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        finals = [final_entries(api, collection, f"job-{n}") for n in range(JOBS)]
        if all(len(entries) >= OCCURRENCES for entries in finals):
            break
        time.sleep(5)
    time.sleep(5)  # a late repeat, if any, lands now

    assert faults_seen > 0.03 * len(proxy.seen), (faults_seen, len(proxy.seen))
    assert api.statuses[500] == 0 and api.without_retry_after == 0, api.statuses
    for name in written:
        assert api.send("GET", f"{collection}/jobs/{name}").status_code == 200, name
    calls = [call for n in range(JOBS) for call in target.received(f"/job-{n}")]
    tries = Counter((call.path, call.headers["x-ms-scheduler-execution-id"],
                     call.headers.get("x-ms-scheduler-retry-count")) for call in calls)  # fmt: skip
    occurrences = JOBS * OCCURRENCES
    per_job = Counter(path for path, _, _ in tries)
    assert all(per_job[f"/job-{n}"] == OCCURRENCES for n in range(JOBS)), per_job  # none lost
    repeated = sum(count - 1 for count in tries.values())
    assert repeated <= max(1, occurrences // 100), repeated
    for n in range(JOBS):
        entries = final_entries(api, collection, f"job-{n}")
        assert len(entries) == OCCURRENCES, (n, entries)
    for name in ran_now:
        assert target.received(f"/{name}"), name
    health = httpx.get(f"{base_url}/health", timeout=30).json()
    assert health["poison"]["depth"] == 0, health
    assert health["claimsPastDeadline"] == 0, health


def final_entries(api: Api, collection: str, name: str) -> list[dict[str, Any]]:
    answer = api.send("GET", f"{collection}/jobs/{name}/history")
    if answer.status_code != 200:
        return []
    return [entry["properties"] for entry in answer.json()["value"]
            if entry["properties"]["status"] in ("Completed", "Failed")]  # fmt: skip
