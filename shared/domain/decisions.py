"""What the executor does with a delivered attempt (`plan`), and what its outcome changes
(`settle`): pure, `now` passed in.

A job document's `pending` attempts are the truth: a delivery runs only while its attempt is
pending under the same definition, and recording the outcome (one etag-checked write) takes the
attempt out and puts what follows in. So a duplicate delivery of a finished attempt finds it
gone and does nothing, and a job's scheduled occurrences run one at a time, in order, unless
its overlapPolicy is Allow: then each occurrence is recorded as begun (`Begin`), its successor
scheduled, before its action runs (docs/behaviour.md#overlapping-occurrences).

Before a try calls its target, its delivery claims it (`JobDocument.claimed`): the pending
entry records the delivery as its holder until the try's timeout and a margin have passed, in a
write checked against the document the plan was made on. A second delivery that finds a live
claim does not call (`Held`): it looks again once the claim has run out, and takes the try over
if it is still pending then (its holder died before recording it). So a target is called twice
for one try only when its holder dies after the call left and before the outcome was written.
"""

from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from shared.domain import history
from shared.domain.attempts import Attempt, Delivery, Pending, execution_id
from shared.domain.collection import CollectionState
from shared.domain.excluded_history import excluded_before
from shared.domain.history import HistoryEntry, HistoryProperties
from shared.domain.ids import JobId
from shared.domain.job_definition import (
    ActionName,
    HistoryStatus,
    JobState,
    OverlapPolicy,
)
from shared.domain.job_document import JobDocument, Retries
from shared.domain.wire import iso

# How long a message sent ahead of its write may wait for that write to land. A delivery keeps
# the time it was first sent across every re-send, so one whose write never landed (refused,
# or the writer crashed) is dropped this long after it was first sent, and no later.
SAVE_GRACE = timedelta(seconds=10)
# Exponential retries wait up to this share of their wait more or less, so that the jobs a
# failing target fails together do not all come back at the same instant.
RETRY_JITTER = 0.2
# Under overlapPolicy Allow, occurrences of one job running at once, at most: each holds an
# attempt in the job's document, which must stay small; one more falling due is skipped.
MOST_ALONGSIDE = 5


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
    cannot leave a job waiting for a message never sent): look again in a moment. Only within
    SAVE_GRACE of the delivery's first send: then the write has landed, or never will."""


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
    # Why the occurrences postponed were missed. Under overlapPolicy Wait, an occurrence is sent
    # only when the one before it has ended: when that was after its time, until then the
    # previous occurrence was still running. What was missed after that, or was sent on time,
    # the executor reached late (at `reached`): the service was down or behind.
    previous_until: datetime | None = None
    reached: datetime | None = None


@dataclass(frozen=True)
class Begin:
    """Under overlapPolicy Allow: record that an occurrence begins (counted, the next one
    scheduled) and send `settlement.follow_ups`, before the action, so that the next occurrence
    starts on time however long this one runs. Then perform `run`; None: the occurrence is not
    run (MOST_ALONGSIDE are running), and the settlement records it skipped."""

    settlement: Settlement
    run: Run | None


@dataclass(frozen=True)
class Held:
    """Another delivery claimed the try and may be calling its target: do not call; look again
    when the claim runs out (`until`), and take the try over then if it is still pending."""

    until: datetime


Plan = Skip | NotYet | Park | Resend | Run | Begin | Held


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
        if fresh:
            return NotYet()
        return Skip(
            "the job does not exist: it was deleted, or the write that created it was refused"
        )
    if document.defined_at != delivery.defined_at:
        if delivery.defined_at < document.defined_at:
            return Skip("the job was redefined after this attempt was scheduled")
        if fresh:
            return NotYet()
        return Skip("the definition it was sent for was never written: its write was refused")
    mine = next((entry for entry in document.pending if entry.attempt == attempt), None)
    if mine is None:
        if fresh and not redelivered:
            return NotYet()
        followers = tuple(
            entry for entry in document.pending if entry.attempt.follows_from(attempt)
        )
        if redelivered and followers:
            return Resend(followers)
        return Skip(
            "the attempt is not pending: it finished already (a duplicate delivery), "
            "or the write that would have made it pending was refused"
        )
    if mine.claim is not None and mine.claim.live(now):
        return Held(mine.claim.until)
    # A run-now runs whatever the job's own state; nothing runs in a collection that is off.
    job_off = not document.enabled and not attempt.run_now
    if job_off or collection_state not in (None, CollectionState.ENABLED.value):
        return Park(document.waiting_for(entry for entry in document.pending if entry is not mine))
    if attempt.run_now or not attempt.starts_occurrence:
        return Run(attempt, attempt)
    if document.overlap is OverlapPolicy.ALLOW:
        return _alongside(document, mine, now, redelivered=redelivered)
    coalesced = _coalesced(document, attempt, now)
    sent = delivery.sent_at
    if document.overlap is OverlapPolicy.WAIT and sent is not None and sent > attempt.expected:
        return replace(coalesced, previous_until=sent)
    return coalesced


def abandoned(document: JobDocument, delivery: Delivery) -> Run:
    """The run to record as failed when the service gives up on a delivered attempt."""
    attempt = delivery.pending.attempt
    mine = next((entry for entry in document.pending if entry.attempt == attempt), None)
    if mine is not None and mine.began is not None:
        return Run(attempt, mine.began, passed=0)  # counted when it began
    return Run(attempt, attempt)


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
    return Run(attempt, Attempt(latest), postponed=tuple(due), passed=passed, reached=now)


def _alongside(
    document: JobDocument, mine: Pending, now: datetime, *, redelivered: bool
) -> Run | Begin:
    """overlapPolicy Allow: an occurrence begins whether or not others are still running."""
    attempt = mine.attempt
    if mine.began is not None:  # begun already: this is a second delivery of its first try
        run = Run(attempt, mine.began, passed=0)
        if not redelivered:
            return run
        # A crash may have come between recording the beginning and sending the next one.
        following = document.schedule.next_after(mine.began.expected)
        again = [
            entry
            for entry in document.pending
            if following is not None and entry.attempt == Attempt(following)
        ]
        return Begin(Settlement(document, [], again), run) if again else run
    coalesced = _coalesced(document, attempt, now)
    number = document.occurrences + coalesced.passed
    began = replace(coalesced.attempt, repeat=number)
    entries = excluded_before(document, began.expected, now) + [
        (Attempt(expected).history_id, _postponed_entry(expected, coalesced, began.expected, now))
        for expected in coalesced.postponed
    ]
    running = sum(1 for entry in document.pending if entry.began is not None)
    if running >= MOST_ALONGSIDE:
        reason = f"{running} occurrences of the job were still running, the most that run alongside"
        skipped = _skipped_entry(began.expected, reason, OverlapPolicy.ALLOW, now)
        entries.append((began.history_id, skipped))
    counted = replace(
        document, occurrences=number, history_count=document.history_count + len(entries)
    )
    following = None if counted.series_finished else counted.schedule.next_after(began.expected)
    follow_ups = [] if following is None else [Pending(Attempt(following), following)]
    if running >= MOST_ALONGSIDE:
        others = [entry for entry in document.pending if entry is not mine]
        return Begin(
            Settlement(counted.waiting_for(others + follow_ups), entries, follow_ups), None
        )
    marked = [replace(entry, began=began) if entry is mine else entry for entry in document.pending]
    settlement = Settlement(counted.waiting_for(marked + follow_ups), entries, follow_ups)
    return Begin(settlement, Run(attempt, began, passed=0))


# --- what an outcome changes ------------------------------------------------------------------


@dataclass(frozen=True)
class Settlement:
    """The job's new document, the history entries to add, and the attempts to schedule."""

    document: JobDocument
    history: list[HistoryEntry]
    follow_ups: list[Pending] = field(default_factory=list)


def settle(
    document: JobDocument, run: Run, outcome: Outcome, now: datetime, *, job: JobId | None = None
) -> Settlement:
    """Record `outcome` of `run` in a document read after the action (it may have changed).

    `job` names the job, whose execution ids seed the jitter of exponential retries; only
    exponential retries need it.
    """
    attempt = run.attempt
    entries = [
        (Attempt(expected).history_id, _postponed_entry(expected, run, attempt.expected, now))
        for expected in run.postponed
    ]
    if run.passed and attempt.starts_occurrence and not attempt.run_now:
        entries = excluded_before(document, attempt.expected, now) + entries
    entry = _entry(attempt, outcome, document, run)
    entries.append((attempt.history_id, entry))
    status = document.status
    if attempt.action is ActionName.MAIN_ACTION:
        latest = status.last_execution_time
        status = replace(
            status,
            execution_count=status.execution_count + 1,
            # Occurrences running alongside (Allow, or a run-now) may end out of order.
            last_execution_time=outcome.started if latest is None else max(latest, outcome.started),
            failure_count=status.failure_count + (0 if outcome.succeeded else 1),
        )
    retry = _retry_after(document, attempt, outcome, now, job)
    follow_ups = [] if retry is None else [retry]
    retries_spent = retry is None or retry.attempt.action is ActionName.ERROR_ACTION
    if attempt.action is ActionName.MAIN_ACTION and not outcome.succeeded and retries_spent:
        status = replace(status, faulted_count=status.faulted_count + 1)
    summary = entry.copy()
    summary.pop("message", None)
    updated = replace(
        document,
        status=status,
        history_count=document.history_count + len(entries),
        last_attempt=summary,
        occurrences=document.occurrences
        + (run.passed if not attempt.run_now and attempt.starts_occurrence else 0),
    )
    pending = [entry for entry in document.pending if entry.attempt != run.delivered]
    if retry is None and not attempt.run_now:
        updated, following, skipped = _after_occurrence(updated, attempt, pending, now)
        entries = skipped + entries
        updated = replace(updated, history_count=updated.history_count + len(skipped))
        if following is not None:
            follow_ups.append(Pending(Attempt(following), following))
        elif not _others_running(updated, pending):
            # An occurrence that needed its errorAction, or failed without one, ended faulted.
            faulted = attempt.action is ActionName.ERROR_ACTION or not outcome.succeeded
            updated = replace(
                updated.with_state(JobState.FAULTED if faulted else JobState.COMPLETED),
                ended_at=now,
            )
    return Settlement(updated.waiting_for(pending + follow_ups), entries, follow_ups)


def _after_occurrence(
    document: JobDocument, over: Attempt, pending: list[Pending], now: datetime
) -> tuple[JobDocument, datetime | None, list[HistoryEntry]]:
    """When the occurrence of `over` is over: the next occurrence to schedule, if any, by the
    job's overlapPolicy, and the occurrences skipped meanwhile (Skip), recorded as passed."""
    policy = document.overlap
    if policy is OverlapPolicy.ALLOW:
        if _others_running(document, pending):
            return document, None, []  # each began its successor; the last one over ends the job
        # Nothing else running or waiting: the series has ended, or its next occurrence was
        # dropped while the job was off. Wait would schedule the next, so this does too.
        after = max(now, over.expected)
        following = None if document.series_finished else document.schedule.next_after(after)
        return document, following, []
    following = None if document.series_finished else document.schedule.next_after(over.expected)
    if policy is OverlapPolicy.WAIT:
        return document, following, []
    count = document.schedule.recurrence.count if document.schedule.recurrence else None
    skipped: collections.deque[datetime] = collections.deque(maxlen=history.MOST_HISTORY)
    passed = document.occurrences
    while following is not None and following <= now and (count is None or passed < count):
        skipped.append(following)
        passed += 1
        following = document.schedule.next_after(following)
    if count is not None and passed >= count:
        following = None
    reason = f"the occurrence of {iso(over.expected)} was still running"
    entries = [
        (Attempt(expected).history_id, _skipped_entry(expected, reason, OverlapPolicy.SKIP, now))
        for expected in skipped
    ]
    return replace(document, occurrences=passed), following, entries


def _others_running(document: JobDocument, pending: list[Pending]) -> bool:
    """Under Allow, whether other scheduled attempts remain (running, retrying or due)."""
    return document.overlap is OverlapPolicy.ALLOW and any(
        not entry.attempt.run_now for entry in pending
    )


def retry_wait(retries: Retries, retry: Attempt, execution: str) -> timedelta:
    """How long to wait before `retry`, a retry of the occurrence with execution id `execution`.

    Fixed: the interval. Exponential (docs/behaviour.md#exponential-retries): the first wait,
    doubled for each retry before this one, at most the maximum; then moved by up to
    RETRY_JITTER of itself, either way, by a share read from a hash of the execution id and the
    try, so that the same try always waits the same; never below the first wait nor above the
    maximum. Whole milliseconds.
    """
    if retries.maximum is None:
        return retries.interval
    first, most = retries.interval.total_seconds(), retries.maximum.total_seconds()
    doublings = min(max(retry.retry - 1, 0), 64)  # retries are at most 20; floats, no overflow
    wait = min(first * 2.0**doublings, most)
    seed = f"{execution}|{retry.action.value}|{retry.retry}".encode()
    share = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big") / 2**64  # in [0, 1)
    jittered = wait * (1 + RETRY_JITTER * (2 * share - 1))
    return timedelta(milliseconds=round(min(max(jittered, first), most) * 1000))


def _retry_after(
    document: JobDocument, attempt: Attempt, outcome: Outcome, now: datetime, job: JobId | None
) -> Pending | None:
    """The attempt that follows a try of an occurrence, if the occurrence is not over."""
    if outcome.succeeded:
        return None
    # The errorAction retries with the same policy as the action.
    retries = document.retries
    if attempt.retry < retries.count:
        following = replace(attempt, retry=attempt.retry + 1)
        if retries.exponential and job is None:
            raise ValueError("an exponential retry's jitter needs the job's id")
        execution = "" if job is None else execution_id(job, attempt)
        return Pending(following, now + retry_wait(retries, following, execution))
    has_error_action = document.properties.action.error_action is not None
    if attempt.action is ActionName.MAIN_ACTION and has_error_action:
        return Pending(replace(attempt, action=ActionName.ERROR_ACTION, retry=0), now)
    return None


def _entry(
    attempt: Attempt, outcome: Outcome, document: JobDocument, run: Run
) -> HistoryProperties:
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
    if attempt.repeat:
        return attempt.repeat  # it began alongside others (Allow): numbered when it began
    return document.occurrences + (run.passed if attempt.starts_occurrence else 0)


def _postponed_entry(
    expected: datetime, run: Run, ran_instead: datetime, now: datetime
) -> HistoryProperties:
    """The entry of an occurrence missed, with the reason it was: the one that applies to it."""
    if run.previous_until is not None and expected < run.previous_until:
        reason = (
            "at the expected time the job's previous occurrence was still running (until "
            f"{iso(run.previous_until)}; overlapPolicy Wait)"
        )
    elif run.reached is not None:
        reason = (
            f"the service was down or behind: it reached the job only at {iso(run.reached)}, "
            "after the expected time"
        )
    else:
        reason = "the service was down or behind"
    return history.not_run_entry(
        expected,
        f"Postponed: {reason}; the job ran once, for the latest occurrence missed "
        f"({iso(ran_instead)}), instead.",
        now,
    )


def _skipped_entry(
    expected: datetime, reason: str, policy: OverlapPolicy, now: datetime
) -> HistoryProperties:
    """The entry of an occurrence not run because another was still running: Postponed, as
    history has no other status for an occurrence not run, and the reason says why."""
    message = f"Skipped: {reason} (overlapPolicy {policy.value})."
    return history.not_run_entry(expected, message, now)
