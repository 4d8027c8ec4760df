"""The timer's tick: hand what the due index holds for the coming look-ahead to the queue.

The watermark says up to when everything due has been handed over; a tick continues from it, so
a late tick, missed ticks or a tick that stops at its limit lose nothing: the next one carries
on where it stopped (occurrences found late are run once and the rest postponed, by the
executor). A row is removed only after its message is sent; a tick that dies in between sends
it again, and the executor recognises the duplicate.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from shared.execution.dispatch import Dispatcher
from shared.storage.due_index import BUCKET, DueIndex, bucket_of

log = logging.getLogger("scheduler.timer")
MOST_PER_TICK = 20_000  # at ~250 sends/s per thread, well inside a tick's minute
_SENDERS = 16
_BEGINNING = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TickReport:
    handed: int
    watermark: datetime
    caught_up: bool


def tick(
    index: DueIndex, dispatcher: Dispatcher, now: datetime, lookahead: timedelta
) -> TickReport:
    """Send every row due before now + look-ahead (at most MOST_PER_TICK), advance the watermark."""
    until = now + lookahead
    cursor = index.watermark() or _first_row_bucket(index, until)
    handed, recorded = 0, False
    with ThreadPoolExecutor(_SENDERS) as senders:
        while cursor < until and handed < MOST_PER_TICK:
            bucket = bucket_of(cursor)
            end = min(bucket + BUCKET, until)
            rows = index.due(cursor, end)
            # Any failed send raises here, before the rows go and the watermark moves.
            dispatcher.queue([row.delivery for row in rows], now, senders)
            index.remove(rows)
            handed += len(rows)
            cursor = end
            if not rows and until - cursor > BUCKET:  # a long empty stretch: jump over it
                following = index.first_bucket_after(bucket)
                cursor = until if following is None else max(cursor, min(following, until))
            index.set_watermark(cursor, ticked_at=now)
            recorded = True
    if not recorded:  # nothing to move, but /health tells when the timer last ran
        index.set_watermark(cursor, ticked_at=now)
    if handed:
        log.info("tick handed %d due attempts to the queue, watermark %s", handed, cursor)
    return TickReport(handed, cursor, caught_up=cursor >= until)


def _first_row_bucket(index: DueIndex, until: datetime) -> datetime:
    """Where the very first tick starts: the earliest bucket holding anything."""
    first = index.first_bucket_after(_BEGINNING)
    return until if first is None else min(first, until)
