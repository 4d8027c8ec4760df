"""The local host's timer and queue triggers behave as the Functions host's do."""

from __future__ import annotations

import asyncio
import base64
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func
import pytest
from azure.storage.queue import QueueClient

from devhost.triggers import QueueSettings, QueueTrigger, TimerTrigger, is_disabled, triggers_of

WAIT_S = 20.0


class FakeClock:
    """Time that moves only when the trigger waits, by as long as it waits (plus any lateness)."""

    def __init__(self, start: datetime, lateness: timedelta = timedelta(0)) -> None:
        self.now = start
        self.lateness = lateness

    def read(self) -> datetime:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.now += timedelta(seconds=seconds) + self.lateness
        return False


def run_timer(schedule: str, clock: FakeClock, fires: int, work: Callable[[], None] = lambda: None) -> list[tuple[str, bool]]:
    seen: list[tuple[str, bool]] = []
    trigger: TimerTrigger

    def function(timer: object) -> None:
        seen.append((clock.now.strftime("%H:%M:%S"), timer.past_due))  # type: ignore[attr-defined]
        work()
        if len(seen) == fires:
            trigger.stop()

    trigger = TimerTrigger(function, "timer", schedule, clock=clock.read, wait=clock.wait)
    trigger.run()
    return seen


START = datetime(2026, 11, 22, 0, 2, 3, tzinfo=UTC)


def test_timer_fires_on_its_ncrontab_schedule_seconds_first() -> None:
    assert run_timer("0 */5 * * * *", FakeClock(START), 3) == [
        ("00:05:00", False), ("00:10:00", False), ("00:15:00", False),
    ]


def test_a_run_that_overruns_is_not_followed_by_catch_up_runs() -> None:
    clock = FakeClock(START)

    def twelve_minutes() -> None:
        clock.now += timedelta(minutes=12)

    assert run_timer("0 */5 * * * *", clock, 3, twelve_minutes) == [
        ("00:05:00", False), ("00:20:00", False), ("00:35:00", False),
    ]


def test_a_late_wake_up_is_past_due() -> None:
    late = FakeClock(START, lateness=timedelta(seconds=90))
    assert run_timer("0 */5 * * * *", late, 2) == [("00:06:30", True), ("00:11:30", True)]


def test_schedules_come_from_settings_and_bad_ones_fail_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICK", "*/10 * * * * *")
    assert run_timer("%TICK%", FakeClock(START), 2) == [("00:02:10", False), ("00:02:20", False)]
    with pytest.raises(KeyError, match="MISSING"):
        TimerTrigger(lambda timer: None, "timer", "%MISSING%")
    with pytest.raises(ValueError):
        TimerTrigger(lambda timer: None, "timer", "not a schedule")


def test_a_function_disabled_by_its_setting_gets_no_runner() -> None:
    app = func.FunctionApp()

    @app.timer_trigger(arg_name="tick", schedule="* * * * * *")
    def ticking(tick: object) -> None: ...

    @app.timer_trigger(arg_name="tick", schedule="* * * * * *")
    def resting(tick: object) -> None: ...

    assert is_disabled("resting", {"AzureWebJobs.resting.Disabled": "True"})
    assert not is_disabled("resting", {"AzureWebJobs.resting.Disabled": "false"})
    assert not is_disabled("resting", {})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AzureWebJobs.resting.Disabled", "true")
        runners = triggers_of(app.get_functions(), {}, "UseDevelopmentStorage=true")
    assert [runner._function.__name__ for runner in runners] == ["ticking"]


def test_a_failed_timer_run_does_not_stop_the_timer() -> None:
    calls = []
    clock = FakeClock(START)
    trigger: TimerTrigger

    def flaky(timer: object) -> None:
        calls.append(clock.now)
        if len(calls) == 2:
            trigger.stop()
        raise RuntimeError("boom")

    trigger = TimerTrigger(flaky, "timer", "0 * * * * *", clock=clock.read, wait=clock.wait)
    trigger.run()
    assert len(calls) == 2


# --- queue ------------------------------------------------------------------------------------

SETTINGS = QueueSettings(
    batch_size=4, new_batch_threshold=2, max_dequeue_count=3,
    visibility_timeout=timedelta(0), max_polling_interval=timedelta(milliseconds=200),
    lease=timedelta(seconds=3),
)  # fmt: skip


@pytest.fixture
def queue_name() -> str:
    return f"trigger-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def started(storage: str, queue_name: str) -> Iterator[Callable[[Callable[..., None]], QueueClient]]:
    triggers: list[QueueTrigger] = []

    def start(function: Callable[..., None], waiting: list[str] = []) -> QueueClient:  # noqa: B006
        """Start a trigger on the queue, after putting `waiting` messages on it."""
        queue = QueueClient.from_connection_string(storage, queue_name)
        if waiting:
            queue.create_queue()
            for text in waiting:
                send(queue, text)
        trigger = QueueTrigger(function, "msg", queue_name, storage, SETTINGS)
        triggers.append(trigger)
        threading.Thread(target=trigger.run, daemon=True).start()
        until(lambda: _exists(queue), "the trigger creates its queue")
        return queue

    yield start
    for trigger in triggers:
        trigger.stop()


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.02)


def _exists(queue: QueueClient) -> bool:
    try:
        queue.get_queue_properties()
        return True
    except Exception:
        return False


def send(queue: QueueClient, text: str) -> None:
    queue.send_message(base64.b64encode(text.encode()).decode())


def test_messages_arrive_decoded_and_are_deleted_after_success(started: Callable[..., QueueClient]) -> None:
    received: list[tuple[bytes, int]] = []
    queue = started(lambda msg: received.append((msg.get_body(), msg.dequeue_count)))
    for n in range(5):
        send(queue, f"message {n}")
    until(lambda: len(received) == 5, "five messages ran")
    assert sorted(received) == [(f"message {n}".encode(), 1) for n in range(5)]
    until(lambda: queue.get_queue_properties().approximate_message_count == 0, "the queue is empty")


def test_a_failing_message_is_retried_then_moved_to_the_poison_queue(
    started: Callable[..., QueueClient], storage: str, queue_name: str
) -> None:
    attempts: list[int] = []

    def failing(msg: object) -> None:
        attempts.append(msg.dequeue_count)  # type: ignore[attr-defined]
        raise RuntimeError("the target is down")

    queue = started(failing)
    send(queue, "doomed")
    poison = QueueClient.from_connection_string(storage, f"{queue_name}-poison")
    until(lambda: _exists(poison) and len(poison.peek_messages(max_messages=5)) == 1, "the message is in the poison queue")
    assert attempts == [1, 2, 3]
    assert base64.b64decode(poison.peek_messages()[0].content) == b"doomed"
    assert queue.peek_messages(max_messages=5) == []


def test_a_batch_runs_in_parallel(started: Callable[..., QueueClient]) -> None:
    # Four waiting messages are one batch (batchSize 4), and meet at a barrier: they can only
    # get past it if all four run at once. (Messages that trickle in one by one run at most
    # newBatchThreshold + 1 at a time, as in the Functions host: no new batch is fetched while
    # more than newBatchThreshold are in flight.)
    barrier = threading.Barrier(4, timeout=WAIT_S / 2)
    done: list[bytes] = []

    def meet(msg: object) -> None:
        barrier.wait()
        done.append(msg.get_body())  # type: ignore[attr-defined]

    started(meet, waiting=[f"parallel {n}" for n in range(4)])
    until(lambda: len(done) == 4, "all four got past the barrier together")


def test_a_long_run_keeps_its_message_hidden_and_a_second_host_does_not_get_it(
    started: Callable[..., QueueClient],
) -> None:
    """The hold is renewed while the function runs (3 s hold here, a 5 s run)."""
    calls: list[int] = []

    def slow(msg: Any) -> None:
        calls.append(msg.dequeue_count)
        time.sleep(5)

    queue = started(slow, waiting=["long"])
    started(slow)  # a second host on the same queue, as when the app is scaled out
    until(lambda: len(calls) == 1, "the message runs")
    time.sleep(5.5)
    assert calls == [1]
    until(lambda: queue.get_queue_properties().approximate_message_count == 0, "it is deleted")


def test_an_async_function_runs_on_the_event_loop_and_its_message_is_deleted(
    started: Callable[..., QueueClient],
) -> None:
    seen: list[str] = []

    async def waits(msg: Any) -> None:
        await asyncio.sleep(0.2)
        seen.append(msg.get_body().decode())

    queue = started(waits, waiting=["async"])
    until(lambda: seen == ["async"], "the coroutine completes")
    until(lambda: queue.get_queue_properties().approximate_message_count == 0, "it is deleted")
