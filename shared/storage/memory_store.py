"""The storage aggregates (interface.py) in this process's memory: for tests that should need
no Azurite, and never for production (nothing survives the process, and two processes share
nothing).

It answers as Table Storage (table_store.py) answers wherever a caller can tell: documents go
through the same JSON they are stored as (a caller never holds the stored object), every write
gives a new etag, keys fold names to one case as keys.py does and listings come in key order, a
replace keeps the names' case from the creation. One lock makes every call atomic, so a race
that Table Storage settles with etags is settled here by coming second: a write checked against
an etag still loses when another writer came first. tests/storage/conformance/ runs the same
tests on both.

Collections live here, and the aggregates are wired to one another here (`memory_storage`);
jobs, their gates and their settlement in memory_jobs.py; history and the classic API's records
in memory_records.py.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace

from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CollectionId
from shared.storage.collection_codec import decode_collection, encode_collection, version_of
from shared.storage.documents import (
    Preconditions,
    Stored,
    StoredCollection,
    as_json,
)
from shared.storage.errors import NotFound
from shared.storage.interface import Storage
from shared.storage.keys import (
    collection_partition,
    collection_row,
    table_key,
)
from shared.storage.memory_jobs import JobsInMemory
from shared.storage.memory_records import ClassicRecordsInMemory, HistoryInMemory, new_etag


@dataclass(frozen=True)
class _Collection:
    """A collection as stored: the names it was written under, its document's JSON, its etag,
    its incarnation and the version of its terms for jobs."""

    names: CollectionId
    text: str
    etag: str
    incarnation: str
    version: str

    def stored(self) -> StoredCollection:
        document = decode_collection(json.loads(self.text))
        return Stored(self.names, document, self.etag, self.incarnation, self.version)


class CollectionsInMemory:
    """Job collections in memory (see interface.py's CollectionStore for what each call
    promises); a collection created anew or deleted sweeps its jobs partition in `jobs`."""

    def __init__(self, lock: threading.RLock, jobs: JobsInMemory) -> None:
        self._lock, self._jobs = lock, jobs
        self._collections: dict[tuple[str, str], _Collection] = {}

    def collection(self, collection: CollectionId) -> StoredCollection | None:
        with self._lock:
            row = self._collections.get(_collection_key(collection))
        return row.stored() if row is not None else None

    def existing_collection(self, collection: CollectionId) -> StoredCollection:
        stored = self.collection(collection)
        if stored is None:
            raise NotFound(collection)
        return stored

    def collection_for_jobs(self, collection: CollectionId) -> StoredCollection:
        return self.existing_collection(collection)  # a read costs nothing here

    def collections(
        self, subscription: str, resource_group: str | None = None
    ) -> list[StoredCollection]:
        partition = table_key(subscription)
        prefix = None if resource_group is None else table_key(resource_group) + ":"
        with self._lock:
            rows = sorted(
                (key[1], row)
                for key, row in self._collections.items()
                if key[0] == partition and (prefix is None or key[1].startswith(prefix))
            )
        return [row.stored() for _, row in rows]

    def all_collections(self) -> Iterator[StoredCollection]:
        with self._lock:
            rows = [row for _, row in sorted(self._collections.items())]
        return (row.stored() for row in rows)

    def save_collection(
        self, collection: CollectionId, document: CollectionDocument, preconditions: Preconditions
    ) -> tuple[StoredCollection, bool]:
        key = _collection_key(collection)
        text, version = as_json(encode_collection(document)), version_of(document)
        with self._lock:
            current = self._collections.get(key)
            preconditions.check(current.stored() if current is not None else None)
            if current is None:
                row = _Collection(collection, text, new_etag(), uuid.uuid4().hex, version)
                # A new incarnation starts with an empty partition, but for the executor's gate.
                self._jobs.sweep(collection, keep_state=True)
            else:
                # The subscription's case is the latest writer's (it is not a kept column).
                names = replace(current.names, subscription=collection.subscription)
                row = _Collection(names, text, new_etag(), current.incarnation, version)
            self._collections[key] = row
        return row.stored(), current is None

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        key = _collection_key(collection)
        with self._lock:
            current = self._collections.get(key)
            preconditions.check(current.stored() if current is not None else None)
            self._collections.pop(key, None)
            self._jobs.sweep(collection, keep_state=False)
        return current is not None

    def stored_terms(self, collection: CollectionId) -> tuple[str, str] | None:
        """The incarnation and version of the collection as stored (None: not there)."""
        with self._lock:
            current = self._collections.get(_collection_key(collection))
        return None if current is None else (current.incarnation, current.version)


def memory_storage() -> Storage:
    """Every aggregate on new, empty dictionaries behind one lock (`Storage`'s fields are typed
    by the protocols, so mypy holds each part to its aggregate's contract here)."""
    lock = threading.RLock()
    history = HistoryInMemory(lock)

    def stored_terms(collection: CollectionId) -> tuple[str, str] | None:  # of those built next
        return collections.stored_terms(collection)

    jobs = JobsInMemory(lock, history, stored_terms)
    collections = CollectionsInMemory(lock, jobs)
    return Storage(
        collections=collections,
        jobs=jobs,
        history=history,
        executor=jobs,
        classic=ClassicRecordsInMemory(lock),
        create_tables=_nothing_to_create,
    )


def _nothing_to_create() -> None:
    """The dictionaries exist from the start."""


def _collection_key(collection: CollectionId) -> tuple[str, str]:
    return collection_partition(collection), collection_row(collection)
