"""What is kept (SPEC.md limits): history for 60 days and at most a job's last 1,000 entries;
Completed and Faulted jobs for 60 days after they ended. A daily timer removes the rest."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from shared.errors import SchedulerError
from shared.execution import Attempt
from shared.jobs import FINAL_STATE_VALUES
from shared.store import Preconditions, Store
from shared.wire import parse_iso

log = logging.getLogger("scheduler.retention")
KEPT_FOR = timedelta(days=60)
MOST_HISTORY = 1000


def expired(document: dict[str, Any], now: datetime) -> bool:
    """Whether a job ended (Completed or Faulted) more than 60 days ago."""
    if document["definition"]["state"] not in FINAL_STATE_VALUES:
        return False
    ended = document.get("endedAt")
    return ended is not None and parse_iso(ended) <= now - KEPT_FOR


def history_to_remove(entry_ids: Iterable[str], now: datetime) -> list[str]:
    """Of a job's history ids (newest first), those beyond the last 1,000 or 60 days old."""
    oldest_kept = now - KEPT_FOR
    return [
        entry
        for place, entry in enumerate(entry_ids)
        if place >= MOST_HISTORY or Attempt.expected_of_history_id(entry) < oldest_kept
    ]


def clean_up(store: Store, now: datetime) -> tuple[int, int]:
    """Remove expired jobs and surplus history everywhere; (jobs removed, entries removed)."""
    # Entry ids count down from the newest: those older than the cut-off sort after its id.
    older_than_kept = Attempt(now - KEPT_FOR).history_id[:20]
    jobs_removed = entries_removed = 0
    for collection in store.all_collections():
        for job in store.jobs(collection.id):
            if expired(job.document, now):
                with contextlib.suppress(SchedulerError):  # changed meanwhile: another day
                    jobs_removed += store.delete_job(job.id, Preconditions(if_match=job.etag))
                continue
            counted = job.document.get("historyCount", 0)
            # One range read per job finds old entries; only a job with more than its share
            # of entries has all its ids read.
            ids = store.history_ids(job.id) if counted > MOST_HISTORY else []
            surplus = sorted(
                set(history_to_remove(ids, now)) | set(store.history_ids(job.id, older_than_kept))
            )
            if not surplus:
                continue
            store.remove_history(job.id, surplus)
            entries_removed += len(surplus)
            remaining = (len(ids) if ids else counted) - len(surplus)
            # If the job changed meanwhile, its count is put right on another day.
            store.settle_job(job, {**job.document, "historyCount": max(remaining, 0)}, [])
    if jobs_removed or entries_removed:
        log.info("clean-up removed %d jobs and %d history entries", jobs_removed, entries_removed)
    return jobs_removed, entries_removed
