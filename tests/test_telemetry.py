"""Metrics and traces (shared/telemetry.py): what the executor, the timer and the API record, read
back through OpenTelemetry's in-memory reader and span exporter, with jobs run on real Azurite
and a real HTTP target (tests/pipeline.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from importlib.metadata import entry_points
from typing import Any

import azure.functions as func
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from shared import telemetry
from shared.api.arm import serve
from shared.domain.decisions import MOST_ALONGSIDE
from shared.settings import SettingError, Settings
from shared.telemetry import _UNTRACED_LIBRARIES, OFF, Telemetry, _entra_client_id
from tests.conftest import ROOT
from tests.pipeline import START, Pipeline
from tests.targets import HeldAnswer, Target, token_endpoint

MINUTE = timedelta(minutes=1)
SECRET = "s3cr3t-sig"


class Recorded:
    """The process's telemetry, recorded in memory for one test."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.telemetry = Telemetry(MeterProvider([self.reader]), tracer_provider)

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found += list(metric.data.data_points)
        return found

    def counts(self, name: str, *keys: str) -> dict[tuple[Any, ...], int]:
        """A counter's totals by the attributes named."""
        return {
            tuple(point.attributes.get(key) for key in keys): point.value
            for point in self.points(name)
        }

    def finished(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    """Installed before the pipeline is built (it tells the telemetry how to read its queues)."""
    recording = Recorded()
    replaced = telemetry.install(recording.telemetry)
    yield recording
    telemetry.install(replaced)


def http_job(target: Target, path: str, **properties: Any) -> dict[str, Any]:
    request = {"uri": target.url(path) + f"?sig={SECRET}", "method": "POST", "body": SECRET,
               "headers": {"x-api-key": SECRET}}  # fmt: skip
    return {
        "startTime": START.isoformat(),
        "action": {"type": "Http", "request": request},
    } | properties


def test_a_completed_execution_is_counted_with_its_collection_job_lateness_and_response_time(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    target.answer("/fine", 200)
    job = pipeline.put_job("fine", http_job(target, "/fine"))
    pipeline.advance(MINUTE)
    counts = recorded.counts("scheduler.executions", "outcome", "collection", "job")
    assert counts == {("completed", job.collection.name, "fine"): 1}
    [lateness] = recorded.points("scheduler.lateness")
    assert lateness.count == 1 and lateness.min >= 0
    assert lateness.attributes == {"collection": job.collection.name}
    [responded] = recorded.points("scheduler.target.duration")
    assert responded.count == 1 and responded.attributes["succeeded"] is True
    assert recorded.counts("scheduler.retries") == {}
    assert sum(recorded.counts("scheduler.timer.ticks").values()) >= 1
    assert sum(recorded.counts("scheduler.timer.handed").values()) == 1


def test_failures_retries_and_a_fault_are_counted_by_outcome(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    target.answer("/down", 503)
    retried = {"retryPolicy": {"retryType": "Fixed", "retryInterval": "PT20S", "retryCount": 1}}
    job = pipeline.put_job(
        "down",
        http_job(target, "/down") | {"action": http_job(target, "/down")["action"] | retried},
    )
    pipeline.advance(2 * MINUTE)
    assert len(target.received("/down")) == 2
    # The first try failed and was retried; the retry failed for good and the one-off job faulted.
    assert recorded.counts("scheduler.executions", "outcome", "job") == {
        ("failed", "down"): 1,
        ("faulted", "down"): 1,
    }
    assert recorded.counts("scheduler.retries", "collection", "job") == {
        (job.collection.name, "down"): 1
    }
    assert {
        point.attributes["succeeded"] for point in recorded.points("scheduler.target.duration")
    } == {False}


def test_missed_occurrences_are_counted_as_postponed(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    target.answer("/missed", 200)
    pipeline.put_job(
        "missed", http_job(target, "/missed", recurrence={"frequency": "Minute", "interval": 1})
    )
    pipeline.advance(timedelta(seconds=30))
    pipeline.jump(timedelta(minutes=10, seconds=50))
    assert recorded.counts("scheduler.executions", "outcome") == {
        ("postponed",): 10,
        ("completed",): 1,
    }


def test_an_occurrence_due_while_too_many_of_its_job_run_is_counted_as_skipped(
    recorded: Recorded, pipeline: Pipeline, target: Target
) -> None:
    """overlapPolicy Allow: the occurrence due while MOST_ALONGSIDE are still at the target."""
    held = HeldAnswer(hold_s=30)
    target.respond("/busy", held)
    every_minute = {"frequency": "Minute", "interval": 1}
    pipeline.put_job(
        "busy", http_job(target, "/busy", recurrence=every_minute) | {"overlapPolicy": "Allow"}
    )
    running: list[Future[None]] = []
    with ThreadPoolExecutor(MOST_ALONGSIDE + 2) as side_by_side:  # as the host runs messages

        def handle(text: str, dequeue_count: int) -> None:
            running.append(side_by_side.submit(pipeline.handle, text, dequeue_count))

        try:
            for minute in range(MOST_ALONGSIDE):
                pipeline.advance(MINUTE, on_message=handle)
                target.wait_for("/busy", minute + 1)
            pipeline.advance(MINUTE, on_message=handle)
            running[-1].result(timeout=30)  # skipped at once, while the others are held
            assert held.holding == MOST_ALONGSIDE
        finally:
            held.release()
            for handled in running:
                handled.result(timeout=30)
    assert recorded.counts("scheduler.executions", "outcome") == {
        ("completed",): MOST_ALONGSIDE,
        ("skipped",): 1,
    }


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


def test_no_attribute_of_any_span_or_metric_carries_a_secret_or_a_url(
    recorded: Recorded, storage: str, target: Target
) -> None:
    """Secrets in a query string (a SAS), a header, a body, a Basic password (the Authorization
    header) and an OAuth client secret and token; nor in the trace context the messages carry."""
    pipeline = Pipeline(storage, authority=target.url(""))
    target.answer("/secretive", 200, SECRET.encode())
    basic = {"type": "Basic", "username": "scheduler", "password": SECRET}
    action = http_job(target, "/secretive")["action"]
    action["request"]["authentication"] = basic
    pipeline.put_job("secretive", http_job(target, "/secretive") | {"action": action})
    path, token_endpoint_answers = token_endpoint("contoso", "app-id", SECRET, f"{SECRET}-token")
    target.respond(path, token_endpoint_answers)
    target.answer("/signed-in", 500, SECRET.encode())
    oauth = {"type": "ActiveDirectoryOAuth", "tenant": "contoso", "clientId": "app-id",
             "secret": SECRET, "audience": "https://management.core.windows.net/"}  # fmt: skip
    action = http_job(target, "/signed-in")["action"] | {"retryPolicy": {"retryType": "None"}}
    action["request"]["authentication"] = oauth
    pipeline.put_job("signed-in", http_job(target, "/signed-in") | {"action": action})
    texts: list[str] = []

    def handle(text: str, dequeue_count: int) -> None:
        texts.append(text)
        pipeline.handle(text, dequeue_count)

    pipeline.advance(MINUTE, on_message=handle)
    assert target.received("/secretive")
    [signed_in] = target.received("/signed-in")
    assert signed_in.headers["authorization"].startswith(f"Bearer {SECRET}-token")
    spans = recorded.spans.get_finished_spans()
    assert {span.name for span in spans} == {"hand off", "execution", "call target"}
    values = [value for span in spans for value in (span.attributes or {}).values()]
    values += [span.status.description for span in spans]
    values += texts
    data = recorded.reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                values += [
                    value
                    for point in metric.data.data_points
                    for value in point.attributes.values()
                ]
    assert len(values) > 10  # so that the check below looks at something
    text = " ".join(str(value) for value in values)
    assert SECRET not in text
    assert "http://" not in text and "127.0.0.1" not in text


def test_the_distro_traces_none_of_the_libraries_it_would_by_default() -> None:
    """Their spans carry full URLs (a SAS in a query string), and the HTTP clients' would send
    the trace context to every target: each installed instrumentation the distro turns on by
    default is turned off, so only the app's own spans are recorded."""
    from azure.monitor.opentelemetry._constants import (  # noqa: PLC0415 (where the list is)
        _ALL_SUPPORTED_INSTRUMENTED_LIBRARIES,
    )

    installed = {point.name for point in entry_points(group="opentelemetry_instrumentor")}
    traced_by_default = installed & set(_ALL_SUPPORTED_INSTRUMENTED_LIBRARIES)
    assert {"httpx", "requests", "urllib3"} <= traced_by_default  # so that this checks something
    assert traced_by_default <= set(_UNTRACED_LIBRARIES)


def test_the_queues_depths_are_observed_when_the_metrics_are_read(
    recorded: Recorded, pipeline: Pipeline
) -> None:
    [depth] = recorded.points("scheduler.queue.depth")
    [poison] = recorded.points("scheduler.queue.poison")
    assert (depth.value, poison.value) == (0, 0)


def test_api_requests_are_counted_by_operation_and_status_never_by_path(recorded: Recorded) -> None:
    def get_job(request: Any, services: Any) -> Any:
        raise AssertionError("not reached: the api-version is missing")

    request = func.HttpRequest(
        "GET", "http://localhost/subscriptions/s/jobs/j", body=b"", params={}
    )
    assert serve(request, get_job, lambda: None).status_code == 400  # type: ignore[arg-type, return-value]
    assert recorded.counts("scheduler.api.requests", "route", "status") == {("get_job", 400): 1}


def test_without_a_destination_telemetry_is_off_and_records_nothing() -> None:
    settings = Settings.from_environment({"AzureWebJobsStorage": "UseDevelopmentStorage=true"})
    assert telemetry.configure(settings) is OFF and not OFF.on
    with OFF.execution(None), OFF.step("call target"):  # type: ignore[arg-type]
        OFF.ticked(3)  # returns at once: nothing to record into


def test_an_unknown_local_exporter_is_refused_with_the_settings_name() -> None:
    with pytest.raises(
        SettingError, match="SCHEDULER_TELEMETRY_EXPORTER must be one of console, otlp, memory"
    ):
        Settings.from_environment({"SCHEDULER_TELEMETRY_EXPORTER": "prometheus"})


@pytest.mark.parametrize(
    ("authentication", "client_id"),
    [
        ("ClientId=abc;Authorization=AAD", "abc"),
        ("Authorization=AAD", ""),
        (None, None),
        ("", None),
    ],
    ids=["user-assigned", "system-assigned", "unset", "empty"],
)
def test_entra_ingestion_follows_the_authentication_string(
    authentication: str | None, client_id: str | None
) -> None:
    assert _entra_client_id(authentication) == client_id


@pytest.mark.parametrize("exporter", ["memory"])  # console: prints at exit, past pytest's capture
def test_a_local_exporter_turns_telemetry_on_without_azure(exporter: str) -> None:
    settings = Settings.from_environment({"SCHEDULER_TELEMETRY_EXPORTER": exporter})
    try:
        configured = telemetry.configure(settings)
        assert configured is telemetry.current() and configured.on
        configured.ticked(1)
    finally:
        telemetry.install(OFF)


def test_a_connection_string_the_distro_refuses_leaves_the_service_running_without_metrics(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings.from_environment(
        {"APPLICATIONINSIGHTS_CONNECTION_STRING": "not a connection string"}
    )
    assert telemetry.configure(settings) is OFF
    assert (
        "metrics and traces are off: they could not be sent to Application Insights" in caplog.text
    )
