"""The service's metrics and traces, through OpenTelemetry, recorded only where they have somewhere
to go: Application Insights (Microsoft's distro, `azure-monitor-opentelemetry`), or a console or
OTLP exporter set for a local run. Without either, `current()` is `OFF`: each hook returns at
once and no OpenTelemetry module is imported, so a cold start pays nothing for them.

What is measured (names as Application Insights' customMetrics shows them; the alerts in
infra/app/monitoring.bicep query them):
- `scheduler.executions`: executions by `outcome` (completed, failed, faulted, skipped,
  postponed), `collection` and `job`;
- `scheduler.lateness` (ms, from the attempt's due time to its call) and
  `scheduler.target.duration` (ms, the call to the target's answer), per collection;
- `scheduler.retries`: tries after the first, per collection and job;
- `scheduler.queue.depth` and `scheduler.queue.poison`: read when the metrics are exported;
- `scheduler.timer.ticks` and `scheduler.timer.handed`;
- `scheduler.api.requests` by `route` (the operation's name, never a path: a path names
  subscriptions and jobs) and `status`.

A trace per execution, from the hand-off to the target's answer. A span `hand off` (kind
producer) around the send that puts a delivery on the execution queue: the timer's tick, or
the save or run that queued it directly when it is due within the horizon. Its W3C trace
context travels in the delivery (`Delivery.trace_context`), and the executor continues it: a
span `execution` (kind consumer, so Application Insights lists it among requests) from the
moment it takes the delivery to the recorded outcome, with a child `call target`. A retry or
the errorAction continues the trace of the try before it (its hand-off is a child of that
try's execution); the next occurrence starts a trace of its own. The attributes name the job,
the try and the execution id the target received; never a URL, a header or a message (they
may carry secrets).
"""

# OpenTelemetry is imported where it is first needed, so that a process without telemetry never
# loads it (the API alone costs ~80 ms at a cold start, the distro much more).
# ruff: noqa: PLC0415

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from shared.domain.attempts import Attempt, Delivery, execution_id
from shared.domain.decisions import Outcome, Settlement
from shared.domain.ids import JobId
from shared.domain.job_definition import JobState
from shared.domain.wire import iso
from shared.logs import app_logger

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Meter, MeterProvider, Observation
    from opentelemetry.trace import Span, Tracer, TracerProvider
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from shared.settings import Settings

log = app_logger("scheduler.telemetry")
INSTRUMENTATION = "scheduler"
EXECUTION_SPAN = "execution"  # the alert on lateness finds the executions' spans by this name
HAND_OFF_SPAN = "hand off"
OUTCOMES = ("completed", "failed", "faulted", "skipped", "postponed")
# The execution span of the delivery this thread (or task) handles: its outcome is written on it
# from inside a child span.
_execution: ContextVar[Span | None] = ContextVar("execution_span", default=None)
# The libraries the distro would trace by default. Their spans carry full URLs, and a target's
# query string may hold a secret (`?sig=`, `?code=`): none is traced, only our own spans.
_UNTRACED_LIBRARIES = ("azure_sdk", "django", "fastapi", "flask", "httpx", "httpx2", "psycopg2",
                       "requests", "urllib", "urllib3")  # fmt: skip


class _Instruments:
    def __init__(self, meter: Meter, queue: Callable[[int], list[Observation]]) -> None:
        self.executions = meter.create_counter(
            "scheduler.executions", unit="{execution}", description="Executions by outcome"
        )
        self.retries = meter.create_counter(
            "scheduler.retries", unit="{try}", description="Tries after an occurrence's first"
        )
        self.lateness = meter.create_histogram(
            "scheduler.lateness", unit="ms", description="From an attempt's due time to its call"
        )
        self.target_duration = meter.create_histogram(
            "scheduler.target.duration", unit="ms", description="From the call to the answer"
        )
        self.ticks = meter.create_counter("scheduler.timer.ticks", unit="{tick}")
        self.handed = meter.create_counter(
            "scheduler.timer.handed", unit="{attempt}", description="Attempts a tick queued"
        )
        self.requests = meter.create_counter("scheduler.api.requests", unit="{request}")
        self.request_duration = meter.create_histogram("scheduler.api.duration", unit="ms")
        meter.create_observable_gauge(
            "scheduler.queue.depth",
            callbacks=[lambda options: queue(0)],
            unit="{message}",
        )
        meter.create_observable_gauge(
            "scheduler.queue.poison",
            callbacks=[lambda options: queue(1)],
            unit="{message}",
        )


class Telemetry:
    """Where the hooks record. Built without providers it is off: every hook returns at once."""

    def __init__(
        self,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.on = meter_provider is not None or tracer_provider is not None
        self._queue_depths: tuple[Callable[[], int], Callable[[], int]] | None = None
        self._instruments = (
            _Instruments(meter_provider.get_meter(INSTRUMENTATION), self._read_queue)
            if meter_provider is not None
            else None
        )
        self._tracer: Tracer | None = (
            tracer_provider.get_tracer(INSTRUMENTATION) if tracer_provider is not None else None
        )

    # --- the hand-off to the queue ---

    def continuing(self, deliveries: Sequence[Delivery]) -> Sequence[Delivery]:
        """The deliveries, those that continue the execution this thread runs (a retry, the
        errorAction, a delivery sent again) carrying its trace context, so that their hand-off
        joins its trace; the others (the next occurrence) start traces of their own."""
        span = _execution.get()
        if span is None:
            return deliveries
        context = _context_of(span)
        return [
            replace(delivery, trace_context=context) if _continues(delivery) else delivery
            for delivery in deliveries
        ]

    @contextlib.contextmanager
    def handing_off(self, deliveries: Sequence[Delivery]) -> Iterator[Sequence[Delivery]]:
        """A span `hand off` for each delivery, around the send of their message: the first of
        a trace, or the next of the one the delivery carries. Yields the deliveries carrying
        their hand-off's context, for the message."""
        if self._tracer is None:
            yield deliveries
            return
        from opentelemetry.context import Context
        from opentelemetry.trace import SpanKind, StatusCode

        spans = [
            self._tracer.start_span(
                HAND_OFF_SPAN,
                context=_carried(delivery) or Context(),  # an empty context: a new trace
                kind=SpanKind.PRODUCER,
                # Only what finds the execution: the rest is on the execution span, and every
                # attribute here costs each message (issue 48's 10% budget).
                attributes={
                    "collection": delivery.job.collection.name,
                    "job": delivery.job.name,
                    "scheduler.execution_id": execution_id(delivery.job, delivery.pending.attempt),
                },
            )
            for delivery in deliveries
        ]
        try:
            yield [
                replace(delivery, trace_context=_context_of(span))
                for delivery, span in zip(deliveries, spans, strict=True)
            ]
        except BaseException as failure:
            for span in spans:  # the type only: a storage error's text can name a SAS token
                span.set_status(StatusCode.ERROR, f"not sent: {type(failure).__name__}")
            raise
        finally:
            for span in spans:
                span.end()

    # --- the executor ---

    @contextlib.contextmanager
    def execution(self, delivery: Delivery) -> Iterator[None]:
        """The span of one execution, around everything the executor does with a delivery: a
        child of its hand-off when the delivery carries that span's context."""
        if self._tracer is None:
            yield
            return
        from opentelemetry.trace import SpanKind

        with self._tracer.start_as_current_span(
            EXECUTION_SPAN,
            context=_carried(delivery),  # None: under whatever is current, as before trace contexts
            kind=SpanKind.CONSUMER,
            # The try's own attributes are written with its outcome: for a late occurrence the
            # one that runs is not the one delivered.
            attributes={
                **_job_attributes(delivery.job),
                "scheduler.due": iso(delivery.pending.due),
            },
        ) as span:
            token = _execution.set(span)
            try:
                yield
            finally:
                _execution.reset(token)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """A child span of the execution: `call target`."""
        if self._tracer is None:
            yield
            return
        with self._tracer.start_as_current_span(name):
            yield

    def executed(
        self, delivery: Delivery, attempt: Attempt, outcome: Outcome, settlement: Settlement
    ) -> None:
        """An attempt's recorded outcome; `attempt` is the one that ran (for a late occurrence,
        the latest missed, with `postponed` the ones before it)."""
        if not self.on:
            return
        job = delivery.job
        name = _outcome_name(outcome, settlement)
        lateness = _ms(max(outcome.started - delivery.pending.due, timedelta(0)))
        responded = _ms(outcome.ended - outcome.started)
        by_job = _job_attributes(job)
        if self._instruments is not None:
            self._instruments.executions.add(1, {**by_job, "outcome": name})
            if attempt.retry:
                self._instruments.retries.add(1, by_job)
            by_collection = {"collection": job.collection.name}
            self._instruments.lateness.record(lateness, by_collection)
            self._instruments.target_duration.record(
                responded, {**by_collection, "succeeded": outcome.succeeded}
            )
        span = _execution.get()
        if span is not None:
            from opentelemetry.trace import StatusCode

            span.set_attributes(
                {
                    **_attempt_attributes(job, attempt),
                    "scheduler.outcome": name,
                    "scheduler.lateness_ms": lateness,
                    "scheduler.response_ms": responded,
                }
            )
            if not outcome.succeeded:
                span.set_status(StatusCode.ERROR, f"the attempt {name}")

    def postponed(self, job: JobId, occurrences: int) -> None:
        """Occurrences missed and postponed, when the latest of them runs."""
        if self._instruments is not None and occurrences:
            self._instruments.executions.add(
                occurrences, {**_job_attributes(job), "outcome": "postponed"}
            )

    def skipped(self, job: JobId) -> None:
        """An occurrence not run: too many of the job's were still running."""
        if self._instruments is not None:
            self._instruments.executions.add(1, {**_job_attributes(job), "outcome": "skipped"})

    # --- the timer, the API, the queues ---

    def ticked(self, handed: int) -> None:
        if self._instruments is not None:
            self._instruments.ticks.add(1)
            self._instruments.handed.add(handed)

    def served(self, operation: Callable[..., Any], status: int, started: float) -> None:
        """An API request answered; `started` is its time.perf_counter() on arrival."""
        if self._instruments is not None:
            attributes = {"route": getattr(operation, "__name__", "unknown"), "status": status}
            self._instruments.requests.add(1, attributes)
            self._instruments.request_duration.record(
                (time.perf_counter() - started) * 1000, attributes
            )

    def watch_queues(self, depth: Callable[[], int], poison: Callable[[], int]) -> None:
        """How to read the execution queue's depth and the poison queue's, at each export."""
        self._queue_depths = (depth, poison)

    def _read_queue(self, which: int) -> list[Observation]:
        """The depth of the execution queue (0) or of its poison queue (1), if it can be read."""
        from opentelemetry.metrics import Observation

        if self._queue_depths is None:
            return []
        try:
            return [Observation(self._queue_depths[which]())]
        except Exception as failure:  # storage unreachable: this export goes without it
            log.warning("could not read a queue's depth for the metrics: %s", failure)
            return []


def _outcome_name(outcome: Outcome, settlement: Settlement) -> str:
    if outcome.succeeded:
        return "completed"
    return "faulted" if settlement.document.state is JobState.FAULTED else "failed"


def _job_attributes(job: JobId) -> dict[str, str]:
    return {"collection": job.collection.name, "job": job.name}


def _attempt_attributes(job: JobId, attempt: Attempt) -> dict[str, str | int | bool]:
    return {
        "scheduler.execution_id": execution_id(job, attempt),
        "scheduler.expected": iso(attempt.expected),
        "scheduler.action": attempt.action.value,
        "scheduler.retry": attempt.retry,
        "scheduler.run_now": attempt.run_now,
    }


def _ms(span: timedelta) -> float:
    return span / timedelta(milliseconds=1)


def _continues(delivery: Delivery) -> bool:
    """Whether the delivery, sent from an execution, belongs to that execution's occurrence:
    a try after the first, or one carrying a trace already (the delivery itself, sent again)."""
    return bool(delivery.trace_context) or not delivery.pending.attempt.starts_occurrence


def _context_of(span: Span) -> tuple[tuple[str, str], ...]:
    """The span's W3C trace context, as the headers `traceparent` (and `tracestate`)."""
    from opentelemetry.trace import set_span_in_context

    carrier: dict[str, str] = {}
    _propagator().inject(carrier, context=set_span_in_context(span))
    return tuple(carrier.items())


def _carried(delivery: Delivery) -> Context | None:
    """The trace context the delivery carries, or None if it carries none (a message of a
    process without telemetry, or older than trace contexts); one that does not parse gives
    an empty context, so a new trace."""
    if not delivery.trace_context:
        return None
    return _propagator().extract(dict(delivery.trace_context))


@functools.cache
def _propagator() -> TraceContextTextMapPropagator:
    """One W3C propagator for the process, not one built per message."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


OFF = Telemetry()
_current = OFF


def current() -> Telemetry:
    """Where this process's hooks record."""
    return _current


def install(telemetry: Telemetry) -> Telemetry:
    """Make `telemetry` the process's; returns the one it replaces (tests put it back)."""
    global _current
    replaced, _current = _current, telemetry
    return replaced


def configure(settings: Settings) -> Telemetry:
    """The process's telemetry as its settings say: Application Insights when a connection string
    is set, else the local exporter named, else off (and off, logged, if that fails). Call once
    per process."""
    where = "Application Insights" if settings.insights_connection else settings.telemetry_exporter
    if where is None:
        return current()
    try:
        if settings.insights_connection:
            install(_azure_monitor(settings))
        else:
            install(_local(where))
    except Exception:  # the service runs without its metrics rather than not at all
        log.exception("metrics and traces are off: they could not be sent to %s", where)
        return current()
    log.info("metrics and traces go to %s", where)
    return current()


def _azure_monitor(settings: Settings) -> Telemetry:
    # Heavy to import (a few hundred milliseconds): only here, when it is configured.
    from azure.monitor.opentelemetry import configure_azure_monitor
    from opentelemetry import metrics, trace

    options: dict[str, Any] = {}
    client_id = _entra_client_id(settings.insights_authentication)
    if client_id is not None:  # the templates turn local auth off: ingestion as the app identity
        from azure.identity import ManagedIdentityCredential

        options["credential"] = ManagedIdentityCredential(client_id=client_id or None)
    configure_azure_monitor(
        connection_string=settings.insights_connection,
        # The Functions host already sends the app's logs to Application Insights.
        disable_logging=True,
        instrumentation_options={name: {"enabled": False} for name in _UNTRACED_LIBRARIES},
        **options,
    )
    return Telemetry(metrics.get_meter_provider(), trace.get_tracer_provider())


def _entra_client_id(authentication: str | None) -> str | None:
    """The client id of `ClientId=...;Authorization=AAD` ('' for the system identity), or None
    when ingestion does not go through Entra ID."""
    parts = dict(part.split("=", 1) for part in (authentication or "").split(";") if "=" in part)
    if parts.get("Authorization", "").upper() != "AAD":
        return None
    return parts.get("ClientId", "")


def _local(exporter: str) -> Telemetry:
    """Metrics and spans printed (`console`), sent to an OTLP collector (`otlp`: where the
    standard OTEL_EXPORTER_OTLP_ENDPOINT says, by default http://localhost:4318), or recorded
    and dropped (`memory`: the cost of recording, for benchmarks)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        InMemoryMetricReader,
        MetricExporter,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    if exporter == "memory":
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
        return Telemetry(MeterProvider([InMemoryMetricReader()]), tracer_provider)
    metric_exporter: MetricExporter
    span_exporter: SpanExporter
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        metric_exporter, span_exporter = OTLPMetricExporter(), OTLPSpanExporter()
    else:
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        metric_exporter, span_exporter = ConsoleMetricExporter(), ConsoleSpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    meter_provider = MeterProvider([PeriodicExportingMetricReader(metric_exporter)])
    return Telemetry(meter_provider, tracer_provider)
