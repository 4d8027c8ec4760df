"""What the executor reads and writes of a collection's jobs partition: the collection's state
(its gate, one row beside the jobs, read with a point read before any job runs) and the
settlement of an attempt (the job's new document and its history entries, in one batch).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from shared.domain.ids import CollectionId
from shared.domain.job_document import JobDocument
from shared.storage.batches import LARGEST_BATCH, RACES_LOST, submit_batches
from shared.storage.documents import HistoryEntry, Stored, StoredJob
from shared.storage.errors import ModifiedConcurrently
from shared.storage.history import History, history_entity
from shared.storage.jobs import replacement
from shared.storage.keys import COLLECTION_GATE, jobs_partition


class ExecutorRecords:
    """The executor's gate and settlement, in the jobs table."""

    def __init__(self, table: TableClient, history: History) -> None:
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
        except TableTransactionError:
            return None
        return Stored(stored.id, document, written[0]["etag"], stored.incarnation)

    def replace_jobs(self, jobs: Iterable[StoredJob]) -> None:
        """Write back changed documents of one collection's jobs, as batches; ModifiedConcurrently
        when one of them changed (or went) since it was read, and its batch was not written."""
        try:
            submit_batches(self._table, (replacement(stored) for stored in jobs))
        except TableTransactionError as failed:
            if failed.status_code in RACES_LOST:
                raise ModifiedConcurrently("job") from failed
            raise
