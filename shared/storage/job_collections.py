"""Job collections in storage: one row each in the collections table (a subscription's rows
share a partition, keyed "<group>:<name>"), the mark of each one's incarnation and terms in its
jobs partition, and, when a collection is created anew or deleted, the sweep of that partition.

A job's write needs its collection's terms (SKU, quota, region): it takes them as this process
last read or wrote them (`collection_for_jobs`), and checks in its own batch that they still
hold, by rewriting the mark of that incarnation and version (jobs.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError

from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CollectionId
from shared.storage.batches import row_keys, submit_batches
from shared.storage.collection_codec import decode_collection, encode_collection, version_of
from shared.storage.concurrency import CONTENDED_WRITE_ATTEMPTS, optimistic_attempts
from shared.storage.counter_rows import CounterRows
from shared.storage.documents import (
    INCARNATION,
    VERSION,
    DocumentTable,
    Preconditions,
    StoredCollection,
)
from shared.storage.errors import ModifiedConcurrently, NotFound
from shared.storage.job_names import JobNames
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
from shared.storage.table_terms import transaction_failures

COLLECTIONS_TABLE = "jobcollections"
# How long job writes take a collection as last read or written before reading it again. Each
# write checks that what it took still holds (its mark), so this bounds only what that check
# cannot see: a mark left behind by a crash between a collection's change and its removal.
KNOWN_FOR_S = 60.0
REMEMBERED_COLLECTIONS = 4096


@dataclass
class _Known:
    """A collection as this process last read or wrote it, for job writes."""

    stored: StoredCollection
    read_at: float  # monotonic
    unmarked: bool = False  # a job's write found no mark of this incarnation and version


class Collections:
    """The collections table, and the jobs partitions (in `jobs_table`) its collections own."""

    def __init__(
        self, table: TableLike, jobs_table: TableLike, counter_rows: CounterRows,
        job_names: JobNames,
    ) -> None:  # fmt: skip
        self._collections = DocumentTable(
            table, collection_id_of, encode_collection, decode_collection,
            "job collection",
        )  # fmt: skip
        self._jobs_table = jobs_table
        self._counter_rows, self._job_names = counter_rows, job_names
        self._known: OrderedDict[str, _Known] = OrderedDict()  # by jobs partition
        self._lock = threading.Lock()

    def collection(self, collection: CollectionId) -> StoredCollection | None:
        stored = self._collections.get(collection_partition(collection), collection_row(collection))
        self._remember(collection, stored)
        return stored

    def collection_for_jobs(self, collection: CollectionId) -> StoredCollection:
        """The collection as a job's write takes it (NotFound if there is none): as this
        process last read or wrote it, if less than KNOWN_FOR_S ago, else read now. The write
        checks that its incarnation and version are still there (`Jobs.save_job`)."""
        with self._lock:
            known = self._known.get(jobs_partition(collection))
            if known is not None and time.monotonic() - known.read_at < KNOWN_FOR_S:
                return known.stored
        return self.existing_collection(collection)

    def unmarked(self, stored: StoredCollection) -> bool:
        """Whether a job's write found no mark of this incarnation and version of the
        collection (created before marks, or a mark write failed): then writes go without one,
        and a creator reads the collection again after its insert."""
        with self._lock:
            known = self._known.get(jobs_partition(stored.id))
            return known is not None and known.unmarked and known.stored.has_terms_of(stored)

    def note_unmarked(self, stored: StoredCollection) -> None:
        with self._lock:
            known = self._known.get(jobs_partition(stored.id))
            if known is not None and known.stored.has_terms_of(stored):
                known.unmarked = True

    def _remember(self, collection: CollectionId, stored: StoredCollection | None) -> None:
        partition = jobs_partition(collection)
        with self._lock:
            if stored is None:
                self._known.pop(partition, None)
                return
            before = self._known.get(partition)
            unmarked = before is not None and before.unmarked and before.stored.has_terms_of(stored)
            self._known[partition] = _Known(stored, time.monotonic(), unmarked)
            self._known.move_to_end(partition)
            while len(self._known) > REMEMBERED_COLLECTIONS:
                self._known.popitem(last=False)

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
        created it, with jobs.) A new incarnation, or a change of what job writes depend on,
        gets a new mark; a changed collection's previous mark goes once the new one is in."""
        columns = {
            "Subscription": collection.subscription,
            "ResourceGroup": collection.resource_group,
            "Name": collection.name,
            INCARNATION: uuid.uuid4().hex,  # kept by a replace
            VERSION: version_of(document),
        }
        partition = jobs_partition(collection)
        stored, previous = self._collections.save(
            partition=collection_partition(collection), row=collection_row(collection),
            columns=columns, document=document, preconditions=preconditions,
            keep_from_current=("ResourceGroup", "Name", INCARNATION),
        )  # fmt: skip
        if previous is None:
            self.sweep(partition, keep=(COLLECTION_GATE,))
            # Swept: no counter rows and no jobs. The first creator here reads none; one that
            # another process wrote since makes its counter insert (or its job's) fail, and
            # then the rows are read.
            self._counter_rows.remember(partition, {})
            self._job_names.learn(partition, ())
            self._mark(stored)
        elif previous.version != stored.version:
            self._mark(stored)
            # Job writes that took the terms before this change fail from now on. If this
            # delete fails, they may still land until they read the collection again.
            with contextlib.suppress(AzureError):
                self._jobs_table.delete_entity(
                    partition, incarnation_row(previous.incarnation, previous.version)
                )
        self._remember(collection, stored)
        return stored, previous is None

    def _mark(self, stored: StoredCollection) -> None:
        """Write the mark of the collection's incarnation and version in its jobs partition,
        which each job write rewrites (jobs.py). Without it (this write failed, or the
        collection predates marks) writes go without, and creators check the collection by
        reading it again after their insert."""
        mark = {
            "PartitionKey": jobs_partition(stored.id),
            "RowKey": incarnation_row(stored.incarnation, stored.version),
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
        self._remember(collection, None)
        self.sweep(jobs_partition(collection))
        return deleted

    def sweep(self, partition: str, keep: tuple[str, ...] = ()) -> None:
        """Delete every row of a collection's jobs partition (but those in `keep`): jobs,
        history, counter rows; and forget what this process remembers of its counter rows.

        The incarnation marks go first, on their own: from then on no job insert lands (each
        rewrites its incarnation's mark in its batch), so every job that did land is there
        before the rows are listed."""
        self._counter_rows.drop(partition)
        self._job_names.forget(partition)
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
            except transaction_failures() as failed:
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
