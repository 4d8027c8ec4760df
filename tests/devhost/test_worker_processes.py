"""FUNCTIONS_WORKER_PROCESS_COUNT: the local host runs that many worker processes, as an instance
of the Functions host does. They share the port, the queue and the tables; one runs the timer;
stopping the host stops them all, and none outlives a host that was killed."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from azure.storage.queue import QueueClient, TextBase64EncodePolicy

from devhost import azurite
from devhost.processes import worker_process_count
from shared.domain.attempts import Delivery
from shared.domain.ids import CollectionId, JobId
from shared.execution import messages
from shared.execution.messages import Deliveries
from shared.services import EXECUTIONS_QUEUE
from shared.storage.table_store import table_storage_from_connection_string
from tests.conftest import API_VERSION, launch_host
from tests.targets import Target

WAIT_S = 10.0
PARENT_LINE = re.compile(r"(\d+) worker processes: ([\d, ]+)")
TIMER_LINE = re.compile(r"\[worker (\d+) pid (\d+)\] devhost\.triggers INFO Executing "
                        r"'Functions\.due_attempts_timer' \(Reason='Timer fired at (\S+)'")
QUEUE_LINE = re.compile(r"\[worker \d+ pid (\d+)\] devhost\.triggers INFO Executed 'Functions\.executor' \((\w+)")


@dataclass
class Host:
    process: subprocess.Popen[bytes]
    base_url: str
    key: str
    log: Path

    def workers(self) -> list[int]:
        """The worker processes' ids, as the host announced them."""
        deadline = time.monotonic() + WAIT_S
        while not (found := PARENT_LINE.search(self.log.read_text())):
            assert time.monotonic() < deadline, self.log.read_text()[-2000:]
            time.sleep(0.05)
        return [int(pid) for pid in found.group(2).split(",")]


def start_host(storage: str, log: Path, count: int = 2) -> Host:
    port, key = azurite.free_port(), secrets.token_urlsafe(24)
    process = launch_host(storage, port, key, log, settings={"FUNCTIONS_WORKER_PROCESS_COUNT": str(count)})
    return Host(process, f"http://127.0.0.1:{port}", key, log)


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_until_gone(pids: list[int]) -> list[int]:
    """The ones of `pids` still running after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while (running := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running


@pytest.fixture(scope="module")
def own_storage() -> Iterator[str]:
    """An Azurite for these hosts alone. On the session's, the session host is a second
    instance of the app with a timer of its own, and the local host has no blob lease to make
    one timer of the two, as Azure's hosts do: both would tick the same due index."""
    emulator = azurite.start()
    yield emulator.connection_string
    emulator.stop()


@pytest.fixture
def two_workers(own_storage: str, tmp_path: Path) -> Iterator[Host]:
    host = start_host(own_storage, tmp_path / "host.log")
    yield host
    if host.process.poll() is None:
        host.process.kill()
        host.process.wait(timeout=WAIT_S)


@pytest.mark.parametrize(
    ("value", "count"),
    [pytest.param(None, 1, id="unset_means_one"), pytest.param("1", 1, id="one"),
     pytest.param(" 4 ", 4, id="four"), pytest.param("10", 10, id="ten_the_most"),
     # The host takes `value > 1 ? value : 1`: zero and below count as one.
     pytest.param("0", 1, id="zero_counts_as_one"), pytest.param("-3", 1, id="negative_counts_as_one"),
     pytest.param("+2", 2, id="signed")],
)
def test_the_worker_process_count_is_read_as_the_functions_host_reads_it(value: str | None, count: int) -> None:
    environment = {} if value is None else {"FUNCTIONS_WORKER_PROCESS_COUNT": value}
    assert worker_process_count(environment) == count


@pytest.mark.parametrize("value", ["11", "two", "1.5", "1_0"])
def test_a_worker_process_count_the_host_cannot_start_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ValueError, match="FUNCTIONS_WORKER_PROCESS_COUNT must be a whole number no greater than 10"):
        worker_process_count({"FUNCTIONS_WORKER_PROCESS_COUNT": value})


@pytest.mark.services
def test_two_workers_share_requests_queue_and_tables_with_one_timer_and_stop_together(two_workers: Host) -> None:
    host, target = two_workers, Target()
    workers = host.workers()
    assert len(workers) == 2
    base = f"{host.base_url}/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/jc-{uuid.uuid4().hex[:8]}"
    params, headers = {"api-version": API_VERSION}, {"x-functions-key": host.key}
    created = httpx.put(base, params=params, headers=headers, timeout=WAIT_S,
                        json={"location": "West Europe", "properties": {"sku": {"name": "P10Premium"}}})
    assert created.status_code in (200, 201), created.text

    answered_by: Counter[int] = Counter()
    ran: list[str] = []

    def put_job(name: str, start: datetime) -> None:
        target.answer(f"/{name}")
        body = {"properties": {"startTime": start.isoformat(), "action": {
            "type": "Http", "request": {"uri": target.url(f"/{name}"), "method": "POST", "body": name}}}}
        # A client of its own per request: a new connection, which either worker may accept.
        answer = httpx.put(f"{base}/jobs/{name}", params=params, headers=headers, json=body, timeout=WAIT_S)
        assert answer.status_code in (200, 201), answer.text
        answered_by[int(answer.headers["x-devhost-worker"])] += 1

    def handled_by() -> Counter[int]:
        return Counter(int(pid) for pid, outcome in QUEUE_LINE.findall(host.log.read_text()) if outcome == "Succeeded")

    # One-off jobs, in rounds of 8 due at distinct moments over the next few seconds (some within
    # the queue's horizon, some through the due index and the timer), until both workers have run
    # some of the queue's messages, which the host process hands them in turn.
    began = datetime.now(UTC)
    deadline = time.monotonic() + 20
    with ThreadPoolExecutor(8) as clients:
        while len(handled_by()) < 2 or len(answered_by) < 2:
            assert time.monotonic() < deadline, (answered_by, handled_by())
            first = datetime.now(UTC) + timedelta(seconds=2)
            names = [f"job-{len(ran) + n}" for n in range(8)]
            list(clients.map(put_job, names, [first + timedelta(seconds=0.7 * n) for n in range(8)]))
            ran += names
            for name in names:
                target.wait_for(f"/{name}", timeout=WAIT_S)

    assert set(answered_by) == set(workers), "HTTP answered by both workers, and no one else"
    assert set(handled_by()) == set(workers), "queue messages run by both workers"
    # Every job ran exactly once, whichever worker took it (a second call would come by now).
    time.sleep(1)
    assert {name: len(target.received(f"/{name}")) for name in ran} == dict.fromkeys(ran, 1)

    fired = TIMER_LINE.findall(host.log.read_text())
    seconds = Counter(moment for _, _, moment in fired)
    assert {(int(index), int(pid)) for index, pid, _ in fired} == {(0, workers[0])}, "worker 0 alone runs the timer"
    assert [moment for moment, times in seconds.items() if times > 1] == [], "each tick fired once"
    elapsed = (datetime.now(UTC) - began).total_seconds()
    assert len(seconds) >= elapsed - 3, "a tick every second: none skipped"

    host.process.send_signal(signal.SIGTERM)
    assert host.process.wait(timeout=WAIT_S) == 0
    assert wait_until_gone(workers) == []
    target.close()


@pytest.mark.services
def test_no_worker_outlives_a_host_that_was_killed(two_workers: Host) -> None:
    workers = two_workers.workers()
    assert all(alive(pid) for pid in workers)
    os.kill(two_workers.process.pid, signal.SIGKILL)
    two_workers.process.wait(timeout=WAIT_S)
    assert wait_until_gone(workers) == []
    assert "the local host's parent process is gone: stopping" in two_workers.log.read_text()


@pytest.mark.services
def test_the_same_attempts_handed_to_two_worker_processes_call_each_target_once(
    two_workers: Host, own_storage: str
) -> None:
    """Each attempt's message is sent twice more, so that both processes hold the same attempts
    at the same moment, over several rounds: every job is called once, and recorded once."""
    host, target = two_workers, Target()
    assert len(host.workers()) == 2
    collection = CollectionId("sub", "rg", f"jc-{uuid.uuid4().hex[:8]}")
    base = f"{host.base_url}/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/{collection.name}"
    params, headers = {"api-version": API_VERSION}, {"x-functions-key": host.key}
    created = httpx.put(base, params=params, headers=headers, timeout=WAIT_S,
                        json={"location": "West Europe", "properties": {"sku": {"name": "P20Premium"}}})  # fmt: skip
    assert created.status_code in (200, 201), created.text
    store = table_storage_from_connection_string(own_storage)
    queue = QueueClient.from_connection_string(own_storage, EXECUTIONS_QUEUE, message_encode_policy=TextBase64EncodePolicy())
    target.answer("/twice")
    rounds = {round_: [f"job-{round_}-{n}" for n in range(20)] for round_ in range(4)}
    names = [name for batch in rounds.values() for name in batch]
    first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
    with httpx.Client(params=params, headers=headers, timeout=WAIT_S) as api:
        for round_, batch in rounds.items():
            for name in batch:
                start = first + timedelta(seconds=2 * round_)
                body = {"properties": {"startTime": start.isoformat(), "action": {
                    "type": "Http", "request": {"uri": target.url("/twice"), "method": "POST", "body": name}}}}  # fmt: skip
                assert api.put(f"{base}/jobs/{name}", json=body).status_code in (200, 201)
    assert datetime.now(UTC) < first - timedelta(seconds=2), "saving took too long for the test to hold"
    for round_, batch in rounds.items():
        deliveries = []
        for name in batch:
            stored = store.jobs.job(JobId(collection, name))
            assert stored is not None
            deliveries.append(Delivery(stored.id, stored.document.defined_at, stored.document.pending[0], datetime.now(UTC)))
        due = first + timedelta(seconds=2 * round_)
        for _ in range(2):  # two more copies of what the API sent: three deliveries of each attempt
            messages.send(queue, Deliveries(tuple(deliveries)), visible_in=due - datetime.now(UTC) - timedelta(seconds=1))
    target.wait_for("/twice", count=len(names), timeout=40)
    time.sleep(2)  # a second call of any of them would have come by now
    bodies = Counter(call.body.decode() for call in target.received("/twice"))
    assert {name: bodies[name] for name in names} == dict.fromkeys(names, 1)
    for name in names:
        history = httpx.get(f"{base}/jobs/{name}/history", params=params, headers=headers, timeout=WAIT_S).json()["value"]
        assert [entry["properties"]["status"] for entry in history] == ["Completed"], name
    target.close()
