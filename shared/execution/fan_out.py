"""Fan-out: when more rows are due than a tick moves itself, it hands ranges of the due index to
the execution queue, and every instance's executor moves them side by side.

A range is one due-index partition (a bucket and a shard) from a row key up to the end of the
tick's window. Its message is bounded work: the handler moves at most `Budget.per_range` rows
and hands the rest on as a new range message. Moving follows one rule, the tick's and the
handler's alike: a row is removed only after the message carrying it was sent. A handler that
fails and is retried, or a range message handled twice, so sends a row again only if it died
between that send and the removal, and the executor recognises the duplicate delivery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.execution import messages
from shared.execution.dispatch import Dispatcher, together
from shared.execution.messages import DueRange
from shared.logs import app_logger
from shared.storage.due_index import DueIndex, DueRow
from shared.storage.queue_http import QueueLike

log = app_logger("scheduler.fan_out")
SENDERS = 16
# A range whose handler failed at its last delivery goes back on the queue as a fresh message
# this much later, rather than to the poison queue: its rows are behind the watermark, and no
# tick would read them again.
RETRY_AFTER = timedelta(seconds=30)


@dataclass(frozen=True)
class Budget:
    """How much one invocation moves: a test sets it small, to see the fan-out at work."""

    inline: int = 5_000  # rows a tick moves itself; the rest of its window goes out as ranges
    per_range: int = 1_000  # rows one range message moves (one page of a Table query)
    ranges: int = 2_000  # range messages one tick sends, about: the next tick goes on from there


@dataclass(frozen=True)
class Share:
    """How the rows read from one partition's window are split."""

    inline: int  # the first this many are moved by the reader itself
    handed_on: bool  # the rest, from the first row not moved, go to a range message


def share(found: int, room: int) -> Share:
    """Split `found` rows (read at most `room` + 1, to know whether more are left) between the
    reader, which has room for `room` more, and a range message for the rest."""
    inline = max(0, min(found, room))
    return Share(inline, handed_on=found > inline)


def move(
    rows: Sequence[DueRow],
    dispatcher: Dispatcher,
    index: DueIndex,
    now: datetime,
    senders: Executor,
) -> None:
    """Send these rows to the execution queue (those due in the same second share a message),
    then remove the rows whose message was sent; raises the first failed send, after that."""
    groups = together(rows, lambda row: row.delivery)

    def send(group: list[DueRow]) -> Exception | None:
        try:
            dispatcher.send_group([row.delivery for row in group], now)
        except Exception as failure:  # the others go on; this group's rows stay in the index
            return failure
        return None

    failures = list(senders.map(send, groups))
    index.remove(
        row
        for group, failure in zip(groups, failures, strict=True)
        if failure is None
        for row in group
    )
    for failure in failures:
        if failure is not None:
            raise failure


class FanOut:
    """Sends range messages (for the tick) and moves the range of one (for the executor)."""

    def __init__(
        self,
        queue: QueueLike,
        index: DueIndex,
        dispatcher: Dispatcher,
        *,
        clock: Callable[[], datetime],
        budget: Budget | None = None,
        max_dequeue_count: int,
    ) -> None:
        """`max_dequeue_count`: the delivery at which the host gives a message up (host.json)."""
        self._queue, self._index, self._dispatcher = queue, index, dispatcher
        self._clock, self._max_dequeue_count = clock, max_dequeue_count
        self.budget = budget or Budget()

    def hand_on(self, ranges: Sequence[DueRange], senders: Executor) -> None:
        """Send a message for each range, visible at once; raises if any send failed."""
        list(senders.map(self._send, ranges))

    def handle(self, due_range: DueRange, dequeue_count: int) -> int:
        """Move the range a message names (at most `per_range` rows); how many rows it moved.

        Raises, so that the host delivers it again, if it could not finish; at its last
        delivery it hands the range on as a fresh message instead, if it can."""
        try:
            return self._move(due_range)
        except Exception:
            if dequeue_count < self._max_dequeue_count:
                raise
            log.exception("moving %s failed at its last delivery: sent again", due_range.partition)
            self._send(due_range, later=RETRY_AFTER)
            return 0

    def _move(self, due_range: DueRange) -> int:
        most = self.budget.per_range
        rows = self._index.rows(due_range.partition, due_range.low, due_range.high, most + 1)
        portion = share(len(rows), most)
        with ThreadPoolExecutor(SENDERS) as senders:
            move(rows[: portion.inline], self._dispatcher, self._index, self._clock(), senders)
        if portion.handed_on:  # sent only now: a redelivery before this point reads from `low`
            following = DueRange(due_range.partition, rows[portion.inline].row, due_range.high)
            self._send(following)
        return portion.inline

    def _send(self, due_range: DueRange, later: timedelta = timedelta(0)) -> None:
        messages.send(self._queue, due_range, visible_in=later)
