"""What the executor does with one queue message (SPEC.md section 4): pure, `now` passed in.

An occurrence is its job plus its expected time; each try of it (the main action, its retries,
then the errorAction and its retries) is an `Attempt`. A job document keeps the attempts it is
waiting for in `pending`, and that list is the truth: a message runs only while its attempt is
pending under the same definition, and recording the outcome (one etag-checked write) takes the
attempt out and puts what follows in. So a duplicate delivery of a finished attempt finds it gone
and does nothing, and a job's scheduled occurrences run one at a time, in order.

`occurrences` in the document counts the occurrences of the current definition that have passed
(run or postponed); it is what `recurrence.count` bounds.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from shared.domain import history
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import (
    ActionName,
    HistoryStatus,
    JobState,
    RetryType,
    read_duration,
)
from shared.domain.job_document import fresh_status, occurrences_of
from shared.domain.wire import iso, parse_iso


@dataclass(frozen=True)
class Attempt:
    """One try of one occurrence: what a queue message carries and a history entry records."""

    expected: datetime
    action: ActionName = ActionName.MAIN_ACTION
    retry: int = 0
    run_now: bool = False

    @property
    def starts_occurrence(self) -> bool:
        return self.action is ActionName.MAIN_ACTION and self.retry == 0

    @property
    def history_id(self) -> str:
        """The id of this attempt's history entry: newest occurrence first, then latest try."""
        step = self.retry + (50 if self.action is ActionName.ERROR_ACTION else 0)
        return history.entry_id(self.expected, step, self.run_now)

    def follows_from(self, earlier: Attempt) -> bool:
        """Whether this attempt can be what `earlier` led to (the same chain)."""
        if earlier.run_now:
            return self.run_now and self.expected == earlier.expected
        return not self.run_now

    def to_wire(self) -> dict[str, Any]:
        return {
            "expected": iso(self.expected),
            "action": self.action.value,
            "retry": self.retry,
            "runNow": self.run_now,
        }

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Attempt:
        return cls(
            expected=parse_iso(wire["expected"]),
            action=ActionName(wire["action"]),
            retry=int(wire["retry"]),
            run_now=bool(wire["runNow"]),
        )


def execution_id(job: JobId, attempt: Attempt) -> str:
    """The occurrence's identity: its job and expected time (and whether it was a run-now).

    The same on every retry and duplicate delivery of the occurrence, so receivers (and logs)
    can tell them apart from other occurrences.
    """
    kind = "run-now" if attempt.run_now else "scheduled"
    seed = f"{job.arm_id.lower()}|{iso(attempt.expected)}|{kind}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Pending:
    """An attempt a job waits for, and when it is due."""

    attempt: Attempt
    due: datetime

    def to_wire(self) -> dict[str, Any]:
        return {**self.attempt.to_wire(), "due": iso(self.due)}

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Pending:
        return cls(Attempt.from_wire(wire), parse_iso(wire["due"]))


@dataclass(frozen=True)
class Delivery:
    """A pending attempt of one job's definition, as a queue message or due-index row carries it."""

    job: JobId
    defined_at: str
    pending: Pending
    sent_at: datetime | None = None  # when it was put on the queue

    def to_message(self) -> dict[str, Any]:
        collection = self.job.collection
        sent = {} if self.sent_at is None else {"sentAt": iso(self.sent_at)}
        return sent | {
            "job": {
                "subscription": collection.subscription,
                "resourceGroup": collection.resource_group,
                "collection": collection.name,
                "job": self.job.name,
            },
            "definedAt": self.defined_at,
            "attempt": self.pending.to_wire(),
        }

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> Delivery:
        """The delivery a message describes; KeyError, TypeError or ValueError if malformed."""
        job = message["job"]
        collection = CollectionId(job["subscription"], job["resourceGroup"], job["collection"])
        sent_at = message.get("sentAt")
        return cls(
            JobId(collection, job["job"]),
            str(message["definedAt"]),
            Pending.from_wire(message["attempt"]),
            parse_iso(sent_at) if sent_at else None,
        )


MOST_PER_MESSAGE = 64  # deliveries one queue message carries: ~30 KiB, inside the 64 KiB limit


def message_of(deliveries: Sequence[Delivery]) -> dict[str, Any]:
    """One queue message for deliveries due in the same second (one alone: its own shape)."""
    if len(deliveries) == 1:
        return deliveries[0].to_message()
    return {"deliveries": [delivery.to_message() for delivery in deliveries]}


def deliveries_of(message: dict[str, Any]) -> list[Delivery]:
    """What a queue message carries; KeyError, TypeError or ValueError if malformed."""
    if "deliveries" not in message:
        return [Delivery.from_message(message)]
    carried = message["deliveries"]
    if not isinstance(carried, list) or not carried:
        raise ValueError("'deliveries' must be a list of at least one delivery")
    return [Delivery.from_message(item) for item in carried]


@dataclass(frozen=True)
class Outcome:
    """What performing an action came to."""

    succeeded: bool
    started: datetime
    ended: datetime
    message: str


# --- what to do with a delivered attempt ------------------------------------------------------


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

    document: dict[str, Any]


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
# How long a message sent ahead of its write may wait for that write to land.
SAVE_GRACE = timedelta(seconds=10)


def defined_document(
    definition: dict[str, Any], defined_at: datetime, previous: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[Pending]]:
    """The document of a definition saved at `defined_at`, and what it waits for.

    A new definition starts its schedule afresh; the counts of what already ran (`previous`,
    the document it replaces) stay.
    """
    status = fresh_status(definition, defined_at)
    if previous is not None:
        kept = ("executionCount", "failureCount", "faultedCount", "lastExecutionTime")
        status |= {name: previous["status"][name] for name in kept if name in previous["status"]}
    pending = first_pending(definition, defined_at)
    document = {
        "definition": definition,
        "status": status,
        "definedAt": iso(defined_at),
        "occurrences": 0,
    }
    return with_pending(document, pending), pending


def first_pending(definition: dict[str, Any], defined_at: datetime) -> list[Pending]:
    """What a newly saved definition waits for: its first occurrence, if it is enabled."""
    if definition["state"] != JobState.ENABLED.value:
        return []
    first = occurrences_of(definition, defined_at).first
    return [] if first is None else [Pending(Attempt(first), first)]


def resumed(document: dict[str, Any], now: datetime) -> tuple[dict[str, Any], list[Pending]]:
    """An enabled job waiting for no occurrence: its next future one, without catch-up.

    A job that still waits for one (its message is on its way) keeps it: scheduling it again
    would send a second message for the same attempt.
    """
    pending = pending_of(document)
    definition = document["definition"]
    if (
        definition["state"] != JobState.ENABLED.value
        or any(not entry.attempt.run_now for entry in pending)
        or _series_finished(definition, document.get("occurrences", 0))
    ):
        return document, []
    occurrences = occurrences_of(definition, parse_iso(document["definedAt"]))
    following = occurrences.next_after(now)
    if following is None:
        return document, []
    added = [Pending(Attempt(following), following)]
    return with_pending(document, pending + added), added


def still_pending(document: dict[str, Any] | None, delivery: Delivery) -> bool:
    """Whether the job still waits for the delivered attempt of the same definition."""
    return (
        document is not None
        and document["definedAt"] == delivery.defined_at
        and any(entry.attempt == delivery.pending.attempt for entry in pending_of(document))
    )


def pending_of(document: dict[str, Any]) -> list[Pending]:
    return [Pending.from_wire(entry) for entry in document.get("pending", ())]


def with_pending(document: dict[str, Any], pending: list[Pending]) -> dict[str, Any]:
    """The document waiting for `pending`, its nextExecutionTime following the schedule."""
    status = {**document["status"]}
    status.pop("nextExecutionTime", None)
    scheduled = [entry.due for entry in pending if not entry.attempt.run_now]
    if scheduled and document["definition"]["state"] == JobState.ENABLED.value:
        status["nextExecutionTime"] = iso(min(scheduled))
    return {**document, "status": status, "pending": [entry.to_wire() for entry in pending]}


def plan(
    document: dict[str, Any] | None,
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
    if document["definedAt"] != delivery.defined_at:
        newer = parse_iso(delivery.defined_at) > parse_iso(document["definedAt"])
        if newer and fresh:
            return NotYet()
        return Skip("the job was redefined after this attempt was scheduled")
    pending = pending_of(document)
    mine = next((entry for entry in pending if entry.attempt == attempt), None)
    if mine is None:
        if fresh and not redelivered:
            return NotYet()
        followers = tuple(entry for entry in pending if entry.attempt.follows_from(attempt))
        if redelivered and followers:
            return Resend(followers)
        return Skip("the attempt already finished (a duplicate delivery)")
    enabled = JobState.ENABLED.value
    # A run-now runs whatever the job's own state; nothing runs in a collection that is off.
    job_off = document["definition"]["state"] != enabled and not attempt.run_now
    if job_off or collection_state not in (None, enabled):
        return Park(with_pending(document, [entry for entry in pending if entry is not mine]))
    if attempt.run_now or not attempt.starts_occurrence:
        return Run(attempt, attempt)
    return _coalesced(document, attempt, now)


def _coalesced(document: dict[str, Any], attempt: Attempt, now: datetime) -> Run:
    """SPEC's decision on missed occurrences: run the latest once, postpone the others."""
    definition = document["definition"]
    occurrences = occurrences_of(definition, parse_iso(document["definedAt"]))
    count = (definition.get("recurrence") or {}).get("count")
    left = None if count is None else max(count - document.get("occurrences", 0), 1)
    # More Postponed entries than history keeps would be trimmed anyway.
    due = collections.deque([attempt.expected], maxlen=history.MOST_HISTORY + 1)
    passed = 1
    following = occurrences.next_after(attempt.expected)
    while following is not None and following <= now and (left is None or passed < left):
        due.append(following)
        passed += 1
        following = occurrences.next_after(following)
    latest = due.pop()
    return Run(attempt, Attempt(latest), postponed=tuple(due), passed=passed)


# --- what an outcome changes ------------------------------------------------------------------


@dataclass(frozen=True)
class Settlement:
    """The job's new document, the history entries to add, and the attempts to schedule."""

    document: dict[str, Any]
    history: list[tuple[str, dict[str, Any]]]
    follow_ups: list[Pending] = field(default_factory=list)


def settle(document: dict[str, Any], run: Run, outcome: Outcome, now: datetime) -> Settlement:
    """Record `outcome` of `run` in a document read after the action (it may have changed)."""
    definition = document["definition"]
    attempt = run.attempt
    status = {**document["status"]}
    changes: dict[str, Any] = {}
    history = [
        (Attempt(expected).history_id, _postponed_entry(expected, attempt.expected, now))
        for expected in run.postponed
    ]
    history.append((attempt.history_id, _entry(attempt, outcome, document, run)))
    # Counted so that the daily clean-up reads only the history of jobs that have too much.
    changes["historyCount"] = document.get("historyCount", 0) + len(history)
    if not attempt.run_now and attempt.starts_occurrence:
        changes["occurrences"] = document.get("occurrences", 0) + run.passed
    if attempt.action is ActionName.MAIN_ACTION:
        status["executionCount"] = status.get("executionCount", 0) + 1
        status["lastExecutionTime"] = iso(outcome.started)
        if not outcome.succeeded:
            status["failureCount"] = status.get("failureCount", 0) + 1
    retry = _retry_after(definition, attempt, outcome, now)
    follow_ups = [] if retry is None else [retry]
    retries_spent = retry is None or retry.attempt.action is ActionName.ERROR_ACTION
    if attempt.action is ActionName.MAIN_ACTION and not outcome.succeeded and retries_spent:
        status["faultedCount"] = status.get("faultedCount", 0) + 1
    # An occurrence that needed its errorAction, or failed without one, ended faulted.
    faulted = attempt.action is ActionName.ERROR_ACTION or not outcome.succeeded
    pending = [entry for entry in pending_of(document) if entry.attempt != run.delivered]
    updated = {**document, **changes, "status": status}
    if retry is None and not attempt.run_now:
        following = _next_occurrence(updated, attempt.expected)
        if following is not None:
            follow_ups.append(Pending(Attempt(following), following))
        else:
            updated["definition"] = {
                **definition,
                "state": (JobState.FAULTED if faulted else JobState.COMPLETED).value,
            }
            updated["endedAt"] = iso(now)
    return Settlement(with_pending(updated, pending + follow_ups), history, follow_ups)


def _retry_after(
    definition: dict[str, Any], attempt: Attempt, outcome: Outcome, now: datetime
) -> Pending | None:
    """The attempt that follows a try of an occurrence, if the occurrence is not over."""
    if outcome.succeeded:
        return None
    # SPEC: the errorAction retries with the same policy as the action.
    policy = definition["action"].get("retryPolicy") or {}
    if policy.get("retryType") == RetryType.FIXED.value and attempt.retry < policy["retryCount"]:
        interval = read_duration(policy["retryInterval"])
        return Pending(replace(attempt, retry=attempt.retry + 1), now + interval)
    if attempt.action is ActionName.MAIN_ACTION and definition["action"].get("errorAction"):
        return Pending(replace(attempt, action=ActionName.ERROR_ACTION, retry=0), now)
    return None


def _next_occurrence(document: dict[str, Any], after: datetime) -> datetime | None:
    definition = document["definition"]
    if _series_finished(definition, document.get("occurrences", 0)):
        return None
    occurrences = occurrences_of(definition, parse_iso(document["definedAt"]))
    return occurrences.next_after(after)


def _series_finished(definition: dict[str, Any], passed: int) -> bool:
    if not definition.get("recurrence"):
        return passed >= 1
    count = definition["recurrence"].get("count")
    return count is not None and passed >= count


def _entry(
    attempt: Attempt, outcome: Outcome, document: dict[str, Any], run: Run
) -> dict[str, Any]:
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


def _occurrence_number(attempt: Attempt, document: dict[str, Any], run: Run) -> int:
    """Which occurrence of the series an attempt belongs to (0 for a run-now)."""
    if attempt.run_now:
        return 0
    passed = document.get("occurrences", 0)
    return passed + run.passed if attempt.starts_occurrence else passed


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
