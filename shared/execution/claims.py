"""Claims written together: one batch for the jobs of a collection claimed at about one moment.

Before a try calls its target, its delivery claims it in the job's document (an etag-checked
write; docs/architecture.md#claims). Many jobs of a collection often fall due in the same second,
and their jobs share a table partition, so their claims can share a batch: the first delivery of
a collection writes its claim at once, and those that come while that write is under way wait
and go in the next batch, written by the first of them (group commit). A claim then costs a
fraction of a request where jobs fall due together, and one request, no wait, where they do not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.domain.ids import JobId
from shared.domain.job_document import JobDocument
from shared.storage.interface import StoredJob
from shared.storage.keys import jobs_partition

# What one table batch may hold (Table Storage's limit).
MOST_PER_BATCH = 100
WriteAll = Callable[[list[tuple[StoredJob, JobDocument]]], list[StoredJob | None]]


@dataclass
class _Claim:
    stored: StoredJob
    document: JobDocument
    turn: threading.Event = field(default_factory=threading.Event)
    leads: bool = False  # told to write the next batch, rather than written by another
    written: StoredJob | None = None
    failure: BaseException | None = None


class GroupedClaims:
    def __init__(self, write_all: WriteAll) -> None:
        """`write_all`: writes one collection's documents in one batch, each etag-checked
        (`ExecutorStore.settle_jobs`)."""
        self._write_all = write_all
        self._lock = threading.Lock()
        self._waiting: dict[str, list[_Claim]] = {}
        self._writing: set[str] = set()  # partitions with a batch under way

    def write(self, stored: StoredJob, document: JobDocument) -> StoredJob | None:
        """Write `document` if the job is as `stored` read it: the job as written, or None when
        another writer changed it first. Raises what the write raised."""
        partition = jobs_partition(stored.id.collection)
        mine = _Claim(stored, document)
        with self._lock:
            self._waiting.setdefault(partition, []).append(mine)
            mine.leads = partition not in self._writing
            self._writing.add(partition)
        if not mine.leads:
            mine.turn.wait()
        if mine.leads:
            self._write_batch(partition)
        if mine.failure is not None:
            raise mine.failure
        return mine.written

    def _write_batch(self, partition: str) -> None:
        with self._lock:
            batch: list[_Claim] = []
            later: list[_Claim] = []
            jobs: set[JobId] = set()
            for claim in self._waiting.pop(partition, []):
                # A batch may not touch one row twice: a job's second claim goes next time (and
                # loses its race then, unless the first lost too).
                if len(batch) < MOST_PER_BATCH and claim.stored.id not in jobs:
                    batch.append(claim)
                    jobs.add(claim.stored.id)
                else:
                    later.append(claim)
            if later:
                self._waiting[partition] = later
        try:
            written = self._write_all([(claim.stored, claim.document) for claim in batch])
        except BaseException as failure:
            for claim in batch:
                claim.failure = failure
        else:
            for claim, outcome in zip(batch, written, strict=True):
                claim.written = outcome
        with self._lock:
            following = self._waiting.get(partition)
            if following:
                following[0].leads = True
                following[0].turn.set()  # the first of those waiting writes the next batch
            else:
                self._writing.discard(partition)
        for claim in batch:
            claim.turn.set()
