"""Overlapping occurrences through the real pipeline (docs/behaviour.md#overlapping-occurrences):
a target that holds each request until the test lets it go, slower than the job's interval,
with messages handled side by side as the Functions host handles them, on the test's clock."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from shared.domain.wire import iso, parse_iso
from tests.pipeline import START, Pipeline
from tests.targets import HeldAnswer, Target

MINUTE = timedelta(minutes=1)
HOLD_S = 4.0  # under the pipeline's 5-second action timeout: a request never released still ends


class SideBySide:
    """Hands each message to a thread of its own, as the Functions host runs several at once."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._handle = pipeline.handle
        self._threads = ThreadPoolExecutor(4, thread_name_prefix="message")
        self._running: list[Future[None]] = []

    def __call__(self, text: str, dequeue_count: int) -> None:
        self._running.append(self._threads.submit(self._handle, text, dequeue_count))

    def finish(self) -> None:
        """Wait for every message handed over (bounded), and raise what any of them raised."""
        try:
            for running in self._running:
                running.result(timeout=15)
        finally:
            self._threads.shutdown(wait=False)


def every_minute(target: Target, path: str, policy: str, **recurrence: Any) -> dict[str, Any]:
    return {
        "startTime": START.isoformat(),
        "action": {"type": "Http", "request": {"uri": target.url(path), "method": "POST"},
                   "retryPolicy": {"retryType": "none"}},
        "recurrence": {"frequency": "Minute", "interval": 1} | recurrence,
        "overlapPolicy": policy,
    }  # fmt: skip


def story(pipeline: Pipeline, job: Any) -> list[tuple[str, str, str]]:
    """History, oldest first: (expected, started, status), times as HH:MM:SS after START."""
    return [
        (entry["expectedExecutionTime"], entry["startTime"], entry["status"])
        for entry in pipeline.history(job)
    ]


def at(offset: timedelta) -> str:
    return iso(START + offset)


def test_allow_starts_the_next_occurrence_on_time_while_the_previous_is_held(
    pipeline: Pipeline, target: Target
) -> None:
    held = HeldAnswer(hold_s=HOLD_S)
    target.respond("/allow", held)
    job = pipeline.put_job("allow", every_minute(target, "/allow", "Allow", count=2))
    side_by_side = SideBySide(pipeline)
    try:
        pipeline.advance(MINUTE, on_message=side_by_side)  # START: the first occurrence is held
        target.wait_for("/allow", 1)
        pipeline.advance(MINUTE, on_message=side_by_side)  # START + 1 min: the second begins
        calls = target.wait_for("/allow", 2)
        assert held.holding == 2  # both at the target at once
        running = pipeline.job(job).document
        assert running.occurrences == 2
        assert [entry.began is not None for entry in running.pending] == [True, True]
    finally:
        held.release()
        side_by_side.finish()
    assert [call.headers["x-ms-scheduler-expected-execution-time"] for call in calls] == [
        at(0 * MINUTE),
        at(MINUTE),
    ]
    assert (
        calls[0].headers["x-ms-scheduler-execution-id"]
        != calls[1].headers["x-ms-scheduler-execution-id"]
    )
    assert story(pipeline, job) == [
        (at(0 * MINUTE), at(0 * MINUTE), "Completed"),
        (at(MINUTE), at(MINUTE), "Completed"),
    ]
    assert [entry["repeatCount"] for entry in pipeline.history(job)] == [1, 2]
    document = pipeline.job(job).document
    assert document.state.value == "completed"  # after count, once both were over
    status = document.status
    assert (status.execution_count, status.failure_count, status.faulted_count) == (2, 0, 0)
    assert status.last_execution_time == START + MINUTE
    assert document.pending == ()
    assert pipeline.advance(10 * MINUTE) == 0


def test_skip_records_the_occurrence_due_while_the_previous_was_held_and_runs_the_next(
    pipeline: Pipeline, target: Target
) -> None:
    held = HeldAnswer(hold_s=HOLD_S)
    target.respond("/skip", held)
    job = pipeline.put_job("skip", every_minute(target, "/skip", "Skip"))
    side_by_side = SideBySide(pipeline)
    try:
        pipeline.advance(MINUTE, on_message=side_by_side)  # START: held
        target.wait_for("/skip", 1)
        assert pipeline.advance(MINUTE + timedelta(seconds=30), on_message=side_by_side) == 0
    finally:
        held.release()  # the first occurrence is over at START + 1:30
        side_by_side.finish()
    assert pipeline.job(job).document.status.next_execution_time == START + 2 * MINUTE
    pipeline.advance(MINUTE)  # to START + 2:30
    expected = [
        call.headers["x-ms-scheduler-expected-execution-time"] for call in target.received("/skip")
    ]
    assert expected == [at(0 * MINUTE), at(2 * MINUTE)]
    ninety_seconds = MINUTE + timedelta(seconds=30)
    assert story(pipeline, job) == [
        (at(0 * MINUTE), at(0 * MINUTE), "Completed"),
        (at(MINUTE), at(ninety_seconds), "Postponed"),
        (at(2 * MINUTE), at(2 * MINUTE), "Completed"),
    ]
    skipped = pipeline.history(job)[1]
    assert (
        skipped["message"]
        == f"Skipped: the occurrence of {at(0 * MINUTE)} was still running (overlapPolicy Skip)."
    )
    document = pipeline.job(job).document
    assert document.occurrences == 3
    assert document.status.execution_count == 2


def test_wait_runs_the_occurrence_due_while_the_previous_was_held_as_soon_as_it_is_over(
    pipeline: Pipeline, target: Target
) -> None:
    held = HeldAnswer(hold_s=HOLD_S)
    target.respond("/wait", held)
    job = pipeline.put_job("wait", every_minute(target, "/wait", "Wait"))
    side_by_side = SideBySide(pipeline)
    try:
        pipeline.advance(MINUTE, on_message=side_by_side)
        target.wait_for("/wait", 1)
        assert pipeline.advance(MINUTE + timedelta(seconds=30), on_message=side_by_side) == 0
        assert held.most_held_at_once == 1
    finally:
        held.release()
        side_by_side.finish()
    pipeline.advance(MINUTE)  # to START + 2:30
    ninety_seconds = MINUTE + timedelta(seconds=30)
    assert story(pipeline, job) == [
        (at(0 * MINUTE), at(0 * MINUTE), "Completed"),
        (at(MINUTE), at(ninety_seconds), "Completed"),  # late, not lost
        (at(2 * MINUTE), at(2 * MINUTE), "Completed"),
    ]
    assert held.most_held_at_once == 1  # never two at once
    assert pipeline.job(job).document.status.execution_count == 3


def test_a_job_without_overlap_policy_behaves_as_wait(pipeline: Pipeline, target: Target) -> None:
    target.answer("/default", 200)
    properties = every_minute(target, "/default", "Wait", count=2)
    del properties["overlapPolicy"]
    job = pipeline.put_job("default", properties)
    pipeline.advance(3 * MINUTE)
    document = pipeline.job(job).document
    assert document.properties.overlap_policy is None
    assert "overlapPolicy" not in document.public_properties()
    assert [parse_iso(entry["startTime"]) for entry in pipeline.history(job)] == [
        START,
        START + MINUTE,
    ]
