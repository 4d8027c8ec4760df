"""Occurrences, the tries of each, and the attempts a job waits for.

An occurrence is its job plus its expected time; each try of it (the main action, its retries,
then the errorAction and its retries) is an `Attempt`. A job document keeps the attempts it is
waiting for, each as a `Pending` with the time it is due; a `Delivery` is one of them on its way
to the executor (a queue message or a due-index row carries it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from shared.domain import history
from shared.domain.ids import JobId
from shared.domain.job_definition import ActionName
from shared.domain.wire import iso

# The W3C trace context's headers, which a delivery may carry. One that is absent (a message sent
# before they existed, or by a process without telemetry) or not a text is no error: the
# delivery runs in a trace of its own.
TRACE_CONTEXT_FIELDS = ("traceparent", "tracestate")


@dataclass(frozen=True)
class Attempt:
    """One try of one occurrence: what a queue message carries and a history entry records."""

    expected: datetime
    action: ActionName = ActionName.MAIN_ACTION
    retry: int = 0
    run_now: bool = False
    # Which occurrence of the series this is (history's repeatCount), for an occurrence that
    # runs alongside others (overlapPolicy Allow): the job's count of passed occurrences moves
    # on while it runs. 0 where that count says it (one occurrence at a time).
    repeat: int = 0

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


def execution_id(job: JobId, attempt: Attempt) -> str:
    """The occurrence's identity: its job and expected time (and whether it was a run-now).

    The same on every retry and duplicate delivery of the occurrence, so receivers (and logs)
    can tell them apart from other occurrences.
    """
    kind = "run-now" if attempt.run_now else "scheduled"
    seed = f"{job.arm_id.lower()}|{iso(attempt.expected)}|{kind}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Claim:
    """That a delivery (`holder`, an id of its own) is calling a try's target, until when.

    Written before the call, so that another delivery of the same try does not call too; past
    `until` (the try's timeout and a margin) the holder is taken for dead, and the try for never
    recorded: another delivery takes it over.
    """

    holder: str
    until: datetime

    def live(self, now: datetime) -> bool:
        return now < self.until


@dataclass(frozen=True)
class Pending:
    """An attempt a job waits for, and when it is due."""

    attempt: Attempt
    due: datetime
    # Under overlapPolicy Allow, set when the occurrence began (it was counted and the next one
    # scheduled before its action ran): the try it began, which a redelivery runs again.
    began: Attempt | None = None
    # Set while a delivery calls the try's target (kept in the job's document only).
    claim: Claim | None = None


@dataclass(frozen=True)
class Delivery:
    """A pending attempt of one job's definition on its way to the executor."""

    job: JobId
    defined_at: datetime  # when the definition it belongs to was saved
    pending: Pending
    sent_at: datetime | None = None  # when it was put on the queue
    # The W3C trace context (`traceparent`, and `tracestate` if any) of the span that handed it
    # to the queue, or of the execution it continues, as header names and values: what
    # shared/telemetry.py writes and reads. Empty while telemetry is off, and then not written;
    # written under the headers' own names, the shortest (a message carries up to 64).
    trace_context: tuple[tuple[str, str], ...] = ()
