"""Metrics and traces (shared/telemetry.py): what the executor, the timer and the API record, read
back through OpenTelemetry's in-memory reader and span exporter, with jobs run on real Azurite
and a real HTTP target (tests/pipeline.py)."""

from __future__ import annotations

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

from shared import telemetry
from shared.api.arm import serve
from shared.domain.decisions import MOST_ALONGSIDE
from shared.settings import SettingError, Settings
from shared.telemetry import _UNTRACED_LIBRARIES, OFF, Telemetry, _entra_client_id
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
