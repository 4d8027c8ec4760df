"""Jobs run (docs/behaviour.md#execution): due index, timer tick, queue, executor, history, on real Azurite
and real HTTP targets, with the clock in the test's hands."""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.ids import JobId
from shared.domain.job_definition import JobState
from shared.domain.wire import parse_iso
from shared.execution.dispatch import Dispatcher
from shared.execution.messages import MOST_PER_MESSAGE
from shared.execution.worker import _SharedGateReads
from shared.storage.interface import Preconditions
from shared.storage.table_store import table_storage_from_connection_string
from tests.pipeline import START, Pipeline
from tests.targets import Target
from tests.wrapped_store import Wrapped, wrapping

MINUTE = timedelta(minutes=1)


def http(target: Target, path: str, **request: Any) -> dict[str, Any]:
    return {"type": "Http", "request": {"uri": target.url(path), "method": "POST", "body": "hello"} | request}


def job_at(target: Target, path: str, start: Any = START, **properties: Any) -> dict[str, Any]:
    return {"startTime": start.isoformat(), "action": http(target, path)} | properties


def test_a_one_off_job_runs_once_with_its_identity_and_completes(pipeline: Pipeline, target: Target) -> None:
    target.answer("/one-off", 200, b"done")
    job = pipeline.put_job("one-off", job_at(target, "/one-off"))
    assert pipeline.advance(timedelta(seconds=30)) == 0  # not due yet: nothing on the queue
    assert pipeline.advance(timedelta(seconds=30)) == 1
    [call] = target.received("/one-off")
    assert call.method == "POST"
    assert call.body == b"hello"
    assert call.headers["x-ms-scheduler-jobid"] == job.arm_id
    assert call.headers["x-ms-scheduler-jobcollectionid"] == job.collection.arm_id
    assert call.headers["x-ms-scheduler-expected-execution-time"] == START.isoformat().replace("+00:00", "Z")
    assert len(call.headers["x-ms-scheduler-execution-id"]) == 32
    [entry] = pipeline.history(job)
    assert entry["status"] == "Completed"
    assert "'200 OK'" in entry["message"]
    assert entry["message"].endswith("done")
    document = pipeline.job(job).document
    assert document.state.value == "completed"
    assert document.status.execution_count == 1
    assert pipeline.advance(timedelta(hours=1)) == 0


def test_a_recurring_job_runs_every_occurrence_then_completes_at_count(pipeline: Pipeline, target: Target) -> None:
    target.answer("/count", 200)
    job = pipeline.put_job("count", job_at(target, "/count", recurrence={"frequency": "Minute", "interval": 1, "count": 3}))
    for _ in range(5):
        pipeline.advance(MINUTE)
    calls = target.received("/count")
    expected = [call.headers["x-ms-scheduler-expected-execution-time"] for call in calls]
    assert expected == [(START + n * MINUTE).isoformat().replace("+00:00", "Z") for n in range(3)]
    document = pipeline.job(job).document
    assert document.state.value == "completed"
    assert document.status.execution_count == 3
    assert [entry["repeatCount"] for entry in pipeline.history(job)] == [1, 2, 3]


def test_a_failing_target_is_retried_per_policy_then_the_error_action_runs(pipeline: Pipeline, target: Target) -> None:
    target.answer("/down", 503, b"busy")
    target.answer("/alarm", 200)
    action = http(target, "/down") | {
        "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT20S", "retryCount": 2},
        "errorAction": http(target, "/alarm"),
    }
    job = pipeline.put_job("down", {"startTime": START.isoformat(), "action": action})
    pipeline.advance(MINUTE)
    assert len(target.received("/down")) == 1
    pipeline.advance(timedelta(seconds=19))
    assert len(target.received("/down")) == 1  # the retry waits its interval
    pipeline.advance(timedelta(seconds=1))
    assert len(target.received("/down")) == 2
    pipeline.advance(timedelta(seconds=20))
    assert len(target.received("/down")) == 3
    assert len(target.received("/alarm")) == 1
    history = pipeline.history(job)
    assert [(e["actionName"], e["status"], e["retryCount"]) for e in history] == [
        ("MainAction", "Failed", 0), ("MainAction", "Failed", 1), ("MainAction", "Failed", 2),
        ("ErrorAction", "Completed", 0),
    ]  # fmt: skip
    assert "'503 Service Unavailable'" in history[0]["message"]
    status = pipeline.job(job).document.status
    assert (status.execution_count, status.failure_count, status.faulted_count) == (3, 3, 1)
    # Its only occurrence faulted: a one-off job ends Faulted (docs/behaviour.md#completed-and-faulted).
    assert pipeline.job(job).document.state.value == "faulted"


def test_a_duplicate_delivery_does_not_run_the_action_again(pipeline: Pipeline, target: Target) -> None:
    target.answer("/dup", 200)
    job = pipeline.put_job("dup", job_at(target, "/dup", recurrence={"frequency": "Minute", "interval": 1}))
    seen: list[str] = []

    def twice(text: str, dequeue_count: int) -> None:
        seen.append(text)
        pipeline.handle(text, dequeue_count)
        pipeline.handle(text, dequeue_count)  # the same message again, as at-least-once allows

    pipeline.advance(MINUTE, on_message=twice)
    assert len(seen) == 1
    assert len(target.received("/dup")) == 1
    assert len(pipeline.history(job)) == 1


def test_a_redefined_job_never_runs_the_old_action(pipeline: Pipeline, target: Target) -> None:
    target.answer("/old", 200)
    target.answer("/new", 200)
    schedule = {"recurrence": {"frequency": "Minute", "interval": 1}}
    job = pipeline.put_job("redefined", job_at(target, "/old", **schedule))
    pipeline.advance(MINUTE)
    assert len(target.received("/old")) == 1
    pipeline.advance(timedelta(seconds=30))
    pipeline.put_job("redefined", job_at(target, "/new", start=START + 2 * MINUTE, **schedule))
    pipeline.advance(timedelta(seconds=30))  # the old definition's 2nd occurrence was due now
    pipeline.advance(MINUTE)
    assert len(target.received("/old")) == 1
    assert len(target.received("/new")) == 1
    assert pipeline.job(job).document.status.execution_count == 2  # the counts carry over


def test_a_deleted_job_stops_at_once(pipeline: Pipeline, target: Target) -> None:
    target.answer("/deleted", 200)
    job = pipeline.put_job("deleted", job_at(target, "/deleted", recurrence={"frequency": "Minute", "interval": 1}))
    pipeline.advance(MINUTE)
    pipeline.store.jobs.delete_job(job, Preconditions())
    pipeline.advance(MINUTE)
    pipeline.advance(MINUTE)
    assert len(target.received("/deleted")) == 1


def test_disabling_and_enabling_resumes_without_a_catch_up_burst(pipeline: Pipeline, target: Target) -> None:
    target.answer("/paused", 200)
    job = pipeline.put_job("paused", job_at(target, "/paused", recurrence={"frequency": "Minute", "interval": 1}))
    pipeline.advance(timedelta(minutes=1, seconds=30))
    assert len(target.received("/paused")) == 1
    pipeline.services.scheduling.set_job_states(pipeline.collection, JobState.DISABLED, pipeline.clock())
    assert "nextExecutionTime" not in pipeline.job(job).document.status.to_wire()
    pipeline.advance(timedelta(minutes=10))
    assert len(target.received("/paused")) == 1
    pipeline.services.scheduling.set_job_states(pipeline.collection, JobState.ENABLED, pipeline.clock())
    enabled_at = pipeline.clock()
    pipeline.advance(timedelta(seconds=59))
    calls = target.received("/paused")
    assert len(calls) == 2  # the next occurrence only: none of the ten missed ones
    expected = parse_iso(calls[-1].headers["x-ms-scheduler-expected-execution-time"])
    assert enabled_at < expected <= enabled_at + MINUTE
    assert all(entry["status"] == "Completed" for entry in pipeline.history(job))


def test_a_job_written_while_its_collection_is_disabled_is_read_again_not_a_failure(
    pipeline: Pipeline, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Disabling writes every job back with the etag it read; a job redefined in between makes
    that write fail, and the change is made again on what was written, not lost or a 500."""
    raced = pipeline.put_job("raced", job_at(target, "/raced", recurrence={"frequency": "Minute", "interval": 1}))
    calm = pipeline.put_job("calm", job_at(target, "/calm", recurrence={"frequency": "Minute", "interval": 1}))
    write_back, redefined = pipeline.store.executor.replace_jobs, []

    def redefine_first(jobs: Any) -> None:
        if not redefined:  # a client's PUT lands between the read and the batch write
            redefined.append(pipeline.put_job("raced", job_at(target, "/raced-again")))
        write_back(jobs)

    monkeypatch.setattr(pipeline.store.executor, "replace_jobs", redefine_first)
    pipeline.services.scheduling.set_job_states(pipeline.collection, JobState.DISABLED, pipeline.clock())
    assert pipeline.job(raced).document.properties.action.request.uri.endswith("/raced-again")
    assert pipeline.job(raced).document.state is JobState.DISABLED
    assert pipeline.job(calm).document.state is JobState.DISABLED


def test_a_job_deleted_while_its_collection_is_enabled_is_left_deleted(
    pipeline: Pipeline, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = pipeline.put_job("gone", job_at(target, "/gone", recurrence={"frequency": "Minute", "interval": 1}))
    kept = pipeline.put_job("kept", job_at(target, "/kept", recurrence={"frequency": "Minute", "interval": 1}))
    pipeline.services.scheduling.set_job_states(pipeline.collection, JobState.DISABLED, pipeline.clock())
    write_back, deleted = pipeline.store.executor.replace_jobs, []

    def delete_first(jobs: Any) -> None:
        if not deleted:  # a client's DELETE lands between the read and the batch write
            deleted.append(pipeline.store.jobs.delete_job(gone, Preconditions()))
        write_back(jobs)

    monkeypatch.setattr(pipeline.store.executor, "replace_jobs", delete_first)
    pipeline.services.scheduling.set_job_states(pipeline.collection, JobState.ENABLED, pipeline.clock())
    assert pipeline.store.jobs.job(gone) is None
    assert pipeline.job(kept).document.state is JobState.ENABLED


def test_after_downtime_each_job_runs_once_and_the_missed_occurrences_are_postponed(
    pipeline: Pipeline, target: Target
) -> None:
    target.answer("/missed", 200)
    job = pipeline.put_job("missed", job_at(target, "/missed", recurrence={"frequency": "Minute", "interval": 1}))
    pipeline.advance(timedelta(seconds=30))
    assert pipeline.jump(timedelta(minutes=10, seconds=50)) == 1  # down from START + 30 s
    [call] = target.received("/missed")
    assert call.headers["x-ms-scheduler-expected-execution-time"] == (
        (START + 10 * MINUTE).isoformat().replace("+00:00", "Z")
    )
    history = pipeline.history(job)
    assert [entry["status"] for entry in history] == ["Postponed"] * 10 + ["Completed"]
    assert [entry["expectedExecutionTime"] for entry in history] == [
        (START + n * MINUTE).isoformat().replace("+00:00", "Z") for n in range(11)
    ]
    pipeline.advance(timedelta(seconds=40))
    assert len(target.received("/missed")) == 2  # and the schedule goes on


def test_a_message_that_keeps_failing_is_recorded_as_failed_and_poisoned(storage: str, target: Target) -> None:
    class FailingJobs(Wrapped):
        """Fault injection: the job cannot be read for the first five tries (nor claimed, so its
        target is not called: a try whose outcome could not be written waits for its claim to
        run out instead, tests/execution/test_claims.py)."""

        failures = 5

        def job(self, *args: Any, **kwargs: Any) -> Any:
            if FailingJobs.failures > 0:
                FailingJobs.failures -= 1
                raise ConnectionError("storage unavailable")
            return self.inner.job(*args, **kwargs)

    real = table_storage_from_connection_string(storage)
    pipeline = Pipeline(storage, store=wrapping(real, jobs=FailingJobs))
    target.answer("/poison", 200)
    no_retries = http(target, "/poison") | {"retryPolicy": {"retryType": "None"}}
    job = pipeline.put_job("poison", job_at(target, "/poison", action=no_retries,
                                            recurrence={"frequency": "Minute", "interval": 1}))  # fmt: skip
    pipeline.advance(MINUTE)
    assert len(pipeline.poisoned) == 1
    assert len(target.received("/poison")) == 0  # no delivery got as far as its claim
    [entry] = pipeline.history(job)
    assert entry["status"] == "Failed"
    assert "gave up" in entry["message"]
    pipeline.advance(MINUTE)  # the job itself goes on
    assert len(target.received("/poison")) == 1


def test_a_crash_between_recording_and_sending_loses_no_occurrence(pipeline: Pipeline, target: Target) -> None:
    target.answer("/crash", 200)
    job = pipeline.put_job("crash", job_at(target, "/crash", recurrence={"frequency": "Minute", "interval": 1}))
    real_dispatch = pipeline.dispatcher.dispatch
    crashes = iter([True])

    def crash_once(deliveries: Any, now: Any) -> None:
        if next(crashes, False):
            raise ConnectionError("the process died here")
        real_dispatch(deliveries, now)

    pipeline.dispatcher.dispatch = crash_once  # type: ignore[method-assign]
    pipeline.advance(MINUTE)  # ran and recorded, then failed to send; delivered again
    assert len(target.received("/crash")) == 1
    pipeline.advance(MINUTE)
    pipeline.advance(MINUTE)
    assert len(target.received("/crash")) == 3
    assert len(pipeline.history(job)) == 3


def test_a_tick_reads_only_the_due_rows(pipeline: Pipeline, target: Target) -> None:
    target.answer("/later", 200)
    for n in range(30):
        pipeline.put_job(f"far-{n}", job_at(target, "/later", start=START + timedelta(days=2)))
    pipeline.put_job("soon", job_at(target, "/later"))
    queried: list[int] = []
    real_rows = pipeline.index.rows  # what the tick reads, a partition's key range at a time

    def counting(*query: Any, **limits: Any) -> Any:
        rows = real_rows(*query, **limits)
        queried.append(len(rows))
        return rows

    pipeline.index.rows = counting  # type: ignore[method-assign]
    pipeline.advance(MINUTE)
    assert sum(queried) == 1
    assert len(target.received("/later")) == 1


def test_messages_on_the_queue_are_json_with_the_attempt(pipeline: Pipeline, target: Target) -> None:
    pipeline.put_job("shape", job_at(target, "/shape", start=START - MINUTE))
    [message] = pipeline.messages()
    assert message["job"]["job"] == "shape"
    assert message["attempt"]["action"] == "MainAction"
    assert json.dumps(message)


def test_the_executors_logs_name_the_collection_job_and_occurrence(pipeline: Pipeline, target: Target, caplog: pytest.LogCaptureFixture) -> None:
    """Application Insights receives these lines: they must say which occurrence they are about
    (tests/test_logs.py has the whole story of each outcome)."""
    target.answer("/logged", 200)
    job = pipeline.put_job("logged", job_at(target, "/logged"))
    with caplog.at_level(logging.INFO, logger="scheduler"):
        pipeline.advance(MINUTE)
    [call] = target.received("/logged")
    expected = call.headers["x-ms-scheduler-expected-execution-time"]
    [line] = [record.getMessage() for record in caplog.records if expected in record.getMessage()]
    assert line.startswith(f"{job.collection.name}/logged: completed (occurrence {expected}, retry 0) in ")
    assert "Response from host" in line


def test_jobs_due_in_the_same_second_share_one_message(pipeline: Pipeline, target: Target) -> None:
    for n in range(5):
        target.answer(f"/together-{n}", 200)
    target.answer("/apart", 200)
    jobs = [pipeline.put_job(f"together-{n}", job_at(target, f"/together-{n}")) for n in range(5)]
    jobs.append(pipeline.put_job("apart", job_at(target, "/apart", start=START + timedelta(seconds=10))))
    assert pipeline.advance(MINUTE + timedelta(seconds=15)) == 2  # a message for each second
    for n in range(5):
        assert len(target.received(f"/together-{n}")) == 1
    assert len(target.received("/apart")) == 1
    assert [pipeline.history(job)[0]["status"] for job in jobs] == ["Completed"] * 6


def test_jobs_of_a_collection_due_together_share_one_read_of_its_state(storage: str, target: Target) -> None:
    reads: list[Any] = []

    class CountingExecutor(Wrapped):
        def collection_state(self, collection: Any) -> str | None:
            reads.append(pipeline.clock())
            return self.inner.collection_state(collection)

    real = table_storage_from_connection_string(storage)
    pipeline = Pipeline(storage, store=wrapping(real, executor=CountingExecutor))
    target.answer("/shared", 200)
    for n in range(5):
        pipeline.put_job(f"shared-{n}", job_at(target, "/shared"))
    pipeline.put_job("later", job_at(target, "/shared", start=START + timedelta(seconds=10)))
    pipeline.advance(MINUTE + timedelta(seconds=15))
    assert len(target.received("/shared")) == 6
    assert reads == [START, START + timedelta(seconds=10)]  # at the due times, once for each


def test_an_execution_under_overlap_allow_reads_its_job_once(storage: str, target: Target) -> None:
    """Allow records the occurrence as begun before the action runs; the outcome is then written
    against the version that write returned, not against the job read again."""
    reads: list[JobId] = []

    class CountingJobs(Wrapped):
        def job(self, job: JobId) -> Any:
            reads.append(job)
            return self.inner.job(job)

    real = table_storage_from_connection_string(storage)
    pipeline = Pipeline(storage, store=wrapping(real, jobs=CountingJobs))
    target.answer("/allowed", 200)
    job = pipeline.put_job("allowed", job_at(target, "/allowed", overlapPolicy="Allow"))
    pipeline.advance(MINUTE)
    assert len(target.received("/allowed")) == 1
    assert reads == [job]
    [entry] = pipeline.history(job)
    assert entry["status"] == "Completed"


def test_a_collection_disabled_between_two_due_times_stops_the_later_jobs(pipeline: Pipeline, target: Target) -> None:
    target.answer("/gated", 200)
    first = pipeline.put_job("first", job_at(target, "/gated"))
    second = pipeline.put_job("second", job_at(target, "/gated", start=START + timedelta(seconds=1)))
    pipeline.advance(MINUTE)
    assert len(target.received("/gated")) == 1
    pipeline.store.executor.set_collection_state(pipeline.collection, "Disabled")
    pipeline.advance(timedelta(seconds=5))
    assert len(target.received("/gated")) == 1  # the read for the first is not reused
    assert pipeline.history(first)[0]["status"] == "Completed"
    assert pipeline.history(second) == []


def test_a_shared_read_of_a_collection_state_serves_only_deliveries_soon_after_it(pipeline: Pipeline) -> None:
    reads: list[Any] = []
    gates = _SharedGateReads(lambda collection: reads.append(pipeline.clock()) or "Enabled", pipeline.clock)
    for late_by in (0, 0.5, 1.0, 2.5):  # deliveries due at START, handled this late
        pipeline.clock.at = START + timedelta(seconds=late_by)
        assert gates.state(pipeline.collection, START) == "Enabled"
    assert reads == [START, START + timedelta(seconds=2.5)]


def test_follow_ups_of_one_second_from_many_threads_leave_in_one_message(pipeline: Pipeline) -> None:
    gathering = Dispatcher(pipeline.queue, pipeline.index, horizon=timedelta(hours=1),
                           coalesce=timedelta(milliseconds=300))  # fmt: skip
    now = pipeline.clock()

    def follow_up(n: int, due: Any) -> Delivery:
        return Delivery(JobId(pipeline.collection, f"job-{n}"), now, Pending(Attempt(due), due))

    # Due now (and 3 s ago): visible at once, for the test to look at.
    same_second = [follow_up(n, now) for n in range(8)]
    with ThreadPoolExecutor(8) as threads:
        list(threads.map(lambda d: gathering.dispatch_gathered([d], now), same_second))
    gathering.dispatch_gathered([follow_up(9, now - timedelta(seconds=3))], now)
    messages = pipeline.messages()
    assert sorted(len(m.get("deliveries", [m])) for m in messages) == [1, 8]
    grouped = next(m for m in messages if "deliveries" in m)
    assert sorted(d["job"]["job"] for d in grouped["deliveries"]) == [f"job-{n}" for n in range(8)]


def test_follow_ups_of_one_second_that_fill_more_than_a_message_leave_in_messages_of_even_size(pipeline: Pipeline) -> None:
    # A whole second to gather in, so that all 75 threads join one gathering on a busy machine.
    gathering = Dispatcher(pipeline.queue, pipeline.index, horizon=timedelta(hours=1),
                           coalesce=timedelta(seconds=1))  # fmt: skip
    now = pipeline.clock()
    due_together = MOST_PER_MESSAGE + 11  # once left as a full message and one of 11
    same_second = [Delivery(JobId(pipeline.collection, f"job-{n}"), now, Pending(Attempt(now), now))
                   for n in range(due_together)]  # fmt: skip
    with ThreadPoolExecutor(due_together) as threads:
        list(threads.map(lambda d: gathering.dispatch_gathered([d], now), same_second))
    messages = pipeline.messages()
    assert sorted(len(m["deliveries"]) for m in messages) == [37, 38]
    sent = sorted(d["job"]["job"] for m in messages for d in m["deliveries"])
    assert sent == sorted(f"job-{n}" for n in range(due_together))


def _settled_and_answered(pipeline: Pipeline, target: Target, slow_s: float) -> tuple[float, float]:
    """Two jobs due together, one of whose targets answers `slow_s` late: (when the quick one's
    outcome was recorded, when the slow target answered), as monotonic times."""
    times: dict[str, float] = {}
    recording = pipeline.store.executor.settle_job

    def settle_job(stored: Any, document: Any, history: Any) -> bool:
        if stored.id.name == "quick" and history:
            times.setdefault("quick recorded", time.monotonic())
        return recording(stored, document, history)

    def slowly(_: Any) -> tuple[int, bytes, dict[str, str]]:
        time.sleep(slow_s)
        times["slow answered"] = time.monotonic()
        return 200, b"ok", {}

    pipeline.store.executor.settle_job = settle_job  # type: ignore[method-assign]
    target.answer("/quick", 200)
    target.respond("/slow", slowly)
    pipeline.put_job("quick", job_at(target, "/quick"))
    pipeline.put_job("slow", job_at(target, "/slow"))
    assert pipeline.advance(MINUTE + timedelta(seconds=5)) == 1  # one message, side by side
    return times["quick recorded"], times["slow answered"]


def test_outcomes_are_recorded_after_the_actions_due_with_them_have_gone_out(pipeline: Pipeline, target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared.execution.worker.SETTLING_DEFERRED_AT_MOST", 30.0)
    recorded, answered = _settled_and_answered(pipeline, target, slow_s=0.3)
    assert recorded >= answered  # the quick job's outcome waited for the slow job's action


def test_an_outcome_waits_for_other_actions_only_so_long(pipeline: Pipeline, target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared.execution.worker.SETTLING_DEFERRED_AT_MOST", 0.05)
    recorded, answered = _settled_and_answered(pipeline, target, slow_s=1.5)
    assert recorded < answered
