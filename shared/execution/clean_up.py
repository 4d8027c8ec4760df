"""The daily clean-up: history past what is kept, jobs that ended long enough ago, and the classic
API's records of operations that its clients have long stopped polling for."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime, timedelta

from shared.domain import history
from shared.domain.history import KEPT_FOR, MOST_HISTORY, history_to_remove
from shared.logs import app_logger
from shared.storage.errors import StorageError
from shared.storage.interface import Preconditions, Storage

log = app_logger("scheduler.retention")
# A classic client polls an operation for seconds after making it; two days leave room for a
# client that stopped and came back.
OPERATIONS_KEPT_FOR = timedelta(days=2)


def clean_up(storage: Storage, now: datetime) -> tuple[int, int]:
    """Remove expired jobs and surplus history everywhere; (jobs removed, entries removed)."""
    # Entry ids count down from the newest: those older than the cut-off sort after its id.
    older_than_kept = history.expected_prefix(now - KEPT_FOR)
    jobs_removed = entries_removed = 0
    for collection in storage.collections.all_collections():
        for job in storage.jobs.jobs(collection.id):
            if job.document.expired(now):
                with contextlib.suppress(StorageError):  # changed meanwhile: another day
                    jobs_removed += storage.jobs.delete_job(
                        job.id, Preconditions(if_match=job.etag)
                    )
                continue
            counted = job.document.history_count
            # One range read per job finds old entries; only a job with more than its share
            # of entries has all its ids read.
            ids = storage.history.ids(job.id) if counted > MOST_HISTORY else []
            surplus = sorted(
                set(history_to_remove(ids, now)) | set(storage.history.ids(job.id, older_than_kept))
            )
            if not surplus:
                continue
            storage.history.remove(job.id, surplus)
            entries_removed += len(surplus)
            remaining = (len(ids) if ids else counted) - len(surplus)
            # If the job changed meanwhile, its count is put right on another day.
            storage.executor.settle_job(
                job, replace(job.document, history_count=max(remaining, 0)), []
            )
    operations_removed = storage.classic.remove_operations_before(now - OPERATIONS_KEPT_FOR)
    if jobs_removed or entries_removed or operations_removed:
        log.info(
            "clean-up removed %d jobs, %d history entries and %d operation records",
            jobs_removed, entries_removed, operations_removed,
        )  # fmt: skip
    return jobs_removed, entries_removed
