"""A job's history: how entries are named and ordered, and how much of it is kept.

An entry's id begins with its occurrence's expected time counted down from a far future, so that
ids sort newest first; the rest says which try of the occurrence it records.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NotRequired, TypedDict

from shared.domain.job_definition import ActionName, HistoryStatus
from shared.domain.wire import EPOCH, iso, ticks

KEPT_FOR = timedelta(days=60)  # history, and jobs after they completed or faulted
MOST_HISTORY = 1000  # entries kept per job, the newest
_LATEST_TICKS = 10**19


class HistoryProperties(TypedDict):
    """A history entry's properties, as the API shows them and storage keeps them."""

    startTime: str
    endTime: str
    expectedExecutionTime: str
    actionName: str
    status: str
    # Always there in an entry; left out of a job's last attempt, which the job's document keeps
    # for the console (the message can be long).
    message: NotRequired[str]
    retryCount: int
    repeatCount: int


HistoryEntry = tuple[str, HistoryProperties]  # (entry id, the entry)


def entry_id(expected: datetime, step: int, run_now: bool) -> str:
    """The id of the entry for try `step` (0..99) of the occurrence expected at `expected`."""
    kind = "r" if run_now else "s"
    return f"{expected_prefix(expected)}-{kind}{99 - step:02d}"


def expected_prefix(expected: datetime) -> str:
    """What every id of an occurrence expected at `expected` begins with; later ones sort first."""
    return f"{_LATEST_TICKS - ticks(expected):020d}"


def expected_of(entry: str) -> datetime:
    """The expected time an entry id encodes."""
    remaining = _LATEST_TICKS - int(entry[:20])
    return EPOCH + timedelta(microseconds=remaining // 10)


def history_to_remove(entry_ids: Iterable[str], now: datetime) -> list[str]:
    """Of a job's history ids (newest first), those beyond the last 1,000 or 60 days old."""
    oldest_kept = now - KEPT_FOR
    return [
        entry
        for place, entry in enumerate(entry_ids)
        if place >= MOST_HISTORY or expected_of(entry) < oldest_kept
    ]


def not_run_entry(expected: datetime, message: str, now: datetime) -> HistoryProperties:
    """The entry of an occurrence that did not run at its time: Postponed, the only status
    history has for that, and `message` says why."""
    return {
        "startTime": iso(now),
        "endTime": iso(now),
        "expectedExecutionTime": iso(expected),
        "actionName": ActionName.MAIN_ACTION.value,
        "status": HistoryStatus.POSTPONED.value,
        "message": message,
        "retryCount": 0,
        "repeatCount": 0,
    }
