"""The Store (interface.py) on Table Storage: one part per thing stored, composed here.

Collections (job_collections.py) and their jobs (jobs.py), counted in counter rows
(job_counting.py, counter_rows.py), with their history (history.py) and the executor's gate and
settlement (executor_records.py) in each collection's jobs partition; the classic API's records
(classic_records.py). Every part keeps Table Storage's rules: keys (keys.py), documents and
etags (documents.py), batches of one partition and at most 100 operations (batches.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceExistsError

from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CloudServiceId, CollectionId, JobId
from shared.domain.job_definition import HistoryStatus, JobState
from shared.domain.job_document import JobDocument
from shared.storage.classic_records import CLOUD_SERVICES_TABLE, OPERATIONS_TABLE, ClassicRecords
from shared.storage.clients import tables_from_connection_string
from shared.storage.counter_rows import SPARES_KEPT_FOR_S
from shared.storage.documents import (
    HistoryEntry,
    JobSlot,
    PageBounds,
    Preconditions,
    RunNowsInFlight,
    StoredCloudService,
    StoredCollection,
    StoredJob,
)
from shared.storage.executor_records import ExecutorRecords
from shared.storage.history import History
from shared.storage.job_collections import COLLECTIONS_TABLE, Collections
from shared.storage.job_counting import JobCounting
from shared.storage.jobs import JOBS_TABLE, Jobs
from shared.storage.table_http import TableServiceLike

TABLES = (COLLECTIONS_TABLE, JOBS_TABLE, CLOUD_SERVICES_TABLE, OPERATIONS_TABLE)


class TableStore:
    """The Store on the tables of one Table Storage account (see interface.py for what each
    call promises)."""

    def __init__(
        self, service: TableServiceLike, *, spares_kept_for_s: float = SPARES_KEPT_FOR_S
    ) -> None:
        self._service = service
        jobs_table = service.get_table_client(JOBS_TABLE)
        counting = JobCounting(jobs_table, spares_kept_for_s=spares_kept_for_s)
        self._history = History(jobs_table)
        self._collections = Collections(
            service.get_table_client(COLLECTIONS_TABLE), jobs_table, counting.rows
        )
        self._jobs = Jobs(jobs_table, counting, self._history, self._collections)
        self._executor = ExecutorRecords(jobs_table, self._history)
        self._classic = ClassicRecords(
            service.get_table_client(CLOUD_SERVICES_TABLE),
            service.get_table_client(OPERATIONS_TABLE),
        )

    @classmethod
    def from_connection_string(cls, connection_string: str, **options: Any) -> TableStore:
        return cls(tables_from_connection_string(connection_string), **options)

    def create_tables(self) -> None:
        for name in TABLES:
            with contextlib.suppress(ResourceExistsError):
                self._service.create_table(name)

    # --- collections ----------------------------------------------------------------------

    def collection(self, collection: CollectionId) -> StoredCollection | None:
        return self._collections.collection(collection)

    def existing_collection(self, collection: CollectionId) -> StoredCollection:
        return self._collections.existing_collection(collection)

    def collections(
        self, subscription: str, resource_group: str | None = None
    ) -> list[StoredCollection]:
        return self._collections.collections(subscription, resource_group)

    def all_collections(self) -> Iterator[StoredCollection]:
        return self._collections.all_collections()

    def save_collection(
        self, collection: CollectionId, document: CollectionDocument, preconditions: Preconditions
    ) -> tuple[StoredCollection, bool]:
        return self._collections.save_collection(collection, document, preconditions)

    def delete_collection(self, collection: CollectionId, preconditions: Preconditions) -> bool:
        return self._collections.delete_collection(collection, preconditions)

    # --- jobs -----------------------------------------------------------------------------

    def job(self, job: JobId) -> StoredJob | None:
        return self._jobs.job(job)

    def existing_job(self, job: JobId) -> StoredJob:
        return self._jobs.existing_job(job)

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
        return self._jobs.save_job(
            job, document, preconditions, slot, max_jobs, now=now, within=within
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
        return self._executor.collection_state(collection)

    def set_collection_state(self, collection: CollectionId, state: str) -> None:
        self._executor.set_collection_state(collection, state)

    def settle_job(
        self, stored: StoredJob, document: JobDocument, history: list[HistoryEntry]
    ) -> StoredJob | None:
        return self._executor.settle_job(stored, document, history)

    def overdue_claims(self, before: datetime, at_most: int) -> int:
        return self._executor.overdue_claims(before, at_most)

    def jobs_with_overdue_claims(self, before: datetime, at_most: int) -> list[StoredJob]:
        return self._executor.jobs_with_overdue_claims(before, at_most)

    def settle_jobs(self, writes: list[tuple[StoredJob, JobDocument]]) -> list[StoredJob | None]:
        return self._executor.settle_jobs(writes)

    def replace_jobs(self, jobs: Iterable[StoredJob]) -> None:
        self._executor.replace_jobs(jobs)

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
