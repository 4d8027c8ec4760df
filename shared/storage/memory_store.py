"""The Store (interface.py) in this process's memory: for tests that should need no Azurite, and
never for production (nothing survives the process, and two processes share nothing).

It answers as TableStore answers wherever a caller can tell: documents go through the same JSON
they are stored as (a caller never holds the stored object), every write gives a new etag, keys
fold names to one case as keys.py does and listings come in key order, a replace keeps the
names' case from the creation. One lock makes every call atomic, so a race that Table Storage
settles with etags is settled here by coming second: a write checked against an etag still
loses when another writer came first. tests/storage/conformance/ runs the same tests on both.

Collections live here, and the store is composed here; jobs, their gates and their settlement
in memory_jobs.py; history and the classic API's records in memory_records.py.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CloudServiceId, CollectionId, JobId
from shared.domain.job_definition import HistoryStatus, JobState
from shared.domain.job_document import JobDocument
from shared.storage.documents import (
    HistoryEntry,
    JobSlot,
    PageBounds,
    Preconditions,
    RunNowsInFlight,
    Stored,
    StoredCloudService,
    StoredCollection,
    StoredJob,
    as_json,
)
from shared.storage.errors import NotFound
from shared.storage.interface import Store
from shared.storage.keys import (
    collection_partition,
    collection_row,
    table_key,
)
from shared.storage.memory_jobs import JobsInMemory
from shared.storage.memory_records import ClassicRecordsInMemory, HistoryInMemory, new_etag


@dataclass(frozen=True)
class _Collection:
    """A collection as stored: the names it was written under, its document's JSON, its etag
    and its incarnation."""

    names: CollectionId
    text: str
    etag: str
    incarnation: str

    def stored(self) -> StoredCollection:
        document = CollectionDocument.from_wire(json.loads(self.text))
        return Stored(self.names, document, self.etag, self.incarnation)


class MemoryStore:
    """The Store in memory (see interface.py for what each call promises)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._collections: dict[tuple[str, str], _Collection] = {}
        self._history = HistoryInMemory(self._lock)
        self._jobs = JobsInMemory(self._lock, self._history, self._still_there)
        self._classic = ClassicRecordsInMemory(self._lock)

    def create_tables(self) -> None:
        """Nothing to create: the dictionaries exist from the start."""

    # --- collections ----------------------------------------------------------------------

    def collection(self, collection: CollectionId) -> StoredCollection | None:
        with self._lock:
            row = self._collections.get(_collection_key(collection))
        return row.stored() if row is not None else None

    def existing_collection(self, collection: CollectionId) -> StoredCollection:
        stored = self.collection(collection)
        if stored is None:
            raise NotFound(collection)
        return stored

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
        text = as_json(document.to_wire())
        with self._lock:
            current = self._collections.get(key)
            preconditions.check(current.stored() if current is not None else None)
            if current is None:
                row = _Collection(collection, text, new_etag(), uuid.uuid4().hex)
                # A new incarnation starts with an empty partition, but for the executor's gate.
                self._jobs.sweep(collection, keep_state=True)
            else:
                # The subscription's case is the latest writer's (it is not a kept column).
                names = replace(current.names, subscription=collection.subscription)
                row = _Collection(names, text, new_etag(), current.incarnation)
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

    def _still_there(self, collection: StoredCollection) -> bool:
        """Whether the collection, that incarnation of it, is stored."""
        with self._lock:
            current = self._collections.get(_collection_key(collection.id))
        return current is not None and current.incarnation == collection.incarnation

    # --- jobs -----------------------------------------------------------------------------

    def job(self, job: JobId) -> StoredJob | None:
        return self._jobs.job(job)

    def existing_job(self, job: JobId) -> StoredJob:
        stored = self._jobs.job(job)
        if stored is None:
            raise NotFound(job)
        return stored

    def jobs(self, collection: CollectionId, state: JobState | None = None) -> list[StoredJob]:
        return self._jobs.jobs(collection, state)

    def jobs_page(
        self, collection: CollectionId, bounds: PageBounds, state: JobState | None = None
    ) -> tuple[list[StoredJob], str | None]:
        return self._jobs.jobs_page(collection, bounds, state)

    def run_nows_in_flight(self, collection: CollectionId) -> RunNowsInFlight:
        return self._jobs.run_nows_in_flight(collection)

    def accept_run_now(
        self, stored: StoredJob, document: JobDocument, in_flight: RunNowsInFlight
    ) -> StoredJob | None:
        return self._jobs.accept_run_now(stored, document, in_flight)

    def job_slot(self, job: JobId, *, counted: bool = False) -> JobSlot:
        return self._jobs.job_slot(job, counted=counted)

    def save_job(
        self, job: JobId, document: JobDocument, preconditions: Preconditions, slot: JobSlot,
        max_jobs: int | None = None, *, now: datetime | None = None,
        within: StoredCollection | None = None,
    ) -> tuple[StoredJob, bool]:  # fmt: skip
        # `now` lets TableStore correct counts a crash left too high; nothing crashes here.
        return self._jobs.save_job(
            job, document, preconditions, slot, max_jobs=max_jobs, within=within
        )

    def delete_job(self, job: JobId, preconditions: Preconditions) -> bool:
        return self._jobs.delete_job(job, preconditions)

    # --- history --------------------------------------------------------------------------

    def add_history(self, job: JobId, entries: list[HistoryEntry]) -> None:
        self._history.add(job, entries)

    def history(self, job: JobId, status: HistoryStatus | None = None) -> list[HistoryEntry]:
        return self._history.entries(job, status)

    def history_page(
        self, job: JobId, bounds: PageBounds, status: HistoryStatus | None = None
    ) -> tuple[list[HistoryEntry], bool]:
        return self._history.page(job, bounds, status)

    def history_ids(self, job: JobId, after: str = "") -> list[str]:
        return self._history.ids(job, after)

    def remove_history(self, job: JobId, entry_ids: Iterable[str]) -> None:
        self._history.remove(job, entry_ids)

    # --- the executor's gate and settlement -----------------------------------------------

    def collection_state(self, collection: CollectionId) -> str | None:
        return self._jobs.collection_state(collection)

    def set_collection_state(self, collection: CollectionId, state: str) -> None:
        self._jobs.set_collection_state(collection, state)

    def settle_job(
        self, stored: StoredJob, document: JobDocument, history: list[HistoryEntry]
    ) -> StoredJob | None:
        return self._jobs.settle_job(stored, document, history)

    def overdue_claims(self, before: datetime, at_most: int) -> int:
        return len(self._jobs.jobs_with_overdue_claims(before, at_most))

    def jobs_with_overdue_claims(self, before: datetime, at_most: int) -> list[StoredJob]:
        return self._jobs.jobs_with_overdue_claims(before, at_most)

    def settle_jobs(self, writes: list[tuple[StoredJob, JobDocument]]) -> list[StoredJob | None]:
        return self._jobs.settle_jobs(writes)

    def replace_jobs(self, jobs: Iterable[StoredJob]) -> None:
        self._jobs.replace_jobs(jobs)

    # --- the classic API's records --------------------------------------------------------

    def cloud_service(self, cloud_service: CloudServiceId) -> StoredCloudService | None:
        return self._classic.cloud_service(cloud_service)

    def cloud_services(self, subscription: str) -> list[StoredCloudService]:
        return self._classic.cloud_services(subscription)

    def create_cloud_service(
        self, cloud_service: CloudServiceId, document: dict[str, str]
    ) -> StoredCloudService:
        return self._classic.create_cloud_service(cloud_service, document)

    def delete_cloud_service(self, cloud_service: CloudServiceId) -> bool:
        return self._classic.delete_cloud_service(cloud_service)

    def record_operation(self, subscription: str, request_id: str) -> None:
        self._classic.record_operation(subscription, request_id)

    def operation_recorded(self, subscription: str, request_id: str) -> bool:
        return self._classic.operation_recorded(subscription, request_id)

    def remove_operations_before(self, instant: datetime) -> int:
        return self._classic.remove_operations_before(instant)


def _collection_key(collection: CollectionId) -> tuple[str, str]:
    return collection_partition(collection), collection_row(collection)


if TYPE_CHECKING:  # mypy holds the memory store to the protocol's signatures
    _IS_A_STORE: Store = MemoryStore()
