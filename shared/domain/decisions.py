"""What the executor does with a delivered attempt (`plan`), and what its outcome changes
(`settle`): pure, `now` passed in.

A job document's `pending` attempts are the truth: a delivery runs only while its attempt is
pending under the same definition, and recording the outcome (one etag-checked write) takes the
attempt out and puts what follows in. So a duplicate delivery of a finished attempt finds it
gone and does nothing, and a job's scheduled occurrences run one at a time, in order.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from shared.domain import history
from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.collection import CollectionState
from shared.domain.job_definition import (
    ActionName,
    HistoryStatus,
    JobState,
)
from shared.domain.job_document import JobDocument
from shared.domain.wire import iso

HistoryEntry = tuple[str, dict[str, Any]]  # (entry id, the entry as the API shows it)
# How long a message sent ahead of its write may wait for that write to land.
SAVE_GRACE = timedelta(seconds=10)


@dataclass(frozen=True)
class Outcome:
    """What performing an action came to."""

    succeeded: bool
    started: datetime
    ended: datetime
    message: str


@dataclass(frozen=True)
class Skip:
    """Nothing to do (the job is gone or changed, or this attempt already finished)."""

    reason: str


@dataclass(frozen=True)
class NotYet:
    """Sent just before the write that makes it pending (the API sends first, so that a crash
    cannot leave a job waiting for a message never sent): look again in a moment."""


@dataclass(frozen=True)
class Park:
    """The job or its collection is not enabled: forget the attempt; enabling schedules anew."""

    document: JobDocument


@dataclass(frozen=True)
class Resend:
    """A redelivered attempt that already finished: what it led to may not have been sent."""

    follow_ups: tuple[Pending, ...]


@dataclass(frozen=True)
class Run:
    """Perform `attempt` (for a late occurrence, the latest one missed); record `postponed`."""

    delivered: Attempt
    attempt: Attempt
    postponed: tuple[datetime, ...] = ()
    passed: int = 1  # occurrences of the series this run settles (itself and those postponed)


Plan = Skip | NotYet | Park | Resend | Run


def plan(
    document: JobDocument | None,
    collection_state: str | None,
    delivery: Delivery,
    *,
    now: datetime,
    redelivered: bool,
) -> Plan:
    """What to do with a delivery of an attempt."""
    attempt = delivery.pending.attempt
    fresh = delivery.sent_at is not None and now - delivery.sent_at < SAVE_GRACE
    if document is None:
        return NotYet() if fresh else Skip("the job no longer exists")
    if document.defined_at != delivery.defined_at:
        if delivery.defined_at > document.defined_at and fresh:
            return NotYet()
        return Skip("the job was redefined after this attempt was scheduled")
    mine = next((entry for entry in document.pending if entry.attempt == attempt), None)
    if mine is None:
        if fresh and not redelivered:
            return NotYet()
        followers = tuple(
            entry for entry in document.pending if entry.attempt.follows_from(attempt)
        )
        if redelivered and followers:
            return Resend(followers)
        return Skip("the attempt already finished (a duplicate delivery)")
    # A run-now runs whatever the job's own state; nothing runs in a collection that is off.
    job_off = not document.enabled and not attempt.run_now
    if job_off or collection_state not in (None, CollectionState.ENABLED.value):
        return Park(document.waiting_for(entry for entry in document.pending if entry is not mine))
    if attempt.run_now or not attempt.starts_occurrence:
        return Run(attempt, attempt)
    return _coalesced(document, attempt, now)


def still_pending(document: JobDocument | None, delivery: Delivery) -> bool:
    """Whether the job still waits for the delivered attempt of the same definition."""
    return (
        document is not None
        and document.defined_at == delivery.defined_at
        and any(entry.attempt == delivery.pending.attempt for entry in document.pending)
    )


def resumed(document: JobDocument, now: datetime) -> tuple[JobDocument, list[Pending]]:
    """An enabled job waiting for no occurrence: its next future one, without catch-up.

    A job that still waits for one (its message is on its way) keeps it: scheduling it again
    would send a second message for the same attempt.
    """
    if (
        not document.enabled
        or any(not entry.attempt.run_now for entry in document.pending)
        or document.series_finished
    ):
        return document, []
    following = document.schedule.next_after(now)
    if following is None:
        return document, []
    added = [Pending(Attempt(following), following)]
    return document.waiting_for([*document.pending, *added]), added


def _coalesced(document: JobDocument, attempt: Attempt, now: datetime) -> Run:
    """The decision on missed occurrences: run the latest once, postpone the others."""
    count = document.schedule.recurrence.count if document.schedule.recurrence else None
    left = None if count is None else max(count - document.occurrences, 1)
    # More Postponed entries than history keeps would be trimmed anyway.
    due = collections.deque([attempt.expected], maxlen=history.MOST_HISTORY + 1)
    passed = 1
    following = document.schedule.next_after(attempt.expected)
    while following is not None and following <= now and (left is None or passed < left):
        due.append(following)
        passed += 1
        following = document.schedule.next_after(following)
    latest = due.pop()
    return Run(attempt, Attempt(latest), postponed=tuple(due), passed=passed)


# --- what an outcome changes ------------------------------------------------------------------


@dataclass(frozen=True)
class Settlement:
    """The job's new document, the history entries to add, and the attempts to schedule."""

    document: JobDocument
    history: list[HistoryEntry]
    follow_ups: list[Pending] = field(default_factory=list)


def settle(document: JobDocument, run: Run, outcome: Outcome, now: datetime) -> Settlement:
    """Record `outcome` of `run` in a document read after the action (it may have changed)."""
    attempt = run.attempt
    entries = [
        (Attempt(expected).history_id, _postponed_entry(expected, attempt.expected, now))
        for expected in run.postponed
    ]
    entry = _entry(attempt, outcome, document, run)
    entries.append((attempt.history_id, entry))
    status = document.status
    if attempt.action is ActionName.MAIN_ACTION:
        status = replace(
            status,
            execution_count=status.execution_count + 1,
            last_execution_time=outcome.started,
            failure_count=status.failure_count + (0 if outcome.succeeded else 1),
        )
    retry = _retry_after(document, attempt, outcome, now)
    follow_ups = [] if retry is None else [retry]
    retries_spent = retry is None or retry.attempt.action is ActionName.ERROR_ACTION
    if attempt.action is ActionName.MAIN_ACTION and not outcome.succeeded and retries_spent:
        status = replace(status, faulted_count=status.faulted_count + 1)
    updated = replace(
        document,
        status=status,
        history_count=document.history_count + len(entries),
        last_attempt={name: value for name, value in entry.items() if name != "message"},
        occurrences=document.occurrences
        + (run.passed if not attempt.run_now and attempt.starts_occurrence else 0),
    )
    if retry is None and not attempt.run_now:
        following = (
            None if updated.series_finished else updated.schedule.next_after(attempt.expected)
        )
        if following is not None:
            follow_ups.append(Pending(Attempt(following), following))
        else:
            # An occurrence that needed its errorAction, or failed without one, ended faulted.
            faulted = attempt.action is ActionName.ERROR_ACTION or not outcome.succeeded
            updated = replace(
                updated.with_state(JobState.FAULTED if faulted else JobState.COMPLETED),
                ended_at=now,
            )
    pending = [entry for entry in document.pending if entry.attempt != run.delivered]
    return Settlement(updated.waiting_for(pending + follow_ups), entries, follow_ups)


def _retry_after(
    document: JobDocument, attempt: Attempt, outcome: Outcome, now: datetime
) -> Pending | None:
    """The attempt that follows a try of an occurrence, if the occurrence is not over."""
    if outcome.succeeded:
        return None
    # The errorAction retries with the same policy as the action.
    retries = document.retries
    if attempt.retry < retries.count:
        return Pending(replace(attempt, retry=attempt.retry + 1), now + retries.interval)
    has_error_action = "errorAction" in document.definition["action"]
    if attempt.action is ActionName.MAIN_ACTION and has_error_action:
        return Pending(replace(attempt, action=ActionName.ERROR_ACTION, retry=0), now)
    return None


def _entry(attempt: Attempt, outcome: Outcome, document: JobDocument, run: Run) -> dict[str, Any]:
    return {
        "startTime": iso(outcome.started),
        "endTime": iso(outcome.ended),
        "expectedExecutionTime": iso(attempt.expected),
        "actionName": attempt.action.value,
        "status": (HistoryStatus.COMPLETED if outcome.succeeded else HistoryStatus.FAILED).value,
        "message": outcome.message,
        "retryCount": attempt.retry,
        "repeatCount": _occurrence_number(attempt, document, run),
    }


def _occurrence_number(attempt: Attempt, document: JobDocument, run: Run) -> int:
    """Which occurrence of the series an attempt belongs to (0 for a run-now)."""
    if attempt.run_now:
        return 0
    return document.occurrences + (run.passed if attempt.starts_occurrence else 0)


def _postponed_entry(expected: datetime, ran_instead: datetime, now: datetime) -> dict[str, Any]:
    return {
        "startTime": iso(now),
        "endTime": iso(now),
        "expectedExecutionTime": iso(expected),
        "actionName": ActionName.MAIN_ACTION.value,
        "status": HistoryStatus.POSTPONED.value,
        "message": (
            "Postponed: the service was down or behind at the expected time; the job ran once, "
            f"for the latest occurrence missed ({iso(ran_instead)}), instead."
        ),
        "retryCount": 0,
        "repeatCount": 0,
    }
