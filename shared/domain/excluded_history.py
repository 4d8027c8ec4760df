"""History entries for the occurrences a job's calendar kept from running at their time
(docs/behaviour.md#calendar-exclusions): each one skipped, or moved to a business day.

They are written with the run that follows them, in the same write as its own entry: an
occurrence on an excluded day sends no message of its own, so the first moment the executor
holds the job after it is that run. The run looks back to the occurrence before it (the
`lastAttempt` the job document keeps) and records every occurrence the schedule put in between
that landed on an excluded day. A job whose recurrence excludes nothing has no calendar, and
this costs it one attribute read.
"""

from __future__ import annotations

from datetime import UTC, datetime

from shared.domain import history
from shared.domain.history import HistoryEntry
from shared.domain.job_document import JobDocument
from shared.domain.schedule.exclusion_reasons import last_excluded, why_excluded
from shared.domain.schedule.exclusions import OnExcluded
from shared.domain.schedule.timezones import wall_time, zone_named
from shared.domain.wire import iso, parse_iso

_DIRECTION = {
    OnExcluded.NEXT_BUSINESS_DAY: "next",
    OnExcluded.PREVIOUS_BUSINESS_DAY: "previous",
}


def excluded_before(document: JobDocument, ran: datetime, now: datetime) -> list[HistoryEntry]:
    """The entries of the occurrences on excluded days between the job's previous occurrence
    and `ran`, the one it runs now; the newest MOST_HISTORY of them."""
    schedule = document.schedule
    calendar, recurrence = schedule.calendar, schedule.recurrence
    if calendar is None or recurrence is None:
        return []
    on_excluded = recurrence.on_excluded or OnExcluded.SKIP
    zone = zone_named(recurrence.time_zone) if recurrence.time_zone else UTC
    found = last_excluded(schedule, _previous_occurrence(document, ran), ran, history.MOST_HISTORY)
    entries = []
    for excluded in found:
        day = wall_time(excluded.scheduled, zone).date()
        reason = f"{day.isoformat()} is {why_excluded(calendar, day)}"
        if excluded.moved_to is not None:
            message = (
                f"Moved: {reason}; the occurrence ran on the {_DIRECTION[on_excluded]} business "
                f"day instead, at {iso(excluded.moved_to)} (onExcluded {on_excluded.value})."
            )
        elif on_excluded is OnExcluded.SKIP:
            message = f"Skipped: {reason}; the job does not run on excluded days (onExcluded Skip)."
        else:
            message = (
                f"Skipped: {reason}, and no business day was found within three years to move "
                f"it to (onExcluded {on_excluded.value})."
            )
        entry_id = history.entry_id(excluded.scheduled, 0, run_now=False)
        entries.append((entry_id, history.not_run_entry(excluded.scheduled, message, now)))
    return entries


def _previous_occurrence(document: JobDocument, ran: datetime) -> datetime:
    """Where the look back starts: the occurrence of the job's last recorded run (when it is of
    this definition), else when the job may first run; never further back than history keeps."""
    schedule = document.schedule
    start = max(schedule.start_time or schedule.created_at, schedule.created_at)
    last = document.last_attempt
    if last is not None and "expectedExecutionTime" in last:
        start = max(start, parse_iso(str(last["expectedExecutionTime"])))
    return max(start, ran - history.KEPT_FOR)
