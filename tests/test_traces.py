"""The trace of an execution (shared/telemetry.py), from its hand-off to the queue to the target's
answer: the spans read back through OpenTelemetry's in-memory exporter, with jobs run on real
Azurite and a real HTTP target (tests/pipeline.py); the trace context each message carries."""

# The recording fixture is test_telemetry.py's, imported: the tests' parameters name it.
# ruff: noqa: F811

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from shared import telemetry
from shared.telemetry import OFF, Telemetry
from tests.conftest import ROOT
from tests.pipeline import START, Pipeline
from tests.targets import Target
from tests.test_telemetry import MINUTE, Recorded, http_job, recorded  # noqa: F401 (fixture)


def test_an_execution_is_one_trace_from_the_timers_hand_off_to_the_targets_answer(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    target.answer("/traced", 500)
    action = http_job(target, "/traced")["action"] | {"retryPolicy": {"retryType": "None"}}
    job = pipeline.put_job("traced", http_job(target, "/traced") | {"action": action})
    pipeline.advance(MINUTE)
    [call] = target.received("/traced")
    [handed] = recorded.finished("hand off")
    [execution] = recorded.finished("execution")
    [called] = recorded.finished("call target")
    # One trace: the hand-off starts it, the execution continues it from the queue message, and
    # the call is the execution's child.
    assert handed.kind is SpanKind.PRODUCER and handed.parent is None
    assert execution.kind is SpanKind.CONSUMER
    assert execution.parent is not None and execution.parent.is_remote
    assert execution.parent.span_id == handed.context.span_id
    assert called.parent is not None and called.parent.span_id == execution.context.span_id
    assert handed.context.trace_id == execution.context.trace_id == called.context.trace_id
    assert handed.end_time is not None and execution.start_time is not None
    assert called.start_time is not None and called.end_time is not None
    assert execution.end_time is not None
    assert handed.end_time <= execution.start_time <= called.start_time
    assert called.end_time <= execution.end_time
    attributes = dict(execution.attributes or {})
    execution_id = call.headers["x-ms-scheduler-execution-id"]
    assert attributes["scheduler.execution_id"] == execution_id
    assert dict(handed.attributes or {})["scheduler.execution_id"] == execution_id
    assert attributes["collection"] == job.collection.name and attributes["job"] == "traced"
    assert attributes["scheduler.outcome"] == "faulted"
    assert attributes["scheduler.retry"] == 0 and attributes["scheduler.action"] == "MainAction"
    assert (
        attributes["scheduler.due"]
        == attributes["scheduler.expected"]
        == START.isoformat().replace("+00:00", "Z")
    )
    assert float(attributes["scheduler.lateness_ms"]) >= 0  # type: ignore[arg-type]
    assert execution.status.status_code is StatusCode.ERROR


def test_a_retry_continues_the_trace_of_its_first_try(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    target.answer("/flaky", 503)
    retried = {"retryPolicy": {"retryType": "Fixed", "retryInterval": "PT20S", "retryCount": 1}}
    action = http_job(target, "/flaky")["action"] | retried
    pipeline.put_job("flaky", http_job(target, "/flaky") | {"action": action})
    pipeline.advance(2 * MINUTE)
    first_call, retry_call = target.received("/flaky")
    first_hand_off, retry_hand_off = sorted(recorded.finished("hand off"), key=started)
    first, retry = sorted(recorded.finished("execution"), key=started)
    assert dict(retry.attributes or {})["scheduler.retry"] == 1
    # The retry waited in the due index between the two (a horizon of zero): its row kept the
    # first try's trace context, and the timer's hand-off continued it.
    assert first_hand_off.parent is None
    assert retry_hand_off.parent is not None
    assert retry_hand_off.parent.span_id == first.context.span_id
    assert retry.parent is not None and retry.parent.span_id == retry_hand_off.context.span_id
    assert len({span.context.trace_id for span in recorded.spans.get_finished_spans()}) == 1
    # Both tries of the occurrence have its one execution id.
    execution_id = first_call.headers["x-ms-scheduler-execution-id"]
    assert retry_call.headers["x-ms-scheduler-execution-id"] == execution_id
    assert {
        dict(span.attributes or {})["scheduler.execution_id"]
        for span in (first_hand_off, retry_hand_off, first, retry)
    } == {execution_id}


def test_each_occurrence_and_each_run_now_is_a_trace_of_its_own(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    target.answer("/often", 200)
    job = pipeline.put_job(
        "often", http_job(target, "/often", recurrence={"frequency": "Minute", "interval": 1})
    )
    pipeline.advance(timedelta(minutes=2, seconds=30))  # START and a minute later
    pipeline.services.scheduling.run_now(job, pipeline.clock())
    pipeline.drain()
    assert len(target.received("/often")) == 3  # two occurrences, then the run-now
    executions = sorted(recorded.finished("execution"), key=started)
    hand_offs = {span.context.span_id: span for span in recorded.finished("hand off")}
    traces = set()
    for execution in executions:
        assert execution.parent is not None
        handed = hand_offs[execution.parent.span_id]
        assert handed.parent is None  # each begins at its own hand-off
        assert handed.context.trace_id == execution.context.trace_id
        traces.add(execution.context.trace_id)
    assert len(traces) == 3
    assert [dict(span.attributes or {})["scheduler.run_now"] for span in executions] == [
        False,
        False,
        True,
    ]


def test_deliveries_sharing_a_message_each_carry_a_trace_of_their_own(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    target.answer("/together", 200)
    for name in ("first", "second", "third"):
        pipeline.put_job(name, http_job(target, "/together"))
    texts: list[str] = []

    def handle(text: str, dequeue_count: int) -> None:
        texts.append(text)
        pipeline.handle(text, dequeue_count)

    pipeline.advance(MINUTE, on_message=handle)
    [text] = texts  # due in the same second: one message
    carried = [delivery["traceparent"] for delivery in json.loads(text)["deliveries"]]
    assert len(set(carried)) == 3
    by_job = {dict(span.attributes or {})["job"]: span for span in recorded.finished("execution")}
    for name, execution in by_job.items():
        [handed] = [
            span
            for span in recorded.finished("hand off")
            if dict(span.attributes or {})["job"] == name
        ]
        assert execution.parent is not None
        assert execution.parent.span_id == handed.context.span_id
    assert len({span.context.trace_id for span in by_job.values()}) == 3


def test_a_delivery_sent_again_adds_a_hand_off_to_its_trace(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    """A message that came too early to wait for goes back on the queue, in the same trace."""
    target.answer("/early", 200)
    pipeline.put_job("early", http_job(target, "/early"))
    taken: list[str] = []
    pipeline.advance(MINUTE, on_message=lambda text, dequeue_count: taken.append(text))
    pipeline.clock.at -= MINUTE  # as if it had come a minute before its time
    pipeline.handle(taken[0], 1)
    assert not target.received("/early") and not recorded.finished("execution")
    first, again = sorted(recorded.finished("hand off"), key=started)
    assert first.parent is None
    assert again.parent is not None and again.parent.span_id == first.context.span_id
    assert again.context.trace_id == first.context.trace_id


def test_a_message_without_a_trace_context_still_runs_in_a_trace_of_its_own(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    """As a message sent before trace contexts existed, or by a process without telemetry."""
    target.answer("/untraced", 200)
    job = pipeline.put_job("untraced", http_job(target, "/untraced"))
    stripped: list[dict[str, Any]] = []

    def handle_as_before(text: str, dequeue_count: int) -> None:
        wire = json.loads(text)
        assert wire.pop("traceparent").startswith("00-")  # what this test takes away
        stripped.append(wire)
        pipeline.handle(json.dumps(wire), dequeue_count)

    pipeline.advance(MINUTE, on_message=handle_as_before)
    assert len(stripped) == 1 and len(target.received("/untraced")) == 1
    assert [entry["status"] for entry in pipeline.history(job)] == ["Completed"]
    [execution] = recorded.finished("execution")
    assert execution.parent is None
    assert dict(execution.attributes or {})["scheduler.outcome"] == "completed"


def test_only_telemetry_on_adds_a_trace_context_to_the_message(
    storage: str, target: Target
) -> None:
    """Off, a delivery's message is what it was before trace contexts: not a byte more."""
    target.answer("/sized", 200)
    off = first_message_sent(storage, target, OFF)
    on = first_message_sent(storage, target, Recorded().telemetry)
    assert len(target.received("/sized")) == 2
    assert set(off) == {"sentAt", "job", "definedAt", "attempt"}
    assert set(on) == set(off) | {"traceparent"}
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}", on["traceparent"])


def first_message_sent(storage: str, target: Target, hooks: Telemetry) -> dict[str, Any]:
    """The message of a one-off job's first delivery, with `hooks` as the process's telemetry."""
    replaced = telemetry.install(hooks)
    texts: list[str] = []
    try:
        pipeline = Pipeline(storage)
        pipeline.put_job("sized", http_job(target, "/sized"))

        def handle(text: str, dequeue_count: int) -> None:
            texts.append(text)
            pipeline.handle(text, dequeue_count)

        pipeline.advance(MINUTE, on_message=handle)
    finally:
        telemetry.install(replaced)
    message: dict[str, Any] = json.loads(texts[0])
    return message


def test_the_query_that_follows_one_slow_run_asks_for_what_its_spans_carry(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    """docs/deployment.md's query, checked against the spans of a real execution: a renamed
    attribute would make it find nothing."""
    target.answer("/followed", 200)
    pipeline.put_job("followed", http_job(target, "/followed"))
    pipeline.advance(MINUTE)
    spans = recorded.spans.get_finished_spans()
    recorded_names = {key for span in spans for key in (span.attributes or {})}
    deployment = (ROOT / "docs" / "deployment.md").read_text()
    traces = deployment.split("## Metrics and alerts")[1].split("### The alerts")[0]
    [query] = re.findall(
        r"```kusto\n(.*?)```", traces.split("### Following one slow run")[1], re.DOTALL
    )
    asked = set(re.findall(r'customDimensions\["([\w.]+)"\]', query))
    assert {"scheduler.execution_id", "scheduler.expected", "job"} <= asked
    assert asked <= recorded_names
    assert {span.name for span in spans} == {"hand off", "execution", "call target"}
    for name in ("hand off", "execution", "call target"):  # each span is described
        assert f"`{name}`" in traces


def started(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time
