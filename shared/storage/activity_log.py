"""The activity log's table: events by day, newest first, kept for 90 days.

A day's events share a partition (`yyyymmdd`), so a read of a time range touches only its days
and the daily clean-up drops whole days. Row keys are the event's time in ticks counted down
from a far date, then its id: a query reads a day newest first, and a page ends at a row key
the next page starts after.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

from azure.core.exceptions import ResourceExistsError

from shared.domain.wire import JsonObject, parse_iso, ticks
from shared.storage.batches import submit_batches
from shared.storage.table_http import TableLike, TableServiceLike
from shared.storage.table_terms import UpdateMode

ACTIVITY_TABLE = "activitylog"
# Events are written behind the answer: those of a request wait at most this long, gathered
# with every other event of the process meanwhile into one batch per day. A crash (or a kill)
# loses those not yet written; an orderly exit writes them (`_write_all_held`).
WRITE_BEHIND_S = 1.0
# Events held again after failed writes, at most (the newest are kept) while storage is down.
MOST_HELD = 50_000
log = logging.getLogger(__name__)
_LAST_TICK = ticks(datetime(9999, 12, 31, tzinfo=UTC))
_DAY = timedelta(days=1)


def day_key(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y%m%d")


def row_key(instant: datetime, event_id: str) -> str:
    return f"{_LAST_TICK - ticks(instant):019d}-{event_id}"


class ActivityLog:
    def __init__(self, table: TableLike, *, write_behind_s: float = WRITE_BEHIND_S) -> None:
        self._table = table
        self.write_behind_s = write_behind_s
        # Events kept in memory until the next write, and that write if one is scheduled.
        self._held: list[dict[str, str]] = []
        self._write_scheduled: threading.Timer | None = None
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # one write at a time: rows go out in arrival order
        _LIVE.add(self)

    @classmethod
    def in_service(cls, service: TableServiceLike, table: str = ACTIVITY_TABLE) -> ActivityLog:
        with contextlib.suppress(ResourceExistsError):
            service.create_table(table)
        return cls(service.get_table_client(table))

    def add(self, event: JsonObject) -> None:
        """Keep an event: held, and written within `write_behind_s` (see WRITE_BEHIND_S)."""
        at = parse_iso(str(event["eventTimestamp"]).replace("Z", "+00:00"))
        row = {
            "PartitionKey": day_key(at),
            "RowKey": row_key(at, str(event["eventDataId"])),
            "Event": json.dumps(event, separators=(",", ":")),
        }
        with self._lock:
            self._held.append(row)
        self._schedule_write()

    def _schedule_write(self) -> None:
        """A write of what is held, WRITE_BEHIND_S from now, unless one is scheduled."""
        with self._lock:
            if self._write_scheduled is not None:
                return
            timer = threading.Timer(self.write_behind_s, self._write_held_safely)
            timer.daemon = True
            self._write_scheduled = timer
        timer.start()

    def flush(self) -> None:
        """Write every event held so far (a day's events in batches of up to 100 each; an
        upsert, not an insert: a row key is the event's own id, and a batch sent again after
        its answer was lost must not fail on its own rows). On failure they are held again."""
        with self._writing:
            with self._lock:
                rows, self._held = self._held, []
                scheduled, self._write_scheduled = self._write_scheduled, None
            if scheduled is not None:
                scheduled.cancel()
            by_day: dict[str, list[dict[str, str]]] = {}
            for row in rows:
                by_day.setdefault(row["PartitionKey"], []).append(row)
            written: set[str] = set()
            try:
                for day, events in by_day.items():
                    upserts = [("upsert", row, {"mode": UpdateMode.REPLACE}) for row in events]
                    submit_batches(self._table, upserts)
                    written.add(day)
            except BaseException:
                unwritten = [row for row in rows if row["PartitionKey"] not in written]
                with self._lock:
                    self._held[:0] = unwritten[-MOST_HELD:]
                self._schedule_write()  # tried again later, whoever asked for this write
                raise

    def _write_held_safely(self) -> None:
        """The scheduled write: a failure keeps the events for the next one (see `flush`)."""
        try:
            self.flush()
        except Exception:
            log.exception("activity log events could not be written yet; kept for the next write")

    def events(
        self,
        since: datetime,
        until: datetime,
        matches: Callable[[JsonObject], bool],
        *,
        after: str = "",
    ) -> Iterator[tuple[str, JsonObject]]:
        """Events from `until` back to `since` that `matches` accepts, newest first, each with
        its place (`yyyymmdd:rowkey`); `after` a place: only events older than it."""
        self.flush()  # this process's own events are read back at once
        day = until
        after_day, _, after_row = after.partition(":")
        while day_key(day) >= day_key(since):
            partition = day_key(day)
            day -= _DAY
            if after and partition > after_day:
                continue
            query = "PartitionKey eq @day and RowKey ge @newest and RowKey le @oldest"
            newest, oldest = row_key(until, ""), row_key(since, "~")
            if after and partition == after_day:
                query += " and RowKey gt @after"
            rows = self._table.query_entities(
                query,
                parameters={"day": partition, "newest": newest, "oldest": oldest,
                            "after": after_row},
            )  # fmt: skip
            for row in rows:
                found: JsonObject = json.loads(row["Event"])
                if matches(found):
                    yield f"{partition}:{row['RowKey']}", found

    def remove_before(self, before: datetime, *, days_back: int = 30) -> None:
        """Drop the days wholly before `before` (the `days_back` days before it: the clean-up
        runs daily, so older days are gone already)."""
        self.flush()  # else events held of those days would be written after they were dropped
        for back in range(1, days_back + 1):
            partition = day_key(before - back * _DAY)
            rows = self._table.query_entities(
                "PartitionKey eq @day", parameters={"day": partition},
                select=["PartitionKey", "RowKey"],
            )  # fmt: skip
            submit_batches(self._table, (("delete", row) for row in rows))


_LIVE: weakref.WeakSet[ActivityLog] = weakref.WeakSet()


@atexit.register
def _write_all_held() -> None:
    """At an orderly exit, what every activity log of the process still holds is written."""
    for activity_log in list(_LIVE):
        with contextlib.suppress(Exception):
            activity_log.flush()
