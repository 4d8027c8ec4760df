"""The timer's tick: hand what the due index holds for the coming look-ahead to the queue.

The watermark says up to when everything due has been handed on; a tick continues from it, so
a late tick, missed ticks or a tick that stops at its limit lose nothing: the next one carries
on where it stopped (occurrences found late are run once and the rest postponed, by the
executor). A row is removed only after its message is sent; a tick that dies in between sends
it again, and the executor recognises the duplicate.

A tick moves at most `Budget.inline` rows itself. With a fan-out, it hands the rest of each
partition's window to a range message (shared.execution.fan_out), which any instance's
executor moves; the watermark passes a window only once its range messages are sent. Without
one, the tick stops at its budget and the next tick goes on from there.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from shared.execution.dispatch import Dispatcher
from shared.execution.fan_out import Budget, FanOut, move, share
from shared.execution.messages import DueRange
from shared.logs import app_logger
from shared.storage.due_index import BUCKET, DueIndex, DueRow, bucket_of, partitions_of, time_key
from shared.telemetry import current as telemetry

log = app_logger("scheduler.timer")
_SENDERS = 16
_BEGINNING = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TickReport:
    handed: int  # rows the tick moved to the queue itself
    watermark: datetime
    caught_up: bool
    ranges: int = 0  # range messages it handed on


def tick(
    index: DueIndex,
    dispatcher: Dispatcher,
    now: datetime,
    lookahead: timedelta,
    *,
    fan_out: FanOut | None = None,
    budget: Budget | None = None,
) -> TickReport:
    """Hand on every row due before now + look-ahead, within the budget (the fan-out's unless
    given), and advance the watermark past what was handed on."""
    budget = budget or (fan_out.budget if fan_out else Budget())
    until = now + lookahead
    cursor = index.watermark() or _first_row_bucket(index, until)
    handed = handed_on = 0
    recorded = False
    with ThreadPoolExecutor(_SENDERS) as senders:
        while cursor < until and handed_on < budget.ranges:
            if fan_out is None and handed >= budget.inline:
                break
            bucket = bucket_of(cursor)
            end = min(bucket + BUCKET, until)
            rows, ranges = _window(index, cursor, end, room=budget.inline - handed)
            # A failed send raises here, before the watermark moves.
            move(rows, dispatcher, index, now, senders)
            handed += len(rows)
            if ranges and fan_out is None:
                break  # the budget is spent inside this window: the next tick goes on from it
            if fan_out is not None and ranges:
                fan_out.hand_on(ranges, senders)
                handed_on += len(ranges)
            cursor = end
            if not rows and not ranges and until - cursor > BUCKET:  # a long empty stretch
                following = index.first_bucket_after(bucket)
                cursor = until if following is None else max(cursor, min(following, until))
            index.set_watermark(cursor, ticked_at=now)
            recorded = True
    if not recorded:  # nothing moved the watermark, but /health tells when the timer last ran
        index.set_watermark(cursor, ticked_at=now)
    if handed or handed_on:
        log.info(
            "tick handed %d due attempts to the queue and %d ranges on, watermark %s",
            handed,
            handed_on,
            cursor,
        )
    telemetry().ticked(handed)
    return TickReport(handed, cursor, caught_up=cursor >= until, ranges=handed_on)


def _window(
    index: DueIndex, since: datetime, until: datetime, room: int
) -> tuple[list[DueRow], list[DueRange]]:
    """The rows of [since, until) (one bucket) the tick moves itself, up to `room`, and a range
    for each partition whose rest it does not. Each partition is read for at most the room
    left, and one row more: the first of its range."""
    low, high = time_key(since), time_key(until)
    moved: list[DueRow] = []
    ranges: list[DueRange] = []
    for partition in partitions_of(bucket_of(since)):
        left = room - len(moved)
        rows = index.rows(partition, low, high, most=max(left, 0) + 1)
        portion = share(len(rows), left)
        moved += rows[: portion.inline]
        if portion.handed_on:
            ranges.append(DueRange(partition, rows[portion.inline].row, high))
    return moved, ranges


def _first_row_bucket(index: DueIndex, until: datetime) -> datetime:
    """Where the very first tick starts: the earliest bucket holding anything."""
    first = index.first_bucket_after(_BEGINNING)
    return until if first is None else min(first, until)
