"""What needs an operator's look (docs/console.md#needs-a-look): poison messages read as the
executor reads them, never a crash and never their text when unreadable; claims past their
deadline with their try; both capped. From records and a fixed `now`: no storage, no browser."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import azure.functions as func
import pytest
from azure.storage.queue import QueueClient

from devhost import azurite
from shared.api.arm import serve
from shared.console.attention import MOST_LISTED, claim_list, poison_list, poison_view
from shared.console.routes import ROUTES as CONSOLE_ROUTES
from shared.domain.attempts import Attempt, Claim, Delivery, Pending
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ActionName
from shared.domain.job_document import JobDocument
from shared.domain.wire import iso
from shared.execution.dispatch import Dispatcher, PoisonMessage
from shared.execution.messages import Deliveries, DueRange, to_wire
from shared.storage.interface import Stored, StoredJob
from shared.storage.job_codec import decode_properties
from tests.factories import utc
from tests.pipeline import START, Pipeline

NOW = utc("2026-12-01T08:00:00Z")
MOVED = utc("2026-12-01T07:58:30Z")
COLLECTION = CollectionId("sub", "ops", "nightly")
DUE = utc("2026-12-01T07:55:00Z")


def delivery(name: str, attempt: Attempt | None = None) -> Delivery:
    attempt = attempt or Attempt(DUE)
    return Delivery(JobId(COLLECTION, name), DUE, Pending(attempt, DUE), sent_at=DUE)


def poisoned(text: str) -> PoisonMessage:
    return PoisonMessage(text, MOVED, 0)


LINK = {"subscription": "sub", "resourceGroup": "ops", "collection": "nightly"}


def test_a_poison_message_names_its_job_its_occurrence_and_its_try() -> None:
    retried = Attempt(DUE, ActionName.ERROR_ACTION, retry=2)
    view = poison_view(poisoned(to_wire(Deliveries((delivery("cleanup", retried),)))))
    assert view == {
        "kind": "deliveries",
        "inserted": "2026-12-01T07:58:30Z",
        "dequeueCount": 0,
        "deliveries": [{
            "job": LINK | {"job": "cleanup"},
            "attempt": {"expected": "2026-12-01T07:55:00Z", "action": "errorAction", "retry": 2,
                        "runNow": False},
            "due": "2026-12-01T07:55:00Z",
        }],
        "moreDeliveries": 0,
        "dueRange": None,
    }  # fmt: skip


def test_a_message_of_several_deliveries_lists_each_job() -> None:
    carried = Deliveries(tuple(delivery(f"job-{n}") for n in range(3)))
    view = poison_view(poisoned(to_wire(carried)))
    assert [shown["job"]["job"] for shown in view["deliveries"]] == ["job-0", "job-1", "job-2"]


def test_a_range_of_the_due_index_is_said_to_be_one() -> None:
    view = poison_view(poisoned(to_wire(DueRange("20261201T0755-3", "0755", "0800"))))
    assert (view["kind"], view["dueRange"], view["deliveries"]) == (
        "dueRange", {"partition": "20261201T0755-3", "low": "0755", "high": "0800"}, [])  # fmt: skip


def wire_of(one: Delivery) -> dict[str, Any]:
    return to_wire_json(Deliveries((one,)))


def to_wire_json(message: Deliveries) -> dict[str, Any]:
    return json.loads(to_wire(message))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a message that failed its last delivery https://secret.example/?sig=k3y",
                     id="not-json"),
        pytest.param("[1, 2]", id="not-an-object"),
        pytest.param('{"deliveries": []}', id="no-deliveries"),
        pytest.param(json.dumps(wire_of(delivery("x")) | {"job": {"subscription": 7,
                     "resourceGroup": "g", "collection": "c", "job": "j"}}), id="name-not-a-string"),
        pytest.param(json.dumps(wire_of(delivery("x")) | {"attempt": {"expected": "yesterday"}}),
                     id="bad-time"),
        pytest.param(json.dumps({"job": None}), id="job-null"),
        pytest.param(json.dumps({"dueRange": {"partition": 1}}), id="bad-range"),
    ],
)  # fmt: skip
def test_a_malformed_message_is_listed_as_unreadable_without_its_text(text: str) -> None:
    view = poison_view(PoisonMessage(text, None, 3))
    assert view == {"kind": "unreadable", "inserted": None, "dequeueCount": 3, "deliveries": [],
                    "moreDeliveries": 0, "dueRange": None}  # fmt: skip
    assert "secret" not in json.dumps(view)


def test_the_list_is_capped_and_says_that_more_wait() -> None:
    peeked = [poisoned(to_wire(Deliveries((delivery(f"job-{n}"),)))) for n in range(40)]
    listed = poison_list("executions-poison", 120, peeked)
    assert len(listed["messages"]) == MOST_LISTED == 32
    assert (listed["depth"], listed["more"]) == (120, True)
    everything = poison_list("executions-poison", 2, peeked[:2])
    assert (len(everything["messages"]), everything["more"]) == (2, False)
    # The queue's count is approximate, and may lag behind what a peek saw.
    assert poison_list("executions-poison", 0, peeked[:3])["depth"] == 3


def test_many_deliveries_in_one_message_are_capped_too() -> None:
    carried = Deliveries(tuple(delivery(f"job-{n}") for n in range(70)))
    view = poison_view(poisoned(to_wire(carried)))
    assert (len(view["deliveries"]), view["moreDeliveries"]) == (64, 6)


def job_with_claims(name: str, *untils: datetime) -> StoredJob:
    document = JobDocument.defined(decode_properties(
        {"action": {"type": "Http", "request": {"uri": "https://target.example/x?sig=s3cr3t",
                                                "method": "POST"}},
         "state": "enabled"}), DUE - timedelta(days=1))  # fmt: skip
    pending = tuple(
        Pending(Attempt(until - timedelta(seconds=80), retry=n), until - timedelta(seconds=80),
                claim=Claim(f"holder-{n}", until))
        for n, until in enumerate(untils)
    )  # fmt: skip
    return StoredJob(JobId(COLLECTION, name), replace(document, pending=pending), "etag")


def test_claims_past_their_deadline_name_the_job_the_try_and_how_overdue_they_are() -> None:
    before = NOW - timedelta(minutes=1)
    jobs = [
        job_with_claims("stuck", NOW - timedelta(minutes=5)),
        job_with_claims("older", NOW - timedelta(hours=2), NOW + timedelta(seconds=30)),
    ]
    listed = claim_list(jobs, before, NOW)
    assert listed == {
        "overdueAfterSeconds": 60,
        "claims": [
            {"job": LINK | {"job": "older"}, "deadline": "2026-12-01T06:00:00Z", "secondsOverdue": 7200,
             "attempt": {"expected": "2026-12-01T05:58:40Z", "action": "action", "retry": 0, "runNow": False}},
            {"job": LINK | {"job": "stuck"}, "deadline": "2026-12-01T07:55:00Z", "secondsOverdue": 300,
             "attempt": {"expected": "2026-12-01T07:53:40Z", "action": "action", "retry": 0, "runNow": False}},
        ],
        "more": False,
    }  # fmt: skip
    assert "s3cr3t" not in json.dumps(listed) and "target.example" not in json.dumps(listed)


def test_a_claim_within_its_minute_of_grace_is_not_listed() -> None:
    listed = claim_list([job_with_claims("slow", NOW - timedelta(seconds=30))], NOW - timedelta(minutes=1), NOW)
    assert listed["claims"] == []


def test_claims_are_capped_and_say_that_there_are_more() -> None:
    jobs = [job_with_claims(f"job-{n}", NOW - timedelta(minutes=2 + n)) for n in range(MOST_LISTED + 1)]
    listed = claim_list(jobs, NOW - timedelta(minutes=1), NOW)
    assert (len(listed["claims"]), listed["more"]) == (MOST_LISTED, True)
    assert listed["claims"][0]["job"]["job"] == f"job-{MOST_LISTED}"  # the most overdue first


@dataclass
class Peeked:
    content: str
    inserted_on: datetime | None
    dequeue_count: int | None


class PoisonQueue:
    """The calls of a QueueClient that a peek makes."""

    def __init__(self, *contents: str) -> None:
        self.contents = list(contents)
        self.asked: list[int] = []

    def peek_messages(self, max_messages: int) -> list[Peeked]:
        self.asked.append(max_messages)
        return [Peeked(content, MOVED, None) for content in self.contents[:max_messages]]


def test_a_peek_of_the_poison_queue_undoes_the_hosts_base64_and_keeps_plain_text() -> None:
    text = to_wire(Deliveries((delivery("cleanup"),)))
    queue = PoisonQueue(base64.b64encode(text.encode()).decode(), "plain words", "{not base64}")
    dispatcher = Dispatcher(None, None, timedelta(minutes=3), poison=queue)  # type: ignore[arg-type]
    assert dispatcher.peek_poison() == [
        PoisonMessage(text, MOVED, 0), PoisonMessage("plain words", MOVED, 0),
        PoisonMessage("{not base64}", MOVED, 0),
    ]  # fmt: skip
    assert queue.asked == [32]  # the queue service's limit per peek
    assert dispatcher.peek_poison(2) == dispatcher.peek_poison()[:2]
    assert Dispatcher(None, None, timedelta(0)).peek_poison() == []  # type: ignore[arg-type]


def console_read(name: str, services: Any) -> dict[str, Any]:
    """A console route's JSON, served as the function app serves it (no key: the host checks
    it before the app)."""
    [route] = [route for route in CONSOLE_ROUTES if route.name == name]
    request = func.HttpRequest("GET", f"http://127.0.0.1/{route.template}", body=b"")
    answer = serve(request, route.operation, lambda: services, versioned=False)
    assert answer.status_code == 200, answer.get_body()
    return json.loads(answer.get_body())  # type: ignore[no-any-return]


@pytest.mark.services  # an Azurite of its own: claims left by other tests must not be listed
def test_the_console_lists_a_poison_message_and_a_claim_past_its_deadline() -> None:
    emulator = azurite.start()
    try:
        storage = emulator.connection_string
        pipeline = Pipeline(storage)
        action = {"type": "Http", "request": {"uri": "http://127.0.0.1:9/x?sig=s3cr3t", "method": "POST"}}
        job = pipeline.put_job("stuck", {"startTime": START.isoformat(), "action": action})
        overview = console_read("console_collections", pipeline.services)["attention"]
        assert overview == {"poisonMessages": 0, "claimsPastDeadline": 0, "claimsCountedUpTo": 100}
        assert console_read("console_attention", pipeline.services) == {
            "poison": {"queue": "executions-poison", "depth": 0, "messages": [], "more": False},
            "claimsPastDeadline": {"overdueAfterSeconds": 60, "claims": [], "more": False},
        }

        # The delivery calling the job's first try died three minutes ago, and its message too.
        stored = pipeline.job(job)
        [entry] = stored.document.pending
        deadline = pipeline.clock() - timedelta(minutes=3)
        claimed = stored.document.claimed(entry.attempt, Claim("dead-holder", deadline))
        pipeline.store.executor.replace_jobs([Stored(job, claimed, stored.etag)])
        # Two messages the host gave up on, as it moves them: the app's in base64, as it read it.
        poison = QueueClient.from_connection_string(storage, f"{pipeline.queue.queue_name}-poison")
        poison.create_queue()
        given_up = Delivery(job, stored.document.defined_at, entry, sent_at=pipeline.clock())
        poison.send_message(base64.b64encode(to_wire(Deliveries((given_up,))).encode()).decode())
        poison.send_message("not the app's: https://elsewhere.example/?sig=other")

        overview = console_read("console_collections", pipeline.services)["attention"]
        assert overview == {"poisonMessages": 2, "claimsPastDeadline": 1, "claimsCountedUpTo": 100}
        listed = console_read("console_attention", pipeline.services)
        names = {"subscription": "sub-pipeline", "resourceGroup": "group",
                 "collection": pipeline.collection.name, "job": "stuck"}  # fmt: skip
        tried = {"expected": iso(entry.attempt.expected), "action": "action", "retry": 0, "runNow": False}
        [readable, unreadable] = listed["poison"]["messages"]
        assert (readable["kind"], readable["deliveries"], readable["dequeueCount"]) == (
            "deliveries", [{"job": names, "attempt": tried, "due": iso(entry.due)}], 0)  # fmt: skip
        assert readable["inserted"] is not None
        assert unreadable["kind"] == "unreadable"
        assert listed["claimsPastDeadline"]["claims"] == [
            {"job": names, "attempt": tried, "deadline": iso(deadline), "secondsOverdue": 180}
        ]
        assert "sig" not in json.dumps(listed) and "127.0.0.1" not in json.dumps(listed)
    finally:
        emulator.stop()
