"""The execution queue's messages (docs/glossary.md#queue-message): both kinds read back as
they were sent, anything else refused, every message sent to live for ever, and the one rule
for how long an early attempt waits."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.ids import CollectionId, JobId
from shared.execution.dispatch import together
from shared.execution.messages import (
    Deliveries,
    DueRange,
    MalformedMessage,
    from_wire,
    received,
    send,
    to_wire,
)
from shared.execution.worker import MOST_EARLY, time_to_wait
from tests.pipeline import Pipeline

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
JOB = JobId(CollectionId("sub", "group", "jc"), "job")
ONE = Deliveries((Delivery(JOB, T0, Pending(Attempt(T0), T0), sent_at=T0),))
RANGE = DueRange("20261127T0900-3", "0900", "0905")
TRACE_CONTEXT = (
    ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    ("tracestate", "congo=t61rcWkgMzE"),
)
TRACED = Deliveries((replace(ONE.carried[0], trace_context=TRACE_CONTEXT),))


@pytest.mark.parametrize(
    "message", [ONE, TRACED, RANGE], ids=["deliveries", "with-trace-context", "range"]
)
def test_each_kind_reads_back_as_it_was_sent(message: Deliveries | DueRange) -> None:
    assert from_wire(to_wire(message)) == message


def test_a_trace_context_that_is_not_text_is_left_out_and_the_delivery_still_reads() -> None:
    text = to_wire(ONE).replace('"attempt":', '"traceparent":7,"tracestate":null,"attempt":')
    assert '"traceparent":7' in text
    assert from_wire(text) == ONE
    assert "trace" not in to_wire(ONE)  # without one, nothing is written


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '"text"', "{}", '{"dueRange": {"partition": "p", "low": "", "high": "h"}}',
     '{"dueRange": "p"}', '{"deliveries": []}', '{"job": {}}'],
    ids=["not-json", "a-list", "a-string", "empty", "range-without-low", "range-not-an-object",
         "no-deliveries", "delivery-without-fields"],
)  # fmt: skip
def test_anything_else_is_refused_and_dropped_with_a_log_line(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(MalformedMessage):
        from_wire(text)
    assert received(text) is None
    assert "dropped a malformed execution message" in caplog.text


def test_every_message_lives_for_ever_on_the_queue(pipeline: Pipeline) -> None:
    """One that waits out a long backlog must still run: a range message as much as deliveries."""
    for message in (ONE, RANGE):
        send(pipeline.queue, message, visible_in=timedelta(0))
    peeked = pipeline.queue.peek_messages(max_messages=32)
    assert [from_wire(base64.b64decode(m.content).decode()) for m in peeked] == [ONE, RANGE]
    assert [m.expires_on.year for m in peeked] == [9999, 9999]  # the queue's "never"


@pytest.mark.parametrize(
    ("early", "wait"),
    [(timedelta(seconds=-3), timedelta(0)), (timedelta(0), timedelta(0)),
     (timedelta(seconds=1.5), timedelta(seconds=1.5)), (MOST_EARLY, MOST_EARLY),
     (MOST_EARLY + timedelta(milliseconds=1), None)],
    ids=["late", "on-time", "early", "as-early-as-waited-for", "too-early"],
)  # fmt: skip
def test_an_attempt_waits_until_it_is_due_unless_it_came_too_early(
    early: timedelta, wait: timedelta | None
) -> None:
    assert time_to_wait(T0 + early, T0) == wait


def test_deliveries_of_one_second_are_cut_into_messages_that_each_fit_the_queues_64_kib() -> None:
    """64 deliveries with the longest names the API allows, each carrying the try that began and
    a trace context, are too big for one message (74 KiB in base64): they are cut in even parts,
    each within the queue's bound once the hand-off adds its trace context."""
    longest = CollectionId("s" * 64, "g" * 90, "c" * 100)
    began = Attempt(T0, retry=3)
    deliveries = [
        Delivery(JobId(longest, f"{index:03}" + "j" * 97), T0, Pending(Attempt(T0), T0, began))
        for index in range(64)
    ]
    groups = together(deliveries, lambda delivery: delivery)
    traced = [
        Deliveries(tuple(replace(d, sent_at=T0, trace_context=TRACE_CONTEXT[:1]) for d in group))
        for group in groups
    ]
    sizes = [len(base64.b64encode(to_wire(message).encode())) for message in traced]
    assert len(groups) == 2 and [len(group) for group in groups] == [32, 32]
    assert max(sizes) <= 65536 < sum(sizes)
    assert [d for group in groups for d in group] == deliveries  # none lost, none twice


def test_short_deliveries_of_one_second_still_share_one_message_up_to_64() -> None:
    deliveries = [
        Delivery(JobId(JOB.collection, f"j{index}"), T0, Pending(Attempt(T0), T0))
        for index in range(80)
    ]
    assert [len(group) for group in together(deliveries, lambda delivery: delivery)] == [40, 40]
    assert [len(group) for group in together(deliveries[:64], lambda delivery: delivery)] == [64]
