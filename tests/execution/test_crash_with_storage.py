"""The local host and its Azurite killed together (SIGKILL) mid-run, and restarted on the same
data: no occurrence is lost, and a target is called again only for a try that was in flight at
the crash, with the same execution id (docs/behaviour.md#once-per-try).

About three minutes: a try in flight at the crash is taken over when its claim runs out, 80 s
after it was claimed.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from devhost import azurite
from shared.domain.wire import iso
from tests.conftest import API_VERSION, launch_host
from tests.execution.test_resilience import history
from tests.targets import Received, Target

pytestmark = pytest.mark.services  # an Azurite and a host of its own, both killed
JOBS = 240  # one-off jobs: one occurrence each
SPREAD = timedelta(seconds=40)  # their times, evenly over this span
CRASH_AFTER = timedelta(seconds=20)  # after the first is due: in the middle of them
SLOW_S = 1.0  # how long the target takes to answer: calls are in flight when the crash comes
SUB, GROUP = "sub-crash", "group"


class Stack:
    """A durable Azurite on a folder of its own and a host on it, each restartable on the same
    ports and data."""

    def __init__(self, location: Path, log: Path) -> None:
        self.location, self.log = location, log
        *ports, self.port = azurite.chosen_ports((0, 0, 0, 0))
        self.ports, self.key = tuple(ports), secrets.token_urlsafe(16)
        self.storage = azurite.start(*self.ports, location=location, durable=True)
        self.host = launch_host(self.storage.connection_string, self.port, self.key, log)

    def kill(self) -> None:
        """Both at once, with no clean-up of any kind."""
        self.host.kill()
        self.storage.process.kill()
        self.host.wait(timeout=10)
        self.storage.process.wait(timeout=10)

    def restart(self) -> None:
        self.storage = azurite.start(*self.ports, location=self.location, durable=True)
        self.host = launch_host(self.storage.connection_string, self.port, self.key, self.log)

    def stop(self) -> None:
        if self.host.poll() is None:
            self.host.kill()
            self.host.wait(timeout=10)
        self.storage.stop()

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30.0,
                            headers={"x-functions-key": self.key}, params={"api-version": API_VERSION})  # fmt: skip


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path / "azurite", tmp_path / "host.log")
    yield running
    running.stop()


def state(api: httpx.Client, job: str) -> str:
    answer = api.get(job)
    return str(answer.json()["properties"]["state"]).lower() if answer.status_code == 200 else ""


def slowly(received: Received) -> tuple[int, bytes, dict[str, str]]:
    time.sleep(SLOW_S)  # the target's own slowness (its thread), not the test's
    return 200, b"ok", {}


@pytest.mark.timeout(600)
def test_a_crash_of_host_and_storage_loses_no_occurrence_and_repeats_only_tries_in_flight(
    stack: Stack,
) -> None:
    target = Target()
    target.respond("/crash", slowly)
    base = (f"/subscriptions/{SUB}/resourceGroups/{GROUP}/providers/Microsoft.Scheduler"
            f"/jobCollections/jc-{uuid.uuid4().hex[:6]}")  # fmt: skip
    first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=30)
    with stack.api() as api:
        created = api.put(base, json={"location": "West Europe", "properties": {"sku": {"name": "P20Premium"}}})
        assert created.status_code == 201, created.text
        for n in range(JOBS):
            start = first + SPREAD * n / JOBS
            action = {"type": "Http", "request": {"uri": target.url("/crash"), "method": "POST"},
                      "retryPolicy": {"retryType": "None"}}  # fmt: skip
            api.put(f"{base}/jobs/job-{n}", json={"properties": {"startTime": iso(start), "action": action}}).raise_for_status()
    assert datetime.now(UTC) < first, "saving the jobs took longer than the test allows"

    crash_at = first + CRASH_AFTER
    time.sleep((crash_at - datetime.now(UTC)).total_seconds())
    stack.kill()
    killed_at = datetime.now(UTC)
    called_before_crash = len(target.received("/crash"))
    time.sleep(3)
    stack.restart()

    # Every job runs: those whose try was in flight at the crash once their claim runs out.
    deadline = time.monotonic() + 240
    with stack.api() as api:
        running = set(range(JOBS))
        while running and time.monotonic() < deadline:
            time.sleep(2)
            running = {n for n in running if state(api, f"{base}/jobs/job-{n}") != "completed"}
        entries = {n: history(api, f"{base}/jobs/job-{n}") for n in range(JOBS)}
    time.sleep(2)  # a call after the last recorded would have come by now
    target.close()

    assert 0 < called_before_crash < JOBS, "the crash came in the middle of the occurrences"
    lost = [n for n, found in entries.items() if [entry["status"] for entry in found] != ["Completed"]]
    assert lost == [], {n: entries[n] for n in lost[:5]}

    calls: dict[tuple[str, str, str], list[Received]] = defaultdict(list)
    for call in target.received("/crash"):
        key = (call.headers["x-ms-scheduler-jobid"], call.headers["x-ms-scheduler-expected-execution-time"],
               call.headers["x-ms-scheduler-retry-count"])  # fmt: skip
        calls[key].append(call)
    assert len(calls) == JOBS
    repeated = {key: found for key, found in calls.items() if len(found) > 1}
    assert repeated, "some calls were under way at the crash (6 a second, each 1 s long)"
    for key, found in repeated.items():
        assert len(found) == 2, key
        earlier, repeat = sorted(found, key=lambda call: call.at)
        assert earlier.at <= killed_at, f"{key}: repeated, but its first call came after the crash"
        # Taken over only once the crashed holder's claim ran out (80 s after it claimed, just
        # before its call), never as soon as the message came back (30 s).
        assert repeat.at >= earlier.at + timedelta(seconds=60), key
        ids = {call.headers["x-ms-scheduler-execution-id"] for call in found}
        assert len(ids) == 1, key
    # Only a try whose call was under way when the crash came is repeated: one called in the
    # last SLOW_S before it (and a moment for recording the outcome).
    assert all(min(call.at for call in found) >= killed_at - timedelta(seconds=SLOW_S + 2) for found in repeated.values())
