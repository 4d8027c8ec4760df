"""Which jobs a collection holds, as far as this process knows: learnt when it created the
collection (none yet) or listed the collection's jobs, and kept current by its own creates,
reads and deletes.

A create of a name known to be absent goes without reading the job first. Knowledge out of date
costs requests, never a wrong write: a job another process created meanwhile makes the insert
fail (the name is taken), and then the job is read; one it deleted is read and found missing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

# Collections whose job names a process remembers (a name is a few dozen bytes).
REMEMBERED_COLLECTIONS = 1024
# A collection holding more jobs than this is not remembered: listing it would cost more
# requests than the reads it saves.
REMEMBERED_NAMES = 1000


class JobNames:
    """The job rows of each collection's jobs partition that this process knows exist."""

    def __init__(self, remembered: int = REMEMBERED_COLLECTIONS) -> None:
        # By partition; None: listed once, too many to remember.
        self._known: OrderedDict[str, set[str] | None] = OrderedDict()
        self._remembered = remembered
        self._lock = threading.Lock()

    def absent(self, partition: str, row: str) -> bool | None:
        """Whether the job is known to be absent; False when it is believed to exist, or the
        collection holds too many jobs to remember; None when this process knows nothing of the
        collection's names."""
        with self._lock:
            if partition not in self._known:
                return None
            self._known.move_to_end(partition)
            names = self._known[partition]
            return names is not None and row not in names

    def learn(self, partition: str, rows: Iterable[str] | None) -> None:
        """The collection's job rows, all of them (None: too many to remember)."""
        with self._lock:
            self._known[partition] = None if rows is None else set(rows)
            self._known.move_to_end(partition)
            while len(self._known) > self._remembered:
                self._known.popitem(last=False)

    def seen(self, partition: str, row: str, *, there: bool) -> None:
        """A job this process just found, created, deleted or missed (nothing, if it knows
        nothing of the collection)."""
        with self._lock:
            names = self._known.get(partition)
            if names is None:
                return
            if there:
                names.add(row)
            else:
                names.discard(row)

    def forget(self, partition: str) -> None:
        with self._lock:
            self._known.pop(partition, None)
