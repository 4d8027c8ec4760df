"""The tick at scale (docs/architecture.md#fan-out): with more rows due than a tick moves itself,
ranges of the due index go to the queue as bounded work, and every attempt reaches the
execution queue exactly once, whichever messages run twice or fail midway. On real Azurite,
with a budget set small and the clock in the test's hands."""

from __future__ import annotations

import base64
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from azure.storage.queue import QueueClient

from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.ids import CollectionId, JobId
from shared.execution.dispatch import Dispatcher, together
from shared.execution.fan_out import Budget, FanOut, Share, share
from shared.execution.messages import MOST_PER_MESSAGE, Deliveries, DueRange, from_wire
from shared.execution.timer import tick
from shared.storage.due_index import BUCKET, DueRow, bucket_of, partitions_of, time_key
from tests.pipeline import MAX_DELIVERIES, START, Pipeline

ATTEMPTS = 300
SMALL = Budget(inline=40, per_range=8, ranges=100)
FIRST_BUCKET = bucket_of(START) + BUCKET
# Three attempts due in each of 100 seconds, over two buckets: 16 partitions of about 19 rows.
DUE = [FIRST_BUCKET + timedelta(seconds=6 * (n // 3)) for n in range(ATTEMPTS)]
AFTER_ALL_DUE = FIRST_BUCKET + 2 * BUCKET + timedelta(seconds=1)  # every message visible at once
ONLY_NOW = timedelta(microseconds=1)  # the look-ahead: the tick reads up to the clock


class InjectedFailure(RuntimeError):
    """A storage send that failed, as a 503 would."""


class FailingSends(Dispatcher):
    """The app's dispatcher, whose sends fail at the calls named (counted from 1)."""

    def __init__(self, pipeline: Pipeline, failing: set[int]) -> None:
        super().__init__(pipeline.queue, pipeline.index, horizon=timedelta(0))
        self.failing, self.calls = failing, 0
        self._count = threading.Lock()

    def send_group(self, deliveries: Sequence[Delivery], now: datetime) -> None:
        with self._count:
            self.calls += 1
            fails = self.calls in self.failing
        if fails:
            raise InjectedFailure(f"send {self.calls}")
        super().send_group(deliveries, now)


@dataclass
class Drained:
    delivered: Counter[tuple[str, datetime]] = field(default_factory=Counter)
    moved_per_range: list[int] = field(default_factory=list)
    range_failures: int = 0


@pytest.fixture
def pipeline(storage: str) -> Pipeline:
    pipeline = Pipeline(storage)
    pipeline.clock.at = AFTER_ALL_DUE
    return pipeline


def fan_out(pipeline: Pipeline, dispatcher: Dispatcher | None = None) -> FanOut:
    return FanOut(pipeline.queue, pipeline.index, dispatcher or pipeline.dispatcher,
                  clock=pipeline.clock, budget=SMALL, max_dequeue_count=MAX_DELIVERIES)  # fmt: skip


def index_attempts(pipeline: Pipeline) -> set[tuple[str, datetime]]:
    """The test's attempts, written to the due index as the dispatcher writes later ones."""
    for n, due in enumerate(DUE):
        job = JobId(pipeline.collection, f"job-{n}")
        pipeline.index.add(Delivery(job, START, Pending(Attempt(due), due)))
    return {(f"job-{n}", due) for n, due in enumerate(DUE)}


def rows_left(pipeline: Pipeline) -> list[DueRow]:
    low, high = time_key(FIRST_BUCKET), time_key(FIRST_BUCKET + 2 * BUCKET)
    return [row for bucket in (FIRST_BUCKET, FIRST_BUCKET + BUCKET) for partition in partitions_of(bucket)
            for row in pipeline.index.rows(partition, low, high, most=ATTEMPTS)]  # fmt: skip


def drain(
    pipeline: Pipeline,
    storage: str,
    mover: FanOut,
    *,
    handle: Callable[[FanOut, DueRange, int], int] | None = None,
) -> Drained:
    """Take every message off the queue, as the executor function would: a range message is
    moved (again later if it raised, as the host retries it), an execution message is noted."""
    incoming = QueueClient.from_connection_string(storage, pipeline.queue.queue_name)
    drained = Drained()
    while batch := list(next(incoming.receive_messages(messages_per_page=32).by_page(), [])):
        for message in batch:
            received = from_wire(base64.b64decode(message.content).decode())
            if isinstance(received, Deliveries):
                for delivery in received.carried:
                    drained.delivered[(delivery.job.name, delivery.pending.due)] += 1
            else:
                try:
                    moved = (handle or FanOut.handle)(mover, received, message.dequeue_count or 1)
                except InjectedFailure:
                    drained.range_failures += 1
                    incoming.update_message(message, visibility_timeout=0)
                    continue
                drained.moved_per_range.append(moved)
            incoming.delete_message(message)
    return drained


def exactly_once(expected: set[tuple[str, datetime]], drained: Drained) -> bool:
    return set(drained.delivered) == expected and set(drained.delivered.values()) == {1}


# --- what to hand out: rows counted against the budget ---


@pytest.mark.parametrize(
    ("found", "room", "expected"),
    [
        pytest.param(5, 10, Share(inline=5, handed_on=False), id="all-fit"),
        pytest.param(10, 10, Share(inline=10, handed_on=False), id="exactly-the-room"),
        pytest.param(11, 10, Share(inline=10, handed_on=True), id="one-more-than-the-room"),
        pytest.param(1, 0, Share(inline=0, handed_on=True), id="no-room-left"),
        pytest.param(0, 0, Share(inline=0, handed_on=False), id="nothing-found"),
    ],
)
def test_rows_beyond_the_room_go_to_a_range(found: int, room: int, expected: Share) -> None:
    assert share(found, room) == expected


# --- on Azurite ---


def test_a_tick_over_its_budget_hands_ranges_on_and_every_attempt_is_queued_once(
    pipeline: Pipeline, storage: str
) -> None:
    expected = index_attempts(pipeline)
    mover = fan_out(pipeline)
    report = tick(pipeline.index, pipeline.dispatcher, pipeline.clock(), ONLY_NOW, fan_out=mover)
    assert report.handed == SMALL.inline
    assert 8 < report.ranges <= 16  # a partition at most one range: the rest of its window
    assert report.caught_up and pipeline.index.watermark() == report.watermark
    drained = drain(pipeline, storage, mover)
    assert exactly_once(expected, drained)
    assert max(drained.moved_per_range) == SMALL.per_range  # bounded work, handed on beyond it
    assert sum(drained.moved_per_range) == ATTEMPTS - SMALL.inline
    assert rows_left(pipeline) == []


def test_a_range_message_handled_twice_moves_no_attempt_twice(
    pipeline: Pipeline, storage: str
) -> None:
    expected = index_attempts(pipeline)
    mover = fan_out(pipeline)
    tick(pipeline.index, pipeline.dispatcher, pipeline.clock(), ONLY_NOW, fan_out=mover)

    def twice(mover: FanOut, due_range: DueRange, dequeue_count: int) -> int:
        return mover.handle(due_range, dequeue_count) + mover.handle(due_range, dequeue_count)

    drained = drain(pipeline, storage, mover, handle=twice)
    assert exactly_once(expected, drained)
    assert rows_left(pipeline) == []


def test_a_range_handler_that_fails_midway_is_retried_and_moves_each_attempt_once(
    pipeline: Pipeline, storage: str
) -> None:
    expected = index_attempts(pipeline)
    tick(pipeline.index, pipeline.dispatcher, pipeline.clock(), ONLY_NOW, fan_out=fan_out(pipeline))
    # The tick sent its own messages with the app's dispatcher; the handlers' third send fails.
    failing = FailingSends(pipeline, failing={3})
    drained = drain(pipeline, storage, fan_out(pipeline, failing))
    assert drained.range_failures == 1
    assert failing.calls > 3  # the failed one came midway: sends went on after it
    assert exactly_once(expected, drained)
    assert rows_left(pipeline) == []


def test_a_tick_that_dies_halfway_loses_nothing_and_the_next_goes_on(
    pipeline: Pipeline, storage: str
) -> None:
    expected = index_attempts(pipeline)
    failing = FailingSends(pipeline, failing={4})  # the tick's own sends, within its inline rows
    with pytest.raises(InjectedFailure):
        tick(pipeline.index, failing, pipeline.clock(), ONLY_NOW, fan_out=fan_out(pipeline))
    assert pipeline.index.watermark() is None  # nothing counted as handed on
    report = tick(
        pipeline.index, pipeline.dispatcher, pipeline.clock(), ONLY_NOW, fan_out=fan_out(pipeline)
    )
    assert report.caught_up
    drained = drain(pipeline, storage, fan_out(pipeline))
    assert exactly_once(expected, drained)
    assert rows_left(pipeline) == []


def test_without_a_fan_out_a_tick_stops_at_its_budget_and_the_next_goes_on(
    pipeline: Pipeline, storage: str
) -> None:
    expected = index_attempts(pipeline)
    reports = []
    for _ in range(ATTEMPTS // SMALL.inline + 1):
        reports.append(
            tick(pipeline.index, pipeline.dispatcher, pipeline.clock(), ONLY_NOW, budget=SMALL)
        )
    assert [report.handed for report in reports] == [SMALL.inline] * 7 + [
        ATTEMPTS - 7 * SMALL.inline
    ]
    assert [report.caught_up for report in reports] == [False] * 7 + [True]
    assert exactly_once(expected, drain(pipeline, storage, fan_out(pipeline)))


def test_a_range_failing_at_its_last_delivery_goes_back_on_the_queue_not_to_poison(
    pipeline: Pipeline, storage: str
) -> None:
    index_attempts(pipeline)
    tick(pipeline.index, pipeline.dispatcher, pipeline.clock(), ONLY_NOW, fan_out=fan_out(pipeline))
    incoming = QueueClient.from_connection_string(storage, pipeline.queue.queue_name)
    second_bucket = FIRST_BUCKET + BUCKET  # the tick moved none of its rows itself
    whole = DueRange(
        partitions_of(second_bucket)[0], time_key(second_bucket), time_key(second_bucket + BUCKET)
    )
    always_failing = fan_out(pipeline, FailingSends(pipeline, failing=set(range(1, 100))))
    waiting = _message_count(incoming)
    with pytest.raises(InjectedFailure):
        always_failing.handle(whole, 4)
    assert always_failing.handle(whole, 5) == 0  # the fifth and last: handed on, later
    assert _message_count(incoming) == waiting + 1
    assert len(rows_left(pipeline)) == ATTEMPTS - SMALL.inline  # nothing moved, nothing lost


def _message_count(queue: QueueClient) -> int:
    return int(queue.get_queue_properties().approximate_message_count or 0)


@pytest.mark.parametrize(
    ("due_together", "sizes"),
    [(1, [1]), (64, [64]), (65, [33, 32]), (80, [40, 40]), (129, [43, 43, 43])],
)
def test_a_second_that_needs_several_messages_gets_them_of_even_size(due_together: int, sizes: list[int]) -> None:
    def due_at(due: datetime) -> Delivery:
        return Delivery(JobId(CollectionId("sub", "rg", "jc"), "job"), START, Pending(Attempt(due), due))

    deliveries = [due_at(START + timedelta(seconds=5)) for _ in range(due_together)]
    apart = due_at(START + timedelta(seconds=9))
    groups = together([*deliveries, apart], lambda delivery: delivery)
    assert sorted(len(group) for group in groups) == sorted([*sizes, 1])
    assert all(len(group) <= MOST_PER_MESSAGE for group in groups)
