"""What the executor logs about an attempt: one short line per outcome, at the level it deserves.

Application Insights keeps these lines, and an operator reads them to follow a job: so each names
the job by collection and name (not its ARM id), the occurrence by its expected time, the try by
its `retry` number exactly as history's `retryCount` counts it (0 for the first try), and what
follows. They never show a URL: a target's query string may carry a secret (`?sig=`, `?code=`).

Levels: a success is INFO; a failure that is retried, or after which the errorAction runs, is
WARNING; an occurrence that failed for good (retries spent and no errorAction, or the errorAction
failed too), and a job that ended faulted, is ERROR.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta

from shared.domain.attempts import Attempt, Pending
from shared.domain.decisions import Outcome, Settlement
from shared.domain.ids import JobId
from shared.domain.job_definition import ActionName, JobState
from shared.domain.wire import iso

# History keeps the whole message (a response body among it); a log line keeps its first line.
MOST_SUMMARY_CHARS = 120
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")


def job_name(job: JobId) -> str:
    """How logs name a job: `collection/job`, as ARM names a child resource."""
    return job.arm_name


def attempt_context(attempt: Attempt) -> str:
    """Which try of which occurrence: `occurrence 2026-12-01T02:30:00Z, errorAction retry 1`."""
    action = "errorAction " if attempt.action is ActionName.ERROR_ACTION else ""
    return f"{_occurrence(attempt)}, {action}retry {attempt.retry}"


def attempt_line(job: JobId, attempt: Attempt, event: str) -> str:
    """A line about an attempt that did not run, or not yet: `jc/job: {event} (occurrence ...)`."""
    return f"{job_name(job)}: {event} ({attempt_context(attempt)})"


def outcome_line(
    job: JobId, attempt: Attempt, outcome: Outcome, settlement: Settlement, now: datetime
) -> tuple[int, str]:
    """The level and line that log an attempt's outcome, recorded at `now` as `settlement`."""
    verb = "completed" if outcome.succeeded else "failed"
    if attempt.action is ActionName.ERROR_ACTION:
        verb = f"errorAction {verb}"
    elapsed = round((outcome.ended - outcome.started) / timedelta(milliseconds=1))
    level, follows = _what_follows(attempt, outcome, settlement, now)
    then = f"; {follows}" if follows else ""
    return level, (
        f"{job_name(job)}: {verb} ({_occurrence(attempt)}, retry {attempt.retry}) "
        f"in {elapsed} ms{then}: {summary(outcome.message)}"
    )


def summary(message: str) -> str:
    """History's message cut for a log line: its first line, short, any URL left out."""
    lines = message.strip().splitlines() or [""]
    first = _URL.sub("<url>", lines[0])
    if len(first) <= MOST_SUMMARY_CHARS:
        return first
    return first[: MOST_SUMMARY_CHARS - 3] + "..."


def _occurrence(attempt: Attempt) -> str:
    expected = iso(attempt.expected)
    return f"run-now of {expected}" if attempt.run_now else f"occurrence {expected}"


def _what_follows(
    attempt: Attempt, outcome: Outcome, settlement: Settlement, now: datetime
) -> tuple[int, str]:
    """The level of an outcome, and what it leads to (empty when that goes without saying)."""
    retry = _retry_of(attempt, settlement.follow_ups)
    if retry is not None:
        wait = round((retry.due - now).total_seconds())
        at = iso(_to_the_second(retry.due))
        return logging.WARNING, f"retry {retry.attempt.retry} at {at}, in {wait} s"
    if any(entry.attempt.action is ActionName.ERROR_ACTION for entry in settlement.follow_ups):
        return logging.WARNING, "the errorAction runs next"
    # No try of this occurrence follows. A failure now is one for good: the retries are spent,
    # and the errorAction, if any, has run (this was it) or there is none.
    failed_for_good = not outcome.succeeded
    if attempt.run_now:
        return (logging.ERROR, "run-now failed for good") if failed_for_good else (logging.INFO, "")
    following = next(
        (entry for entry in settlement.follow_ups if entry.attempt.expected > attempt.expected),
        None,
    )
    if following is not None:
        ahead = f"next at {iso(following.due)}"
        if failed_for_good:
            return logging.ERROR, f"occurrence failed for good, {ahead}"
        # After the errorAction handled a failure, say that the series goes on.
        return logging.INFO, ahead if attempt.action is ActionName.ERROR_ACTION else ""
    # The series ended with this occurrence; settle made the job's state say how.
    state = settlement.document.state
    if state is JobState.FAULTED:
        return logging.ERROR, (
            "occurrence failed for good, job faulted" if failed_for_good else "job faulted"
        )
    if state is JobState.COMPLETED:
        return logging.INFO, "job completed"
    return (logging.ERROR, "occurrence failed for good") if failed_for_good else (logging.INFO, "")


def _to_the_second(instant: datetime) -> datetime:
    """Nearest whole second: a queue delays messages by whole seconds, so no finer is meant."""
    return (instant + timedelta(milliseconds=500)).replace(microsecond=0)


def _retry_of(attempt: Attempt, follow_ups: list[Pending]) -> Pending | None:
    """The follow-up that tries the same action of the same occurrence again, if there is one."""
    return next(
        (
            entry
            for entry in follow_ups
            if entry.attempt.expected == attempt.expected
            and entry.attempt.action is attempt.action
            and entry.attempt.run_now == attempt.run_now
            and entry.attempt.retry == attempt.retry + 1
        ),
        None,
    )
