"""A job's history in storage: its entries in the job's own partition, as rows
"~<job row>:<entry id>" (see keys.py), each entry whole as JSON with its status beside it (which
listings filter on). Entry ids sort newest first (shared/domain/history.py).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from shared.domain.history import HistoryEntry, HistoryProperties
from shared.domain.ids import JobId
from shared.domain.job_definition import HistoryStatus
from shared.domain.wire import JsonObject
from shared.storage.batches import LARGEST_BATCH, LARGEST_QUERY_PAGE, submit_batches
from shared.storage.documents import PageBounds, as_json
from shared.storage.keys import history_range, jobs_partition
from shared.storage.table_http import TableLike
from shared.storage.table_terms import transaction_failures


class History:
    """Every job's history, in the jobs table."""

    def __init__(self, table: TableLike) -> None:
        self._table = table

    def add(self, job: JobId, entries: list[HistoryEntry]) -> None:
        """Record execution attempts as (entry id, entry); ids order them, newest first."""
        submit_batches(self._table, (("upsert", history_entity(job, *entry)) for entry in entries))

    def entries(self, job: JobId, status: HistoryStatus | None = None) -> list[HistoryEntry]:
        """A job's history, newest first, as (id, entry); optionally only one status."""
        low, _ = history_range(job)
        found = self._rows(job, status, after="")
        return [(entity["RowKey"][len(low) :], json.loads(entity["Document"])) for entity in found]

    def page(
        self, job: JobId, bounds: PageBounds, status: HistoryStatus | None = None
    ) -> tuple[list[HistoryEntry], bool]:
        """A page of a job's history as (id, entry), newest first (entry ids sort newest first),
        optionally only one status; and whether more follow. It reads `count` + 1 entries, and
        only the keys of those it skips."""
        count, after, skip = bounds.count, bounds.after, bounds.skip
        low, _ = history_range(job)
        if skip:
            keys = self._rows(job, status, after, per_page=skip, select=["RowKey"])
            skipped = list(itertools.islice(keys, skip))
            if len(skipped) < skip:
                return [], False
            after = skipped[-1]["RowKey"][len(low) :]
        rows = self._rows(job, status, after, per_page=count + 1)
        found = [
            (entity["RowKey"][len(low) :], json.loads(entity["Document"]))
            for entity in itertools.islice(rows, count + 1)
        ]
        return found[:count], len(found) > count

    def _rows(
        self,
        job: JobId,
        status: HistoryStatus | None,
        after: str,
        *,
        per_page: int | None = None,
        select: list[str] | None = None,
    ) -> Iterator[Any]:
        """A job's history rows in key order (newest first), after the entry id `after`, read
        `per_page` at a time (the service's own limit, 1,000, when None)."""
        low, high = history_range(job)
        query = "PartitionKey eq @pk and RowKey gt @low and RowKey lt @high"
        parameters = {"pk": jobs_partition(job.collection), "low": low + after, "high": high}
        if status is not None:
            query += " and Status eq @status"
            parameters["status"] = status.value
        if per_page is not None:
            per_page = min(per_page, LARGEST_QUERY_PAGE)
        return iter(
            self._table.query_entities(
                query, parameters=parameters, results_per_page=per_page, select=select
            )
        )

    def ids(self, job: JobId, after: str = "") -> list[str]:
        """The ids of a job's history entries (only those sorting after `after`), newest first."""
        low, high = history_range(job)
        keys = self._table.query_entities(
            "PartitionKey eq @pk and RowKey gt @low and RowKey lt @high",
            parameters={"pk": jobs_partition(job.collection), "low": low + after, "high": high},
            select=["RowKey"],
        )
        return [key["RowKey"][len(low) :] for key in keys]

    def remove(self, job: JobId, entry_ids: Iterable[str]) -> None:
        """Forget these entries (those already gone are no matter)."""
        low, _ = history_range(job)
        partition = jobs_partition(job.collection)
        keys = [low + entry for entry in entry_ids]
        for start in range(0, len(keys), LARGEST_BATCH):
            batch = keys[start : start + LARGEST_BATCH]
            try:
                self._table.submit_transaction(
                    [("delete", {"PartitionKey": partition, "RowKey": key}) for key in batch]
                )
            except transaction_failures() as failed:
                if failed.status_code != 404:
                    raise
                # One of them was gone already, and a batch is all or nothing: one at a time.
                for key in batch:
                    with contextlib.suppress(ResourceNotFoundError):
                        self._table.delete_entity(partition, key)

    def delete_all(self, job: JobId) -> None:
        self.remove(job, self.ids(job))


def history_entity(job: JobId, entry_id: str, entry: HistoryProperties) -> JsonObject:
    low, _ = history_range(job)
    return {
        "PartitionKey": jobs_partition(job.collection),
        "RowKey": low + entry_id,
        "Status": entry["status"],
        "Document": as_json(entry),
    }
