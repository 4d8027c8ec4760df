"""Counting a collection's jobs: a new job takes a place in a counter row with room, a deleted
or never-inserted one gives its place back, and counts that a crash left too high are corrected.

The rows and their allotments are counter_rows.py's; this module writes them, etag-checked.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)

from shared.storage.batches import unchanged_since, update_if_unchanged
from shared.storage.concurrency import CONTENDED_WRITE_ATTEMPTS, optimistic_attempts
from shared.storage.counter_rows import (
    COUNTER_ROWS,
    SPARE_PLACES,
    SPARES_KEPT_FOR_S,
    Counter,
    CounterRows,
    allotment_of,
    far_from_quota,
    roomiest_row,
    unbalanced,
)
from shared.storage.errors import ModifiedConcurrently, QuotaExceeded, StorageError
from shared.storage.keys import AFTER_COUNTERS, COUNTER_PREFIX, HISTORY_MARK
from shared.storage.table_http import TableLike
from shared.storage.table_terms import UpdateMode, transaction_failures

# A new job is counted first and inserted second (two single-entity writes: a batch costs three
# times the CPU of either, the multipart body). A crash in between leaves the count one too high,
# never too low: a place lost, never the quota exceeded. A creator that could not insert within
# COUNTED_INSERT_WITHIN of counting gives the place back instead; counter rows that no one wrote
# for COUNTERS_QUIET_FOR (far longer) therefore have no insert on its way, and a creator refused
# by the quota recounts the jobs and corrects such rows.
COUNTED_INSERT_WITHIN_S = 60.0
COUNTERS_QUIET_FOR = timedelta(minutes=5)
# A place taken longer ago than this is never given back, but left to the recount, which may
# already have taken it back (it waits a minute longer).
GIVE_BACK_WITHIN_S = COUNTERS_QUIET_FOR.total_seconds() - 60


class JobCounting:
    """The counter writes of every collection's jobs partition, in the jobs table."""

    def __init__(self, table: TableLike, *, spares_kept_for_s: float = SPARES_KEPT_FOR_S) -> None:
        self._table = table
        self.rows = CounterRows()
        self._spares_kept_for_s = spares_kept_for_s

    def read_counters(self, partition: str) -> dict[str, Counter]:
        """The collection's counter rows as stored now (and remembered as such)."""
        rows = self._table.query_entities(
            "PartitionKey eq @pk and RowKey ge @first and RowKey lt @after",
            parameters={"pk": partition, "first": COUNTER_PREFIX, "after": AFTER_COUNTERS},
        )
        counters = {
            row["RowKey"]: Counter(
                int(row["Jobs"]), row.metadata["etag"], row.metadata.get("timestamp")
            )
            for row in rows
        }
        self.rows.remember(partition, counters)
        return counters

    def count_new_job(
        self, partition: str, max_jobs: int | None, now: datetime | None
    ) -> tuple[str, float]:
        """Count one more job in a counter row with room; returns the row, and the moment
        (monotonic) before the write that counted it. QuotaExceeded when, as stored when it was
        counted, every row is at its allotment: the allotments add up to `max_jobs`, so then the
        collection holds that many jobs.

        A spare place of this process is taken first. Otherwise the creators of a collection
        that come while its previous counter write is under way are counted together, by the
        first of them (see `CounterRows`).
        """
        spare = self.rows.take_spare(partition, time.monotonic(), self._spares_kept_for_s)
        if spare is not None:
            return spare
        gathering, place = self.rows.join(partition)
        if place:
            gathering.done.wait()
        else:
            try:
                with self.rows.writer(partition):
                    creators = self.rows.close(partition, gathering)
                    rows, refusal = self._take_places(partition, creators, max_jobs, now)
                gathering.outcomes = [*rows, *(refusal() for _ in range(creators - len(rows)))]
            except BaseException as failure:
                gathering.outcomes = [failure] * gathering.creators
                raise
            finally:
                gathering.done.set()
        outcome = gathering.outcomes[place]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _take_places(
        self, partition: str, wanted: int, max_jobs: int | None, now: datetime | None
    ) -> tuple[list[tuple[str, float]], Callable[[], StorageError]]:
        """Count up to `wanted` new jobs in counter rows with room, each write etag-checked: the
        row of each place taken (and the moment before its write), and what refuses those left
        without one (QuotaExceeded, or ModifiedConcurrently when other processes kept winning
        the race). A row with plenty of room gives spare places too."""
        taken: list[tuple[str, float]] = []
        fresh, corrected = False, False
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            rows = self.rows.known(partition)
            if rows is None:
                rows, fresh = self.read_counters(partition), True
            counted = sum(counter.jobs for counter in rows.values())
            if len(taken) == wanted:
                return taken, functools.partial(QuotaExceeded, counted)
            if unbalanced(rows, max_jobs):
                if fresh:  # else look again first
                    self._balance(partition, rows, max_jobs)
                self.rows.forget(partition)
                fresh = False
                continue
            row, room = roomiest_row(rows, max_jobs)
            if room == 0:
                if not fresh:  # full as remembered: look again before refusing
                    self.rows.forget(partition)
                    continue
                if now is None or corrected or not self.correct_counts(partition, now):
                    return taken, functools.partial(QuotaExceeded, counted)
                corrected, fresh = True, False
                continue
            places = wanted - len(taken) if room is None else min(wanted - len(taken), room)
            spare = SPARE_PLACES if far_from_quota(rows, room, places, max_jobs) else 0
            counter = rows.get(row, Counter(0, None))
            since = time.monotonic()
            try:
                self._write_counter(partition, row, counter, counter.jobs + places + spare)
            except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
                self.rows.forget(partition)  # someone else wrote it: read them again
                fresh = False
                continue
            taken += [(row, since)] * places
            if spare and self.rows.add_spares(partition, row, spare, since):
                threading.Thread(
                    target=self._give_back_spares, name="spare-places", daemon=True
                ).start()
        return taken, lambda: ModifiedConcurrently("job")

    def _balance(self, partition: str, rows: dict[str, Counter], max_jobs: int | None) -> None:
        """Spread the count anew so that no row counts more than its allotment while another
        has room: the count of collections counted before allotments (eight rows, any row), or
        of one whose quota was lowered. One etag-checked batch; a lost race changes nothing."""
        left = sum(counter.jobs for counter in rows.values())
        spread: dict[str, int] = {}
        for row in COUNTER_ROWS:
            spread[row] = min(left, allotment_of(row, max_jobs) or 0)
            left -= spread[row]
        spread[COUNTER_ROWS[0]] += left  # over the quota: no row has room
        spread |= {row: 0 for row in rows if row not in spread}
        changes: list[Any] = []
        for row, jobs in spread.items():
            counter = rows.get(row, Counter(0, None))
            if jobs == counter.jobs:
                continue
            entity = {"PartitionKey": partition, "RowKey": row, "Jobs": jobs}
            if counter.etag is None:
                changes.append(("create", entity))
            else:
                mode = update_if_unchanged(counter.etag)
                changes.append(("update", entity, mode))
        with contextlib.suppress(*transaction_failures()):
            self._table.submit_transaction(changes)

    def _give_back_spares(self) -> None:
        """Until no spare place is left: give back those unused for SPARES_KEPT_FOR_S."""
        while True:
            time.sleep(self._spares_kept_for_s / 2)
            expired = self.rows.expired(time.monotonic(), self._spares_kept_for_s)
            if expired is None:
                return
            by_row: dict[tuple[str, str], list[float]] = {}
            for partition, row, since in expired:
                by_row.setdefault((partition, row), []).append(since)
            for (partition, row), taken in by_row.items():
                with contextlib.suppress(Exception):  # else lost until a recount
                    self.uncount(partition, row, min(taken), places=len(taken))
                for _ in taken:
                    self.rows.returned(partition, row)

    def uncount(self, partition: str, row: str, since: float, places: int = 1) -> None:
        """Give back places that no job uses (taken by a write made at `since`, monotonic),
        unless a recount may already have taken them back."""
        if time.monotonic() - since > GIVE_BACK_WITHIN_S:
            return
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            counter = (self.rows.known(partition) or {}).get(row)
            if counter is None or counter.etag is None:
                counter = self.read_counters(partition).get(row, Counter(0, None))
            if counter.jobs <= 0:
                return
            try:
                self._write_counter(partition, row, counter, max(counter.jobs - places, 0))
                return
            except (ResourceModifiedError, ResourceNotFoundError):
                self.rows.forget(partition)
        raise ModifiedConcurrently("job")

    def _write_counter(self, partition: str, row: str, counter: Counter, jobs: int) -> None:
        """Set a counter row to `jobs` if it is still as `counter` read it (created if it was
        absent); what it now holds is remembered."""
        entity = {"PartitionKey": partition, "RowKey": row, "Jobs": jobs}
        if counter.etag is None:
            metadata = self._table.create_entity(entity)
        else:
            metadata = self._table.update_entity(
                entity, mode=UpdateMode.REPLACE, **unchanged_since(counter.etag)
            )
        self.rows.note(partition, row, Counter(jobs, metadata["etag"]))

    def correct_counts(self, partition: str, now: datetime) -> bool:
        """Lower counter rows that count more jobs than the collection holds, which a creator's
        crash between counting and inserting leaves behind; only rows that nobody has written
        for COUNTERS_QUIET_FOR, so that no insert can still be on its way. Whether it did."""
        counters = self.read_counters(partition)
        quiet_since = now - COUNTERS_QUIET_FOR
        if any(c.written_at is None or c.written_at > quiet_since for c in counters.values()):
            return False
        excess = sum(c.jobs for c in counters.values()) - self._number_of_jobs(partition)
        corrections: list[Any] = []
        for row, counter in sorted(counters.items(), key=lambda item: -item[1].jobs):
            if excess <= 0 or counter.etag is None:  # every row read has an etag
                break
            lowered = max(counter.jobs - excess, 0)
            excess -= counter.jobs - lowered
            entity = {"PartitionKey": partition, "RowKey": row, "Jobs": lowered}
            corrections.append(("update", entity, update_if_unchanged(counter.etag)))
        self.rows.forget(partition)
        if not corrections:
            return False
        try:
            self._table.submit_transaction(corrections)
        except transaction_failures():
            return False  # a counter row changed meanwhile: it was not quiet after all
        return True

    def _number_of_jobs(self, partition: str) -> int:
        keys = self._table.query_entities(
            "PartitionKey eq @pk and RowKey gt @counters and RowKey lt @history",
            parameters={"pk": partition, "counters": AFTER_COUNTERS, "history": HISTORY_MARK},
            select=["RowKey"],
        )
        return sum(1 for _ in keys)


def uncounted(
    partition: str, counters: dict[str, Counter], spares: dict[str, int]
) -> tuple[str, tuple[Any, ...]]:
    """The counter row a deletion takes its job from, and the batch operation that does: the row
    that counts the most jobs (this process's spare places aside), which keeps the rows' room
    even and never takes a spare place."""
    row = max(
        counters,
        key=lambda name: counters[name].jobs - spares.get(name, 0),
        default=COUNTER_ROWS[0],
    )
    counter = counters.get(row, Counter(0, None))
    entity = {"PartitionKey": partition, "RowKey": row, "Jobs": max(counter.jobs - 1, 0)}
    if counter.etag is None:
        return row, ("upsert", entity)
    return row, ("update", entity, update_if_unchanged(counter.etag))
