"""Jobs as this process last wrote or read them: the read a delivery can do without at its time.

A recurring job's next occurrence is most often handled by the process that recorded the last
one, and that process knows what it wrote (the document and its new etag); a message that comes
early has its jobs read while it waits (`ExecutionWorker.read_ahead`). A delivery starts from
that instead of reading the job at its due time; this is safe because a known job is only ever
acted on through a write made on its etag: if anyone changed the job since (the API, another
process, a delete), that write fails, the job is forgotten, and the delivery reads it from
storage and decides again. A decision that writes nothing (skip, come back later) is never
taken on a known job alone: it is taken again on a fresh read (`ExecutionWorker._start`).

So a stale entry costs one failed write, never a wrong action. At most MOST_KNOWN jobs are
kept, the least recently used going first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from shared.domain.ids import JobId
from shared.storage.interface import StoredJob

# About 3 KB each: 30 MB at most. A process runs about 100 executions a second (a job's
# occurrence every minute or less: 6,000 jobs), so recurring jobs stay known between runs.
MOST_KNOWN = 10_000


class KnownJobs:
    def __init__(self, most: int = MOST_KNOWN) -> None:
        self._most = most
        self._jobs: OrderedDict[JobId, StoredJob] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, job: JobId) -> StoredJob | None:
        with self._lock:
            found = self._jobs.get(job)
            if found is not None:
                self._jobs.move_to_end(job)
            return found

    def remember(self, stored: StoredJob) -> None:
        """`stored` as this process just wrote it (its etag is the one storage answered)."""
        with self._lock:
            self._jobs[stored.id] = stored
            self._jobs.move_to_end(stored.id)
            self._keep_most()

    def offer(self, stored: StoredJob) -> None:
        """`stored` as this process read it: kept unless the job is known already, since a
        write this process made while the read was under way is the newer."""
        with self._lock:
            if stored.id not in self._jobs:
                self._jobs[stored.id] = stored
                self._keep_most()

    def forget(self, job: JobId) -> None:
        with self._lock:
            self._jobs.pop(job, None)

    def _keep_most(self) -> None:
        while len(self._jobs) > self._most:
            self._jobs.popitem(last=False)
