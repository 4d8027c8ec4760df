"""The due index: pending attempts too far ahead to wait on the queue, by the time they are due.

A row lives in the partition of its due time's bucket (5 minutes) and one of a few shards (by
job), so a timer tick reads only the partitions of the window it covers, and writes spread
over several partitions (Azure serves about 2,000 entities/s per partition). Row keys begin
with the due time in ticks: a tick asks each partition for one key range, and reads no row that
is not due. The timer's watermark (how far it has handed rows to the queue) is one more row.
"""

from __future__ import annotations

import contextlib
import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError

from shared.domain.attempts import Delivery
from shared.domain.wire import EPOCH, iso, parse_iso, ticks
from shared.storage.batches import submit_batches
from shared.storage.group_commit import GroupCommit
from shared.storage.job_codec import decode_delivery, encode_delivery
from shared.storage.keys import job_row, jobs_partition
from shared.storage.table_http import TableLike, TableServiceLike
from shared.storage.table_terms import UpdateMode

DUE_TABLE = "dueattempts"
BUCKET = timedelta(minutes=5)
SHARDS = 8
# Bucket partitions are "<yyyymmddHHMM>-<shard>"; the watermark's sorts after all of them.
_WATERMARK = ("~watermark", "timer")
_MOST_PER_PAGE = 1_000  # what Table Storage returns in one response at most


@dataclass(frozen=True)
class DueRow:
    """A row the timer read: what to send, and its keys so that it can be removed after."""

    partition: str
    row: str
    delivery: Delivery


class DueIndex:
    def __init__(self, table: TableLike) -> None:
        self._table = table
        # Writers that index attempts of one bucket and shard at once share a batch.
        self._adds = GroupCommit(table)

    @classmethod
    def in_service(cls, service: TableServiceLike, table: str = DUE_TABLE) -> DueIndex:
        """The index in `table` of the service, created if it is not there yet."""
        with contextlib.suppress(ResourceExistsError):
            service.create_table(table)
        return cls(service.get_table_client(table))

    def add(self, delivery: Delivery) -> None:
        due = delivery.pending.due
        row = {
            "PartitionKey": _partition(bucket_of(due), _shard(delivery)),
            "RowKey": _row(delivery),
            "Message": json.dumps(encode_delivery(delivery), separators=(",", ":")),
        }
        self._adds.write(("upsert", row, {"mode": UpdateMode.REPLACE}))

    def withdraw(self, deliveries: Iterable[Delivery]) -> None:
        """Remove the rows `add` wrote for these (those already gone are no matter)."""
        for delivery in deliveries:
            with contextlib.suppress(ResourceNotFoundError):
                self._table.delete_entity(
                    _partition(bucket_of(delivery.pending.due), _shard(delivery)), _row(delivery)
                )

    def due(self, since: datetime, until: datetime) -> list[DueRow]:
        """The rows due in [since, until), all in `since`'s bucket, every shard, in due order."""
        bucket = bucket_of(since)
        # A row key is "<due ticks>-<job>...": it sorts after its bare ticks, before the next.
        low, high = _ticks_key(since), _ticks_key(until)
        found: list[DueRow] = []
        for shard in range(SHARDS):
            partition = _partition(bucket, shard)
            entities = self._table.query_entities(
                "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
                parameters={"pk": partition, "low": low, "high": high},
            )
            for entity in entities:
                message = json.loads(entity["Message"])
                found.append(DueRow(partition, entity["RowKey"], decode_delivery(message)))
        found.sort(key=lambda row: row.row)
        return found

    def rows(self, partition: str, low: str, high: str, most: int) -> list[DueRow]:
        """At most `most` rows of one partition with keys in [low, high), in key (due) order."""
        entities = self._table.query_entities(
            "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
            parameters={"pk": partition, "low": low, "high": high},
            results_per_page=min(most, _MOST_PER_PAGE),
        )
        found: list[DueRow] = []
        for entity in entities:
            message = json.loads(entity["Message"])
            found.append(DueRow(partition, entity["RowKey"], decode_delivery(message)))
            if len(found) >= most:  # pages are fetched as they are read: fetch no more
                break
        return found

    def first_bucket_after(self, bucket: datetime) -> datetime | None:
        """The earliest bucket after `bucket` that holds any row (to skip long empty stretches)."""
        entities = self._table.query_entities(
            "PartitionKey gt @after and PartitionKey lt @watermark",
            parameters={"after": _partition(bucket, SHARDS), "watermark": _WATERMARK[0]},
            select=["PartitionKey"],
            results_per_page=1,
        )
        for entity in entities:
            return datetime.strptime(entity["PartitionKey"][:12], "%Y%m%d%H%M").replace(tzinfo=UTC)
        return None

    def remove(self, rows: Iterable[DueRow]) -> None:
        by_partition: dict[str, list[str]] = {}
        for row in rows:
            by_partition.setdefault(row.partition, []).append(row.row)
        for partition, keys in by_partition.items():
            operations = (("delete", {"PartitionKey": partition, "RowKey": key}) for key in keys)
            submit_batches(self._table, operations)

    def watermark(self) -> datetime | None:
        try:
            return parse_iso(self._table.get_entity(*_WATERMARK)["Until"])
        except ResourceNotFoundError:
            return None

    def set_watermark(self, until: datetime, ticked_at: datetime) -> None:
        """Record how far the timer has handed rows to the queue, and when it last did."""
        partition, row = _WATERMARK
        self._table.upsert_entity(
            {"PartitionKey": partition, "RowKey": row, "Until": iso(until), "At": iso(ticked_at)},
            mode=UpdateMode.REPLACE,
        )

    def last_tick(self) -> datetime | None:
        """When the timer last moved the watermark (None before its first tick)."""
        try:
            ticked_at = self._table.get_entity(*_WATERMARK).get("At")
        except ResourceNotFoundError:
            return None
        return parse_iso(ticked_at) if ticked_at else None


def bucket_of(instant: datetime) -> datetime:
    """The start of the bucket that holds `instant`."""
    return instant - (instant - EPOCH) % BUCKET


def partitions_of(bucket: datetime) -> list[str]:
    """The partitions (one per shard) that hold the rows of `bucket`."""
    return [_partition(bucket, shard) for shard in range(SHARDS)]


def time_key(instant: datetime) -> str:
    """The row key bound for `instant`: keys of rows due at or after it sort at or after it."""
    return _ticks_key(instant)


def _partition(bucket: datetime, shard: int) -> str:
    return f"{bucket:%Y%m%d%H%M}-{shard}"


def _shard(delivery: Delivery) -> int:
    job = delivery.job
    return zlib.crc32(f"{jobs_partition(job.collection)}/{job_row(job)}".encode()) % SHARDS


def _ticks_key(instant: datetime) -> str:
    return f"{ticks(instant):020d}"


def _row(delivery: Delivery) -> str:
    """Due time first (so a range of keys is a range of time), then what makes it unique: the
    definition too, so that a redefinition refused after it was indexed (412, quota) replaces
    no row of the definition that stays."""
    job, attempt = delivery.job, delivery.pending.attempt
    defined = _ticks_key(delivery.defined_at)
    unique = f"{jobs_partition(job.collection)}:{job_row(job)}:{attempt.history_id}:{defined}"
    return f"{_ticks_key(delivery.pending.due)}-{unique}"
