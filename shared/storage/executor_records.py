"""What the executor reads and writes of a collection's jobs partition: the collection's state
(its gate, one row beside the jobs, read with a point read before any job runs) and the
settlement of an attempt (the job's new document and its history entries, in one batch).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from shared.domain.history import HistoryEntry
from shared.domain.ids import CollectionId
from shared.domain.job_document import JobDocument
from shared.storage.batches import LARGEST_BATCH, RACES_LOST, submit_batches
from shared.storage.documents import Stored, StoredJob
from shared.storage.errors import ModifiedConcurrently
from shared.storage.history import History, history_entity
from shared.storage.job_codec import decode_job
from shared.storage.job_rows import claim_column, job_id_of, replacement
from shared.storage.keys import COLLECTION_GATE, jobs_partition
from shared.storage.table_http import TableLike
from shared.storage.table_terms import UpdateMode, transaction_failures


class ExecutorRecords:
    """The executor's gate and settlement, in the jobs table."""

    def __init__(self, table: TableLike, history: History) -> None:
        self._table, self._history = table, history

    def collection_state(self, collection: CollectionId) -> str | None:
        """The state the executor checks before running any job of the collection (None if
        never recorded): a point read of the gate row beside the collection's jobs."""
        try:
            gate = self._table.get_entity(
                jobs_partition(collection), COLLECTION_GATE, select=["State"]
            )
        except ResourceNotFoundError:
            return None
        return str(gate["State"])

    def set_collection_state(self, collection: CollectionId, state: str) -> None:
        """Record the state the executor checks before running any job of the collection."""
        self._table.upsert_entity(
            {"PartitionKey": jobs_partition(collection), "RowKey": COLLECTION_GATE, "State": state},
            mode=UpdateMode.REPLACE,
        )

    def settle_job(
        self, stored: StoredJob, document: JobDocument, history: list[HistoryEntry]
    ) -> StoredJob | None:
        """Write a job's new document and history entries if the job is as `stored` read it;
        the job as now stored (its new etag), or None when another writer changed it first.

        The document and the newest entries are one batch: an outcome is recorded whole or not
        at all.
        """
        room = LARGEST_BATCH - 1
        older, newest = history[:-room] if len(history) > room else [], history[-room:]
        # Entries that do not fit in the batch (postponed occurrences) go first; writing them
        # again after a failed attempt only overwrites them.
        self._history.add(stored.id, list(older))
        operations: list[Any] = [replacement(Stored(stored.id, document, stored.etag))]
        operations += [("upsert", history_entity(stored.id, *entry)) for entry in newest]
        try:
            written = self._table.submit_transaction(operations)
        except transaction_failures():
            return None
        return Stored(stored.id, document, written[0]["etag"], stored.incarnation)

    def settle_jobs(self, writes: list[tuple[StoredJob, JobDocument]]) -> list[StoredJob | None]:
        """Write the new documents of several jobs of one collection (at most LARGEST_BATCH, no
        job twice) in one batch, each only if its job is as read: for each, the job as written,
        or None where another writer changed (or deleted) it first. A batch is written whole or
        not at all, so one lost race leaves the batch out and the others go again without it."""
        written: list[StoredJob | None] = [None] * len(writes)
        left = list(range(len(writes)))
        while left:
            operations = [
                replacement(Stored(writes[at][0].id, writes[at][1], writes[at][0].etag))
                for at in left
            ]
            try:
                results = self._table.submit_transaction(operations)
            except transaction_failures() as failed:
                if failed.status_code not in RACES_LOST:
                    raise
                # The operation that failed, where the service names it (else the first): one
                # taken for a loser by mistake was not written either, and only reads again.
                left.pop(min(max(failed.index, 0), len(left) - 1))
                continue
            for at, metadata in zip(left, results, strict=True):
                stored = writes[at][0]
                written[at] = Stored(stored.id, writes[at][1], metadata["etag"], stored.incarnation)
            break
        return written

    def overdue_claims(self, before: datetime, at_most: int) -> int:
        """How many jobs (up to `at_most`) hold a claim that ran out before `before`: a try
        whose holder died, not yet taken over. A query over the whole table (no index serves
        it): for a health probe, not for the executor's path."""
        found = self._table.query_entities(
            "ClaimedUntil gt '' and ClaimedUntil lt @before",
            parameters={"before": claim_column(before)},
            select=["RowKey"],
            results_per_page=at_most,
        )
        return sum(1 for _ in itertools.islice(found, at_most))

    def jobs_with_overdue_claims(self, before: datetime, at_most: int) -> list[StoredJob]:
        """The jobs (up to `at_most`, in key order) that `overdue_claims` counts, read whole, for
        an operator to see which tries they are. The same query over the whole table."""
        found = self._table.query_entities(
            "ClaimedUntil gt '' and ClaimedUntil lt @before",
            parameters={"before": claim_column(before)},
            select=["Subscription", "ResourceGroup", "Collection", "Name", "Document"],
            results_per_page=at_most,
        )
        return [
            Stored(
                job_id_of(entity),
                decode_job(json.loads(entity["Document"])),
                str(entity.metadata["etag"]),
            )
            for entity in itertools.islice(found, at_most)
        ]

    def replace_jobs(self, jobs: Iterable[StoredJob]) -> None:
        """Write back changed documents of one collection's jobs, as batches; ModifiedConcurrently
        when one of them changed (or went) since it was read, and its batch was not written."""
        try:
            submit_batches(self._table, (replacement(stored) for stored in jobs))
        except transaction_failures() as failed:
            if failed.status_code in RACES_LOST:
                raise ModifiedConcurrently("job") from failed
            raise
