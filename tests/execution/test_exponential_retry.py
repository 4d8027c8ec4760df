"""Exponential retries through the real pipeline (docs/behaviour.md#exponential-retries): a
target that always fails, the waits between its tries measured from history, on the test's
clock."""

from __future__ import annotations

import itertools
from datetime import timedelta

from shared.domain.attempts import Attempt
from shared.domain.decisions import RETRY_JITTER, retry_wait
from shared.domain.wire import parse_iso
from tests.pipeline import START, Pipeline
from tests.targets import Target


def test_a_failing_target_is_retried_at_doubling_intervals_up_to_the_maximum(
    storage: str, target: Target
) -> None:
    pipeline = Pipeline(storage)
    target.answer("/down", 503, b"down for maintenance")
    policy = {
        "retryType": "Exponential",
        "retryInterval": "PT15S",
        "maximumInterval": "PT1M",
        "retryCount": 5,
    }
    job = pipeline.put_job("backing-off", {
        "startTime": START.isoformat(),
        "action": {"type": "Http", "request": {"uri": target.url("/down"), "method": "GET"}, "retryPolicy": policy},
    })  # fmt: skip
    pipeline.advance(timedelta(minutes=1, seconds=1))  # the first try, at START
    [first] = target.received("/down")
    waiting = pipeline.job(job).document
    execution = first.headers["x-ms-scheduler-execution-id"]
    first_wait = retry_wait(waiting.retries, Attempt(START, retry=1), execution)
    assert waiting.status.next_execution_time == START + first_wait  # the retry shows as next

    pipeline.advance(timedelta(minutes=10))
    calls = target.received("/down")
    assert [call.headers["x-ms-scheduler-retry-count"] for call in calls] == [
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
    ]
    assert {call.headers["x-ms-scheduler-execution-id"] for call in calls} == {execution}
    history = pipeline.history(job)
    assert [entry["status"] for entry in history] == ["Failed"] * 6
    assert [entry["retryCount"] for entry in history] == [0, 1, 2, 3, 4, 5]
    started = [parse_iso(entry["startTime"]) for entry in history]
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(started)]
    # 15 s, doubled each time, capped at 1 minute; each moved by at most 20%, within 15 s..1 min.
    for gap, base in zip(gaps, [15, 30, 60, 60, 60], strict=True):
        assert max(15, base * (1 - RETRY_JITTER)) <= gap <= min(60, base * (1 + RETRY_JITTER))
    # The jitter is the one the execution id fixes: the same occurrence always waits the same.
    retries = pipeline.job(job).document.retries
    assert gaps == [
        retry_wait(retries, Attempt(START, retry=n), execution).total_seconds() for n in range(1, 6)
    ]
    document = pipeline.job(job).document
    assert document.state.value == "faulted"
    status = document.status
    assert (status.execution_count, status.failure_count, status.faulted_count) == (6, 6, 1)
