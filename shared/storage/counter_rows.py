"""A collection's job count, in counter rows (stripes) of its jobs partition: what each row may
count, and what a process remembers of them.

Each row has its own share of maxJobCount (its allotment), so that a creator checks the quota on
the one row it writes, etag-checked, and no creator reads or verifies the others' rows. Counts of
collections made when there were eight rows, without allotments, are spread anew over the sixteen
before the first create that finds a row over its allotment (job_counting.py, `balance`). The
writes themselves are job_counting.py's.
"""

from __future__ import annotations

import random
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from shared.storage.keys import COUNTER_PREFIX

COUNTER_SHARDS = 16
COUNTER_ROWS = tuple(f"{COUNTER_PREFIX}{stripe}" for stripe in range(COUNTER_SHARDS))

# A counter write in a collection far from its quota takes a few places more than its creators
# need: spares, from which this process's next creators of the collection take one each without
# any counter write. Spares unused for SPARES_KEPT_FOR_S go back. Only while the collection keeps
# SPARE_HEADROOM places free beyond them (and the row room for as many again) are spares taken,
# so they can keep a creator of another process out of a place only if that process filled the
# last SPARE_HEADROOM places within about SPARES_KEPT_FOR_S.
SPARE_PLACES = 4
SPARES_KEPT_FOR_S = 2.0
SPARE_HEADROOM = 256
# Collections whose counter rows a process remembers (their counts and etags).
REMEMBERED_COLLECTIONS = 4096
_WRITER_LOCKS = 256


@dataclass(frozen=True)
class Counter:
    """One counter row as read or last written: the jobs it counts, its etag (None: no row yet)
    and when it was last written (None: not known)."""

    jobs: int
    etag: str | None
    written_at: datetime | None = None


@dataclass
class CountingRound:
    """Creators of one collection in this process that wait for one counter write to count
    them all: each gets the counter row it is counted in, or why it is not."""

    creators: int = 1
    outcomes: list[tuple[str, float] | BaseException] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


class CounterRows:
    """What this process last read or wrote of each collection's counter rows, and the creators
    that wait for their counter write.

    Creators of one collection in one process gather: one of them writes a row with room for
    all who came while the previous write was under way (group commit), with the etag it
    remembers, so that counting a job costs a fraction of a write, and the process never races
    itself. A stale memory (another process wrote the row) costs a lost race (412), after which
    the rows are read again.
    """

    def __init__(self, remembered: int = REMEMBERED_COLLECTIONS) -> None:
        self._known: OrderedDict[str, dict[str, Counter]] = OrderedDict()
        self._rounds: dict[str, CountingRound] = {}
        # Spare places by collection: (row, monotonic time before the write that took it); and
        # those on their way back, still counted as this process's until their write lands.
        self._spares: dict[str, list[tuple[str, float]]] = {}
        self._returning: dict[str, list[str]] = {}
        self._returner = False  # whether a thread is giving back spares
        # One counter write under way per collection: a few locks shared by all collections
        # (two that share one only take turns), so none needs cleaning up.
        self._writers = [threading.Lock() for _ in range(_WRITER_LOCKS)]
        self._remembered = remembered
        self._lock = threading.Lock()

    def known(self, partition: str) -> dict[str, Counter] | None:
        with self._lock:
            rows = self._known.get(partition)
            if rows is not None:
                self._known.move_to_end(partition)
            return None if rows is None else dict(rows)

    def remember(self, partition: str, rows: dict[str, Counter]) -> None:
        with self._lock:
            self._known[partition] = dict(rows)
            self._known.move_to_end(partition)
            while len(self._known) > self._remembered:
                self._known.popitem(last=False)

    def note(self, partition: str, row: str, counter: Counter) -> None:
        """A row as this process just wrote it (nothing, if the collection is not remembered)."""
        with self._lock:
            if partition in self._known:
                self._known[partition][row] = counter

    def forget(self, partition: str) -> None:
        with self._lock:
            self._known.pop(partition, None)

    def drop(self, partition: str) -> None:
        """Forget a deleted collection's rows, and its spare places with them: they were places
        in rows that no longer exist, and must not count jobs of a collection created anew."""
        with self._lock:
            self._known.pop(partition, None)
            self._spares.pop(partition, None)
            self._returning.pop(partition, None)

    def join(self, partition: str) -> tuple[CountingRound, int]:
        """The counting round a creator waits in, and its place in it (0: it writes for all)."""
        with self._lock:
            gathering = self._rounds.get(partition)
            if gathering is None:
                gathering = self._rounds[partition] = CountingRound()
                return gathering, 0
            gathering.creators += 1
            return gathering, gathering.creators - 1

    def writer(self, partition: str) -> threading.Lock:
        return self._writers[zlib.crc32(partition.encode()) % _WRITER_LOCKS]

    def take_spare(self, partition: str, now: float, kept_for: float) -> tuple[str, float] | None:
        """A spare place of the collection taken less than `kept_for` seconds before `now`."""
        with self._lock:
            spares = self._spares.get(partition, [])
            for index, (_, since) in enumerate(spares):
                if now - since < kept_for:
                    return spares.pop(index)
            return None

    def add_spares(self, partition: str, row: str, places: int, since: float) -> bool:
        """Keep spare places; whether a thread to give them back must be started."""
        with self._lock:
            self._spares.setdefault(partition, []).extend([(row, since)] * places)
            start, self._returner = not self._returner, True
            return start

    def spares(self, partition: str) -> dict[str, int]:
        """This process's places in the collection's rows that no job uses, by row."""
        with self._lock:
            rows = [row for row, _ in self._spares.get(partition, [])]
            rows += self._returning.get(partition, [])
            return {row: rows.count(row) for row in set(rows)}

    def expired(self, now: float, kept_for: float) -> list[tuple[str, str, float]] | None:
        """Spares older than `kept_for`, now on their way back, as (partition, row, since); None
        when there are no spares left at all (then the thread giving them back ends)."""
        with self._lock:
            if not any(self._spares.values()) and not any(self._returning.values()):
                self._returner = False
                return None
            old = []
            for partition, spares in self._spares.items():
                old += [(partition, row, since) for row, since in spares if now - since >= kept_for]
                spares[:] = [(row, since) for row, since in spares if now - since < kept_for]
                self._returning.setdefault(partition, []).extend(
                    row for part, row, _ in old if part == partition
                )
            for partition in [
                partition for partition, spares in self._spares.items() if not spares
            ]:
                del self._spares[partition]
            return old

    def returned(self, partition: str, row: str) -> None:
        with self._lock:
            returning = self._returning.get(partition, [])
            if row in returning:
                returning.remove(row)
            if not returning:
                self._returning.pop(partition, None)

    def close(self, partition: str, gathering: CountingRound) -> int:
        """No one joins `gathering` any more; how many creators it holds."""
        with self._lock:
            if self._rounds.get(partition) is gathering:
                del self._rounds[partition]
            return gathering.creators


def allotment_of(row: str, max_jobs: int | None) -> int | None:
    """The share of `max_jobs` that a counter row may count (None: no limit). The shares add up
    to `max_jobs`; rows of stripes that no longer exist have none."""
    stripe = row.removeprefix(COUNTER_PREFIX)
    if not stripe.isdigit() or int(stripe) >= COUNTER_SHARDS:
        return 0
    if max_jobs is None:
        return None
    return max_jobs // COUNTER_SHARDS + (1 if int(stripe) < max_jobs % COUNTER_SHARDS else 0)


def room_in(row: str, counter: Counter, max_jobs: int | None) -> int | None:
    """How many more jobs a counter row may count (None: any number)."""
    share = allotment_of(row, max_jobs)
    return None if share is None else max(share - counter.jobs, 0)


def roomiest_row(rows: dict[str, Counter], max_jobs: int | None) -> tuple[str, int | None]:
    """A counter row with the most room, and its room: rows fill evenly, and creators of other
    processes seldom want the same one (ties go to chance). Unlimited, one that counts the
    fewest jobs."""
    nothing = Counter(0, None)
    if max_jobs is None:
        fewest = min(rows.get(row, nothing).jobs for row in COUNTER_ROWS)
        ties = [row for row in COUNTER_ROWS if rows.get(row, nothing).jobs == fewest]
        return random.choice(ties), None
    room = {row: room_in(row, rows.get(row, nothing), max_jobs) or 0 for row in COUNTER_ROWS}
    most = max(room.values())
    return random.choice([row for row, places in room.items() if places == most]), most


def far_from_quota(
    rows: dict[str, Counter], room: int | None, places: int, max_jobs: int | None
) -> bool:
    """Whether a counter write of `places` in a row with `room` may take spares beside them."""
    if max_jobs is None or room is None:
        return True
    counted = sum(counter.jobs for counter in rows.values()) + places + SPARE_PLACES
    return room >= places + 2 * SPARE_PLACES and counted <= max_jobs - SPARE_HEADROOM


def unbalanced(rows: dict[str, Counter], max_jobs: int | None) -> bool:
    """Whether a row counts more than its allotment while another has room: then the rows with
    room do not tell how much room the collection has."""
    if max_jobs is None:
        return False
    over = any(counter.jobs > (allotment_of(row, max_jobs) or 0) for row, counter in rows.items())
    return over and roomiest_row(rows, max_jobs)[1] != 0
