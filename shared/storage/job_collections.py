"""Job collections in storage: one row each in the collections table (a subscription's rows
share a partition, keyed "<group>:<name>"), and, when a collection is created anew or deleted,
the sweep of its jobs partition.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.data.tables import TableTransactionError

from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CollectionId
from shared.storage.batches import row_keys, submit_batches
from shared.storage.collection_codec import decode_collection, encode_collection
from shared.storage.concurrency import CONTENDED_WRITE_ATTEMPTS, optimistic_attempts
from shared.storage.counter_rows import CounterRows
from shared.storage.documents import INCARNATION, DocumentTable, Preconditions, StoredCollection
from shared.storage.errors import ModifiedConcurrently, NotFound
from shared.storage.keys import (
    AFTER_INCARNATION_MARKS,
    COLLECTION_GATE,
    INCARNATION_MARK,
    collection_partition,
    collection_row,
    incarnation_row,
    jobs_partition,
    table_key,
)
from shared.storage.table_http import TableLike

COLLECTIONS_TABLE = "jobcollections"


class Collections:
    """The collections table, and the jobs partitions (in `jobs_table`) its collections own."""

    def __init__(self, table: TableLike, jobs_table: TableLike, counter_rows: CounterRows) -> None:
        self._collections = DocumentTable(
            table, collection_id_of, encode_collection, decode_collection,
            "job collection",
        )  # fmt: skip
        self._jobs_table = jobs_table
        self._counter_rows = counter_rows

    def collection(self, collection: CollectionId) -> StoredCollection | None:
        return self._collections.get(collection_partition(collection), collection_row(collection))

    def existing_collection(self, collection: CollectionId) -> StoredCollection:
        """The collection, or NotFound."""
        stored = self.collection(collection)
        if stored is None:
            raise NotFound(collection)
        return stored

    def collections(
        self, subscription: str, resource_group: str | None = None
    ) -> list[StoredCollection]:
        """A subscription's collections, or one resource group's, in name order."""
        if resource_group is None:
            return list(self._collections.query("PartitionKey eq @pk", pk=table_key(subscription)))
        # A group's rows are the keys "<group>:<name>", so the range [group + ":", group + ";").
        prefix = table_key(resource_group)
        query = "PartitionKey eq @pk and RowKey gt @low and RowKey lt @high"
        found = self._collections.query(
            query, pk=table_key(subscription), low=prefix + ":", high=prefix + ";"
        )
        return list(found)

    def save_collection(
        self, collection: CollectionId, document: CollectionDocument, preconditions: Preconditions
    ) -> tuple[StoredCollection, bool]:
        """Create or replace a collection. A new one (a new incarnation) starts from an empty
        jobs partition: whatever a deletion's stragglers left there goes once its row is in
        (see `delete_collection`), the executor's gate row aside, which the caller may just
        have written for it. (Before its row is in, a racing PUT of the same name may have
        created it, with jobs.)"""
        columns = {
            "Subscription": collection.subscription,
            "ResourceGroup": collection.resource_group,
            "Name": collection.name,
            INCARNATION: uuid.uuid4().hex,  # kept by a replace
        }
        stored, created = self._collections.save(
            partition=collection_partition(collection), row=collection_row(collection),
            columns=columns, document=document, preconditions=preconditions,
            keep_from_current=("ResourceGroup", "Name", INCARNATION),
        )  # fmt: skip
        if created:
            self.sweep(jobs_partition(collection), keep=(COLLECTION_GATE,))
            # Swept: no counter rows. The first creator here reads none; one that another
            # process wrote since makes its counter insert fail, and then the rows are read.
            self._counter_rows.remember(jobs_partition(collection), {})
            self._mark(stored)
        return stored, created

    def _mark(self, stored: StoredCollection) -> None:
        """Write the mark of the collection's new incarnation in its jobs partition, which each
        job insert rewrites (jobs.py). Without it (this write failed, or the collection predates
        marks) creators check the collection by reading it again after their insert."""
        mark = {
            "PartitionKey": jobs_partition(stored.id),
            "RowKey": incarnation_row(stored.incarnation),
        }
        with contextlib.suppress(AzureError):
            self._jobs_table.upsert_entity(mark)

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        """Delete a collection, every job in it and their history.

        The collection's row goes first: from then on no job created in the collection is
        kept, because a creator checks after its insert that its collection (the same
        incarnation) is still there, and withdraws its job if not (`save_job`'s `within`). So
        every job inserted before the row went is seen by the sweep that follows, and every job
        whose check comes after it is withdrawn by its own creator: the deletion wins.
        """
        deleted = self._collections.delete(
            collection_partition(collection), collection_row(collection), preconditions
        )
        self.sweep(jobs_partition(collection))
        return deleted

    def sweep(self, partition: str, keep: tuple[str, ...] = ()) -> None:
        """Delete every row of a collection's jobs partition (but those in `keep`): jobs,
        history, counter rows; and forget what this process remembers of its counter rows.

        The incarnation marks go first, on their own: from then on no job insert lands (each
        rewrites its incarnation's mark in its batch), so every job that did land is there
        before the rows are listed."""
        self._counter_rows.drop(partition)
        for mark in self._jobs_table.query_entities(
            "PartitionKey eq @pk and RowKey ge @first and RowKey lt @after",
            parameters={
                "pk": partition,
                "first": INCARNATION_MARK,
                "after": AFTER_INCARNATION_MARKS,
            },
            select=["RowKey"],
        ):
            with contextlib.suppress(ResourceNotFoundError):
                self._jobs_table.delete_entity(partition, mark["RowKey"])
        for _ in optimistic_attempts(CONTENDED_WRITE_ATTEMPTS, back_off=True):
            try:
                submit_batches(
                    self._jobs_table,
                    (
                        ("delete", {"PartitionKey": partition, "RowKey": entity["RowKey"]})
                        for entity in row_keys(self._jobs_table, partition)
                        if entity["RowKey"] not in keep
                    ),
                )
            except TableTransactionError as failed:
                if failed.status_code != 404:  # a row went meanwhile (a job withdrawn): again
                    raise
                continue
            self._counter_rows.drop(partition)
            return
        raise ModifiedConcurrently("job collection")

    def all_collections(self) -> Iterator[StoredCollection]:
        """Every collection of every subscription (for maintenance, not for requests)."""
        for entity in self._collections.table.list_entities():
            yield self._collections.from_entity(entity)

    def still_there(self, collection: StoredCollection) -> bool:
        """Whether the collection (that incarnation of it) is still stored."""
        current = self.collection(collection.id)
        return current is not None and current.incarnation == collection.incarnation


def collection_id_of(entity: Any) -> CollectionId:
    return CollectionId(entity["Subscription"], entity["ResourceGroup"], entity["Name"])
