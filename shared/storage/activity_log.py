"""The activity log's table: events by day, newest first, kept for 90 days.

A day's events share a partition (`yyyymmdd`), so a read of a time range touches only its days
and the daily clean-up drops whole days. Row keys are the event's time in ticks counted down
from a far date, then its id: a query reads a day newest first, and a page ends at a row key
the next page starts after.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

from azure.core.exceptions import ResourceExistsError
from azure.data.tables import UpdateMode

from shared.domain.wire import JsonObject, parse_iso, ticks
from shared.storage.batches import submit_batches
from shared.storage.group_commit import GroupCommit
from shared.storage.table_http import TableLike, TableServiceLike

ACTIVITY_TABLE = "activitylog"
_LAST_TICK = ticks(datetime(9999, 12, 31, tzinfo=UTC))
_DAY = timedelta(days=1)


def day_key(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y%m%d")


def row_key(instant: datetime, event_id: str) -> str:
    return f"{_LAST_TICK - ticks(instant):019d}-{event_id}"


class ActivityLog:
    def __init__(self, table: TableLike) -> None:
        self._table = table
        # A day's events share a partition: the events of requests answered at once share a
        # batch. An upsert, not an insert: the row key is the event's own (its id), and a batch
        # sent again after its answer was lost must not fail on its own rows.
        self._adds = GroupCommit(table)

    @classmethod
    def in_service(cls, service: TableServiceLike, table: str = ACTIVITY_TABLE) -> ActivityLog:
        with contextlib.suppress(ResourceExistsError):
            service.create_table(table)
        return cls(service.get_table_client(table))

    def add(self, event: JsonObject) -> None:
        at = parse_iso(str(event["eventTimestamp"]).replace("Z", "+00:00"))
        row = {
            "PartitionKey": day_key(at),
            "RowKey": row_key(at, str(event["eventDataId"])),
            "Event": json.dumps(event, separators=(",", ":")),
        }
        self._adds.write(("upsert", row, {"mode": UpdateMode.REPLACE}))

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
        for back in range(1, days_back + 1):
            partition = day_key(before - back * _DAY)
            rows = self._table.query_entities(
                "PartitionKey eq @day", parameters={"day": partition},
                select=["PartitionKey", "RowKey"],
            )  # fmt: skip
            submit_batches(self._table, (("delete", row) for row in rows))
