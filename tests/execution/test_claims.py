"""A try's target is called once: each delivery claims the try in the job's document before it
calls, and a second delivery that finds the claim live does not call (docs/behaviour.md#once-per-try).

In-process, on Azurite, on the pipeline's clock: racing deliveries, a target slower than the
message's visibility, and a holder that died before recording its outcome.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from shared.execution.worker import CLAIM_FOR
from shared.storage.table_store import table_storage_from_connection_string
from tests.pipeline import START, Pipeline
from tests.targets import HeldAnswer, Target
from tests.wrapped_store import Wrapped, wrapping

MINUTE = timedelta(minutes=1)
EVERY_MINUTE = {"frequency": "Minute", "interval": 1}


def job_at(target: Target, path: str, **properties: Any) -> dict[str, Any]:
    action = {"type": "Http", "request": {"uri": target.url(path), "method": "POST"},
              "retryPolicy": {"retryType": "None"}}  # fmt: skip
    return {"startTime": START.isoformat(), "action": action} | properties


def calls_per_try(target: Target, path: str) -> Counter[tuple[str, str]]:
    return Counter(
        (call.headers["x-ms-scheduler-jobid"], call.headers["x-ms-scheduler-execution-id"])
        for call in target.received(path)
    )


def test_the_same_message_handed_to_two_executors_at_once_calls_each_try_once(
    pipeline: Pipeline, target: Target
) -> None:
    target.answer("/race", 200)
    jobs = [
        pipeline.put_job(f"race-{n}", job_at(target, "/race", recurrence=EVERY_MINUTE))
        for n in range(20)
    ]
    racing = ThreadPoolExecutor(2)
    gate = threading.Barrier(2)

    def twice(text: str, dequeue_count: int) -> None:
        def one() -> None:
            gate.wait()
            pipeline.handle(text, dequeue_count)

        for handled in [racing.submit(one) for _ in range(2)]:
            handled.result()

    pipeline.advance(3 * MINUTE, on_message=twice)
    racing.shutdown()
    calls = calls_per_try(target, "/race")
    assert len(calls) == 20 * 3
    assert set(calls.values()) == {1}, [key for key, count in calls.items() if count > 1]
    for job in jobs:
        assert [entry["status"] for entry in pipeline.history(job)] == ["Completed"] * 3


def test_a_target_slower_than_the_messages_visibility_is_called_once(
    pipeline: Pipeline, target: Target
) -> None:
    slow = HeldAnswer()
    target.respond("/slow", slow)
    job = pipeline.put_job("slow", job_at(target, "/slow"))
    received: list[str] = []
    pipeline.advance(MINUTE, on_message=lambda text, count: received.append(text))
    [text] = received  # taken off the queue here, handled by hand below
    first = threading.Thread(target=pipeline.handle, args=(text, 1))
    first.start()
    target.wait_for("/slow")
    # The message's visibility ran out while the call is under way: the host delivers it again.
    pipeline.clock.at += timedelta(seconds=31)
    pipeline.handle(text, 2)
    slow.release()
    first.join(30)
    assert len(target.received("/slow")) == 1
    assert [entry["status"] for entry in pipeline.history(job)] == ["Completed"]
    # The second delivery came back for a later look: it finds the try recorded, and does nothing.
    pipeline.clock.at += CLAIM_FOR
    pipeline.handle(text, 1)
    assert len(target.received("/slow")) == 1


def test_a_holder_that_died_before_recording_is_taken_over_after_the_claims_deadline(
    storage: str, target: Target
) -> None:
    class CrashingExecutor(Wrapped):
        """The first outcome write never lands, as if the host died between call and record."""

        crashes = 1

        def settle_job(self, stored: Any, document: Any, history: list[Any]) -> Any:
            if history and CrashingExecutor.crashes > 0:
                CrashingExecutor.crashes -= 1
                raise ConnectionError("the host died")
            return self.inner.settle_job(stored, document, history)

    real = table_storage_from_connection_string(storage)
    pipeline = Pipeline(storage, store=wrapping(real, executor=CrashingExecutor))
    target.answer("/died", 200)
    job = pipeline.put_job("died", job_at(target, "/died"))
    received: list[str] = []
    pipeline.advance(MINUTE, on_message=lambda text, count: received.append(text))
    [text] = received
    handle: Callable[[str, int], None] = pipeline.handle
    with contextlib.suppress(ConnectionError):
        handle(text, 1)
    assert len(target.received("/died")) == 1
    pipeline.clock.at += timedelta(seconds=30)
    handle(text, 2)  # redelivered while the claim is live: no second call
    assert len(target.received("/died")) == 1
    assert pipeline.history(job) == []
    pipeline.clock.at += CLAIM_FOR
    handle(text, 1)  # it came back after the deadline: the try was never recorded, taken over
    first, repeat = target.received("/died")
    assert (
        repeat.headers["x-ms-scheduler-execution-id"]
        == first.headers["x-ms-scheduler-execution-id"]
    )
    assert [entry["status"] for entry in pipeline.history(job)] == ["Completed"]
