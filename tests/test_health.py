"""`GET /health`: anonymous, quick, and nothing secret in it."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from azure.storage.queue import QueueClient

from devhost import azurite
from shared.api import health
from shared.api.health import Probe, report
from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.ids import JobId
from shared.execution.worker import CLAIM_FOR
from shared.services import build
from shared.settings import Settings
from shared.storage.table_store import table_storage_from_connection_string
from tests.conftest import Service
from tests.factories import utc
from tests.pipeline import START, Pipeline
from tests.targets import Target
from tests.wrapped_store import Wrapped, wrapping

NOW = utc("2026-12-01T08:00:00Z")


class Reports:
    """A stand-in for `health.check`: counts the rounds of probes, each answered by `gate`."""

    def __init__(self) -> None:
        self.made, self.gate = 0, threading.Event()
        self.gate.set()

    def __call__(self, services: Any) -> tuple[int, dict[str, int]]:
        self.gate.wait(10)
        self.made += 1
        return 200, {"made": self.made}


def test_a_report_is_given_again_for_five_seconds_then_made_anew() -> None:
    at, probes = [1000.0], Reports()
    reports = health.CachedReports(probes, clock=lambda: at[0])  # type: ignore[arg-type]
    never = lambda: pytest.fail("only the probes build services")  # noqa: E731
    assert reports.answer(never) == (200, {"made": 1})
    at[0] += 4.9
    assert reports.answer(never) == (200, {"made": 1})  # no storage read
    at[0] += 0.2
    assert reports.answer(never) == (200, {"made": 2})
    assert health.CACHED_FOR_S == 5.0
    assert isinstance(health.REPORTS, health.CachedReports)  # what the route answers from


def test_callers_at_the_same_moment_share_one_round_of_probes() -> None:
    probes = Reports()
    probes.gate.clear()  # the first round takes a while
    reports = health.CachedReports(probes, clock=lambda: 0.0)  # type: ignore[arg-type]
    answers: list[Any] = []
    callers = [threading.Thread(target=lambda: answers.append(reports.answer(lambda: None)))  # type: ignore[arg-type, return-value]
               for _ in range(8)]  # fmt: skip
    for caller in callers:
        caller.start()
    time.sleep(0.1)  # all of them asking, one of them probing
    probes.gate.set()
    for caller in callers:
        caller.join(10)
    assert (probes.made, answers) == (1, [(200, {"made": 1})] * 8)


def test_the_running_service_is_healthy_and_says_when_it_last_ticked(service: Service) -> None:
    deadline = time.monotonic() + 10
    while True:  # the host ticks every second; its first tick may still be coming
        answer = httpx.get(f"{service.base_url}/health", timeout=10)  # no key
        if answer.json()["timer"]["lastTick"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "healthy"
    assert body["storage"] == {"tables": "reachable", "queues": "reachable"}
    assert body["queue"]["name"] == "executions" and isinstance(body["queue"]["depth"], int)
    assert 0 <= body["timer"]["secondsSinceLastTick"] < 10
    assert "devstoreaccount1" not in answer.text and "127.0.0.1" not in answer.text


def settings_for_storage_at(port: int) -> Settings:
    storage = (
        f"DefaultEndpointsProtocol=http;AccountName={azurite.ACCOUNT};"
        f"AccountKey={azurite.ACCOUNT_KEY};TableEndpoint=http://127.0.0.1:{port}/x;"
        f"QueueEndpoint=http://127.0.0.1:{port}/x;"
    )
    return Settings(
        storage_connection=storage, lookahead=timedelta(seconds=90), outbound_allowlist="",
        outbound_ca_file=None, authority_host="https://login.invalid",
    )  # fmt: skip


def test_storage_that_refuses_connections_is_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    port = azurite.free_port()  # nobody listens there
    status, body = health.check(lambda: build(settings_for_storage_at(port)))
    assert status == 503 and body["status"] == "unhealthy"
    assert body["storage"]["tables"] == "unreachable (ServiceRequestError)"
    assert str(port) not in json.dumps(body)


def test_storage_that_never_answers_is_a_503_within_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(health, "PROBE_DEADLINE_S", 1.0)
    with socket.socket() as silent:  # accepts connections (the backlog does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        settings = settings_for_storage_at(silent.getsockname()[1])
        started = time.monotonic()
        status, body = health.check(lambda: build(settings))
        assert time.monotonic() - started < 3
    assert status == 503 and body["status"] == "unhealthy"
    assert body["storage"]["tables"] == "unreachable (no answer within 1 s)"


@pytest.mark.parametrize(
    ("last_tick", "depth", "expected"),
    [
        pytest.param(Probe(NOW - timedelta(seconds=30)), Probe(3), (200, "healthy"), id="ticking"),
        pytest.param(Probe(NOW - timedelta(minutes=6)), Probe(0), (200, "degraded"), id="stalled"),
        pytest.param(Probe(None), Probe(0), (200, "degraded"), id="never-ticked"),
        pytest.param(Probe(problem="unreachable (ConnectionError)"), Probe(0), (503, "unhealthy"),
                     id="tables-down"),
        pytest.param(Probe(NOW), Probe(problem="unreachable (ConnectionError)"), (503, "unhealthy"),
                     id="queues-down"),
    ],
)
def test_the_status_follows_what_the_probes_found(
    last_tick: Probe, depth: Probe, expected: tuple[int, str]  # type: ignore[type-arg]
) -> None:
    status, body = report(NOW, last_tick, depth)
    assert (status, body["status"]) == expected
    assert body["queue"]["depth"] == depth.value


@pytest.mark.parametrize(
    ("depth", "late", "reason"),
    [
        pytest.param(Probe(40), Probe(timedelta(minutes=3)),
                     "messages on the execution queue wait 180 s past their time, more than 60 s: "
                     "the executor is behind", id="late"),
        pytest.param(Probe(health.MOST_DEPTH + 1), Probe(timedelta(0)),
                     f"the execution queue holds {health.MOST_DEPTH + 1} messages, more than "
                     f"{health.MOST_DEPTH}", id="deep"),
    ],
)
def test_a_queue_that_outgrows_the_executor_is_degraded_with_the_reason(
    depth: Probe[int], late: Probe[timedelta], reason: str
) -> None:
    status, body = report(NOW, Probe(NOW - timedelta(seconds=30)), depth, late)
    assert (status, body["status"], body["reasons"]) == (200, "degraded", [reason])
    assert body["queue"]["depth"] == depth.value


def test_messages_waiting_past_their_time_make_the_service_degraded(storage: str) -> None:
    pipeline = Pipeline(storage)
    pipeline.jump(timedelta(seconds=1))  # the timer has ticked
    status, body = health.check(lambda: pipeline.services)
    assert (status, body["status"], body["queue"]["secondsLate"]) == (200, "healthy", 0)
    # Attempts the executor has not taken, due five minutes ago (it is behind, or something
    # keeps filling the queue).
    now, due = pipeline.clock(), pipeline.clock() - timedelta(minutes=5)
    job = JobId(pipeline.collection, "waiting")
    pipeline.dispatcher.dispatch([Delivery(job, due, Pending(Attempt(due), due))], now)
    status, body = health.check(lambda: pipeline.services)
    assert (status, body["status"], body["queue"]["secondsLate"]) == (200, "degraded", 300)
    assert body["reasons"] == [
        "messages on the execution queue wait 300 s past their time, more than 60 s: the executor is behind"
    ]
    assert "waiting" not in json.dumps(body)  # no job named


@pytest.mark.services  # an Azurite of its own
def test_poison_messages_and_claims_past_their_deadline_are_shown_for_an_operator_to_look_at(
    target: Target,
) -> None:
    class DyingExecutor(Wrapped):
        """Every outcome write is lost, as if the host died between call and record."""

        def settle_job(self, stored: Any, document: Any, history: list[Any]) -> Any:
            if history:
                raise ConnectionError("the host died")
            return self.inner.settle_job(stored, document, history)

    emulator = azurite.start()  # its own: claims left behind by other tests must not count
    try:
        storage = emulator.connection_string
        real = table_storage_from_connection_string(storage)
        pipeline = Pipeline(storage, store=wrapping(real, executor=DyingExecutor))
        target.answer("/dies")
        action = {"type": "Http", "request": {"uri": target.url("/dies"), "method": "POST"}}
        pipeline.put_job("dies", {"startTime": START.isoformat(), "action": action})
        received: list[str] = []
        pipeline.advance(timedelta(minutes=1), on_message=lambda text, count: received.append(text))
        with contextlib.suppress(ConnectionError):
            pipeline.handle(received[0], 1)  # claimed and called; its outcome never written
        status, body = health.check(lambda: pipeline.services)
        assert (status, body["status"], body["claimsPastDeadline"], body["poison"]["depth"]) == (200, "healthy", 0, 0)

        pipeline.clock.at += CLAIM_FOR + health.CLAIM_OVERDUE + timedelta(seconds=1)
        pipeline.jump(timedelta(0))  # the timer ticks: only the claim and the poison are wrong
        poison = QueueClient.from_connection_string(storage, f"{pipeline.queue.queue_name}-poison")
        poison.create_queue()
        poison.send_message("a message that failed its last delivery")
        status, body = health.check(lambda: pipeline.services)
        assert (status, body["status"], body["claimsPastDeadline"], body["poison"]["depth"]) == (200, "degraded", 1, 1)
        assert body["reasons"] == [
            "1 messages failed their last delivery and wait on executions-poison: their attempts "
            "were recorded as failed; look at why",
            "1 tries are claimed by a delivery whose deadline passed more than 60 s ago, and no "
            "delivery took them over: their messages may be lost",
        ]
        assert "dies" not in json.dumps(body)  # no job named
    finally:
        emulator.stop()
