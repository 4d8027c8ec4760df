"""A schedule with its calendar applied: occurrences on excluded days skipped or moved.

The semantics are docs/behaviour.md#calendar-exclusions. The schedule alone (the grid of
occurrences.py) says when a job would run; this module takes each of those occurrences in order
and either keeps it, drops it, or moves it to the same wall time on the nearest business day.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from shared.domain.schedule.exclusions import BusinessCalendar, OnExcluded
from shared.domain.schedule.timezones import instant_at, wall_time

# Decision: a search over a calendar that excludes every day its schedule selects (Saturdays
# only, with Saturday off) gives up this far past the instant asked about.
SEARCH_HORIZON = timedelta(days=10 * 366)
_ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class ExcludedOccurrence:
    """An occurrence the schedule selects on an excluded day, and where it went."""

    scheduled: datetime
    moved_to: datetime | None  # None: skipped


@dataclass(frozen=True)
class CalendarView:
    """The occurrences of one job once its calendar is applied.

    `scheduled_at_or_after` and `scheduled_after` give the schedule's own occurrences (the
    first one included); `floor` is the earliest instant a job may run (its startTime, or when
    it was saved), and `end` its endTime.
    """

    calendar: BusinessCalendar
    on_excluded: OnExcluded
    zone: tzinfo
    floor: datetime
    end: datetime | None
    scheduled_at_or_after: Callable[[datetime], datetime | None]
    scheduled_after: Callable[[datetime], datetime | None]

    def search(self, instant: datetime, *, inclusive: bool) -> datetime | None:
        """The first occurrence after `instant` (or at it, if inclusive), the calendar applied.

        Occurrences move by whole days and the days they land on keep their order, so the
        search starts at the earliest scheduled occurrence that can still land after `instant`
        and stops once the day one lands on is past the best found so far. Two occurrences
        moved onto one instant are one: this answers with instants, not with occurrences.
        """
        calendar, zone = self.calendar, self.zone
        scan_from = instant
        if self.on_excluded is OnExcluded.NEXT_BUSINESS_DAY:
            # Occurrences on the excluded days just before `instant`'s day land on it or later.
            business_day = calendar.previous_business_day(wall_time(instant, zone).date())
            if business_day is not None:
                scan_from = min(instant, _midnight(business_day + _ONE_DAY, zone))
        horizon = instant + SEARCH_HORIZON
        best: datetime | None = None
        scheduled = self.scheduled_at_or_after(scan_from)
        while scheduled is not None and scheduled <= horizon:
            wall = wall_time(scheduled, zone)
            day = wall.date()
            landing_day = self._landing_day(day)
            if landing_day is None:
                # Skipped, or nowhere to move: so is everything else in this excluded stretch.
                scheduled = self._first_on_business_day_after(day)
                continue
            if best is not None and landing_day > wall_time(best, zone).date():
                break
            landed = (
                scheduled
                if landing_day == day
                else instant_at(datetime.combine(landing_day, wall.time()), zone)
            )
            if self._may_run(landed, instant, inclusive=inclusive):
                best = landed if best is None else min(best, landed)
                if landing_day == day:
                    return best  # what comes later lands on this day or after, and later
                # The rest of this excluded day lands later on the same day.
                scheduled = self.scheduled_at_or_after(_midnight(day + _ONE_DAY, zone))
                continue
            if landing_day < day:
                # Moved back to `instant` or before it: so is the rest of this excluded stretch.
                scheduled = self._first_on_business_day_after(day)
                continue
            scheduled = self.scheduled_after(scheduled)
        return best

    def excluded_between(self, start: datetime, end: datetime) -> list[ExcludedOccurrence]:
        """The scheduled occurrences in [start, end) on excluded days, and where each went."""
        found: list[ExcludedOccurrence] = []
        scheduled = self.scheduled_at_or_after(start)
        while scheduled is not None and scheduled < end:
            wall = wall_time(scheduled, self.zone)
            if self.calendar.excludes(wall.date()):
                landing_day = self._landing_day(wall.date())
                moved_to = (
                    None
                    if landing_day is None
                    else instant_at(datetime.combine(landing_day, wall.time()), self.zone)
                )
                found.append(ExcludedOccurrence(scheduled, moved_to))
            scheduled = self.scheduled_after(scheduled)
        return found

    def _landing_day(self, day: date) -> date | None:
        """The day an occurrence scheduled on `day` runs on; None when it does not run."""
        if not self.calendar.excludes(day):
            return day
        if self.on_excluded is OnExcluded.NEXT_BUSINESS_DAY:
            return self.calendar.next_business_day(day)
        if self.on_excluded is OnExcluded.PREVIOUS_BUSINESS_DAY:
            return self.calendar.previous_business_day(day)
        return None

    def _may_run(self, landed: datetime, instant: datetime, *, inclusive: bool) -> bool:
        after = landed > instant or (inclusive and landed == instant)
        return after and landed >= self.floor and (self.end is None or landed <= self.end)

    def _first_on_business_day_after(self, day: date) -> datetime | None:
        after = self.calendar.next_business_day(day)
        return None if after is None else self.scheduled_at_or_after(_midnight(after, self.zone))


def _midnight(day: date, zone: tzinfo) -> datetime:
    try:
        return instant_at(datetime.combine(day, time()), zone)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)
