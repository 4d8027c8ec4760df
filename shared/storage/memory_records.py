"""The parts of the store in memory (memory_store.py) that stand beside collections and jobs:
every job's history, and the classic API's records. Each takes the store's lock, so that a call
of the store that touches several parts is still one atomic change.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.domain.history import HistoryEntry
from shared.domain.ids import CloudServiceId, JobId
from shared.domain.job_definition import HistoryStatus
from shared.storage.documents import (
    PageBounds,
    Preconditions,
    Stored,
    StoredCloudService,
    as_json,
)
from shared.storage.keys import job_row, jobs_partition, table_key

_etags = itertools.count(1)


def new_etag() -> str:
    """An etag no other write of this process has had (Table Storage's are weak ones too)."""
    return f'W/"memory-{next(_etags)}"'


@dataclass(frozen=True)
class _Entry:
    status: str  # the column a listing filters on, as Table Storage keeps it beside the entry
    text: str


class HistoryInMemory:
    """Every job's history: by jobs partition, job row and entry id, each entry as its JSON."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._entries: dict[str, dict[str, dict[str, _Entry]]] = {}

    def add(self, job: JobId, entries: list[HistoryEntry]) -> None:
        written = {entry_id: _Entry(entry["status"], as_json(entry)) for entry_id, entry in entries}
        with self._lock:
            partition = self._entries.setdefault(jobs_partition(job.collection), {})
            partition.setdefault(job_row(job), {}).update(written)

    def entries(self, job: JobId, status: HistoryStatus | None = None) -> list[HistoryEntry]:
        return [
            (entry_id, json.loads(entry.text)) for entry_id, entry in self._after(job, "", status)
        ]

    def page(
        self, job: JobId, bounds: PageBounds, status: HistoryStatus | None = None
    ) -> tuple[list[HistoryEntry], bool]:
        count, after, skip = bounds.count, bounds.after, bounds.skip
        found = self._after(job, after, status)
        if len(found) < skip:
            return [], False
        shown = found[skip : skip + count + 1]
        entries = [(entry_id, json.loads(entry.text)) for entry_id, entry in shown]
        return entries[:count], len(entries) > count

    def ids(self, job: JobId, after: str = "") -> list[str]:
        return [entry_id for entry_id, _ in self._after(job, after, None)]

    def remove(self, job: JobId, entry_ids: Iterable[str]) -> None:
        with self._lock:
            entries = self._entries.get(jobs_partition(job.collection), {}).get(job_row(job), {})
            for entry_id in entry_ids:
                entries.pop(entry_id, None)

    def remove_all(self, job: JobId) -> None:
        with self._lock:
            self._entries.get(jobs_partition(job.collection), {}).pop(job_row(job), None)

    def drop_partition(self, partition: str) -> None:
        with self._lock:
            self._entries.pop(partition, None)

    def _after(
        self, job: JobId, after: str, status: HistoryStatus | None
    ) -> list[tuple[str, _Entry]]:
        """A job's entries whose ids sort after `after`, in id order (newest first)."""
        with self._lock:
            entries = dict(
                self._entries.get(jobs_partition(job.collection), {}).get(job_row(job), {})
            )
        return [
            (entry_id, entries[entry_id])
            for entry_id in sorted(entries)
            if entry_id > after and (status is None or entries[entry_id].status == status.value)
        ]


@dataclass(frozen=True)
class _CloudService:
    names: CloudServiceId
    text: str
    etag: str


class ClassicRecordsInMemory:
    """The classic API's cloud services and the request ids of its changes."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._cloud_services: dict[tuple[str, str], _CloudService] = {}
        # Table Storage stamps each row with its own clock, which no test moves: so does this.
        self._operations: dict[tuple[str, str], datetime] = {}

    def cloud_service(self, cloud_service: CloudServiceId) -> StoredCloudService | None:
        with self._lock:
            row = self._cloud_services.get(_key(cloud_service))
        return _stored(row) if row is not None else None

    def cloud_services(self, subscription: str) -> list[StoredCloudService]:
        partition = table_key(subscription)
        with self._lock:
            rows = sorted(
                (key, row) for key, row in self._cloud_services.items() if key[0] == partition
            )
        return [_stored(row) for _, row in rows]

    def create_cloud_service(
        self, cloud_service: CloudServiceId, document: dict[str, str]
    ) -> StoredCloudService:
        row = _CloudService(cloud_service, as_json(document), new_etag())
        with self._lock:
            current = self._cloud_services.get(_key(cloud_service))
            Preconditions(if_none_match="*").check(_stored(current) if current else None)
            self._cloud_services[_key(cloud_service)] = row
        return _stored(row)

    def delete_cloud_service(self, cloud_service: CloudServiceId) -> bool:
        with self._lock:
            return self._cloud_services.pop(_key(cloud_service), None) is not None

    def record_operation(self, subscription: str, request_id: str) -> None:
        with self._lock:
            self._operations[(table_key(subscription), request_id)] = datetime.now(UTC)

    def operation_recorded(self, subscription: str, request_id: str) -> bool:
        with self._lock:
            return (table_key(subscription), request_id) in self._operations

    def remove_operations_before(self, instant: datetime) -> int:
        with self._lock:
            old = [key for key, recorded in self._operations.items() if recorded < instant]
            for key in old:
                del self._operations[key]
        return len(old)


def _key(cloud_service: CloudServiceId) -> tuple[str, str]:
    return table_key(cloud_service.subscription), table_key(cloud_service.name)


def _stored(row: _CloudService) -> StoredCloudService:
    return Stored(row.names, dict(json.loads(row.text)), row.etag)
