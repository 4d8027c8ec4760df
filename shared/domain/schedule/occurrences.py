"""When a job runs: its first occurrence, the next one after any instant, a preview, completion.

The semantics are docs/behaviour.md#recurrence. dateutil's rrule expands a recurrence's
schedule within each period exactly as those rules read (the schedule restricts and extends),
but it always iterates from its start: a minute job anchored ten years ago would cost millions
of steps per question. So every search begins with an rrule whose start is moved, by arithmetic,
to the period of the grid that holds the instant asked about; the cost does not grow with the
job's age.

Schedules are evaluated on the wall clock of `recurrence.timeZone` (UTC when absent).
"""

from __future__ import annotations

import bisect
import calendar
import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo
from typing import Literal, TypedDict

from dateutil import rrule as rr

from shared.domain.schedule.excluded_days import CalendarView, ExcludedOccurrence
from shared.domain.schedule.exclusions import BusinessCalendar, OnExcluded
from shared.domain.schedule.recurrence import Frequency, Recurrence
from shared.domain.schedule.timezones import instant_at, wall_time, zone_named

# rrule's frequencies (YEARLY 0 ... SECONDLY 6) are literal ints to its type stubs.
_RRuleFrequency = Literal[0, 1, 2, 3, 4, 5, 6]
_RRULE_FREQUENCY: dict[Frequency, _RRuleFrequency] = {
    Frequency.MINUTE: rr.MINUTELY,
    Frequency.HOUR: rr.HOURLY,
    Frequency.DAY: rr.DAILY,
    Frequency.WEEK: rr.WEEKLY,
    Frequency.MONTH: rr.MONTHLY,
    Frequency.YEAR: rr.YEARLY,
}
_RRULE_WEEKDAY = (rr.MO, rr.TU, rr.WE, rr.TH, rr.FR, rr.SA, rr.SU)
_NTH_WEEKDAYS_OF_A_MONTH = range(1, 6)
_SHORTER_THAN_A_DAY = (Frequency.MINUTE, Frequency.HOUR)
# The Gregorian calendar repeats itself every 400 years: 4,800 months, 146,097 days, which is a
# whole number of weeks (20,871). So month n and month n + 4,800 have the same length and start
# on the same weekday, and the months a grid of every k-th month visits repeat, each with its
# calendar, after 4,800 / gcd(4,800, k) of its periods.
_MONTHS_IN_A_CALENDAR_CYCLE = 400 * 12
_FIXED_LENGTH_PERIOD = {
    Frequency.MINUTE: timedelta(minutes=1),
    Frequency.HOUR: timedelta(hours=1),
    Frequency.DAY: timedelta(days=1),
    Frequency.WEEK: timedelta(weeks=1),
}


@dataclass(frozen=True)
class Occurrences:
    """The occurrences of one job definition.

    `created_at` is when the definition was saved: the anchor when there is no startTime, and
    the moment before which past grid points are discarded.
    """

    start_time: datetime | None
    recurrence: Recurrence | None
    created_at: datetime

    @functools.cached_property
    def _grid(self) -> _Grid | None:
        if self.recurrence is None:
            return None
        return _Grid.of(self.recurrence, anchor=self.start_time or self.created_at)

    @functools.cached_property
    def never_match(self) -> bool:
        """Whether the schedule selects no day at all, whatever the start and the end: monthDays
        and monthlyOccurrences that never fall on one day, or days no month the grid visits has."""
        return self._grid is not None and self._grid.is_empty

    @property
    def calendar(self) -> BusinessCalendar | None:
        """The days the job does not run on; None when its recurrence excludes none."""
        return self._calendar

    @functools.cached_property
    def _calendar(self) -> BusinessCalendar | None:
        recurrence = self.recurrence
        if recurrence is None or (recurrence.exclusions is None and recurrence.on_excluded is None):
            return None
        return BusinessCalendar.of(recurrence.exclusions, recurrence.on_excluded)

    @functools.cached_property
    def first(self) -> datetime | None:
        """The first occurrence (docs/behaviour.md#starttime); None if there is none."""
        if self._calendar is None or self._grid_first is None:
            return self._grid_first
        return self._not_excluded(self._grid_first, inclusive=True)

    @functools.cached_property
    def _grid_first(self) -> datetime | None:
        """The first occurrence the schedule alone selects, before any calendar exclusion."""
        if self._grid is None:
            return (
                self.created_at
                if self.start_time is None
                else max(self.start_time, self.created_at)
            )
        if self.start_time is None:
            return self._no_later_than_end(self.created_at)
        if self.start_time >= self.created_at:
            # The grid counts whole seconds. A startTime with a fraction (a client's "now plus
            # five minutes") runs at startTime when its second is on the grid, not a period later.
            second = self.start_time.replace(microsecond=0)
            if self._grid.search(second, inclusive=True) == second:
                return self._no_later_than_end(self.start_time)
        return self._grid.search(max(self.start_time, self.created_at), inclusive=True)

    def next_after(self, instant: datetime) -> datetime | None:
        """The first occurrence strictly after `instant`, whatever count says; None when none."""
        if self._calendar is not None:
            return self._not_excluded(instant, inclusive=False)
        first = self.first
        if first is None or first > instant:
            return first
        if self._grid is None:
            return None
        return self._grid.search(instant, inclusive=False)

    def upcoming(
        self, limit: int, *, after: datetime | None = None, executions_done: int = 0
    ) -> list[datetime]:
        """Up to `limit` occurrences after `after` (from the first when None), count respected."""
        if self.recurrence is not None and self.recurrence.count is not None:
            limit = min(limit, self.recurrence.count - executions_done)
        found: list[datetime] = []
        following = self.first if after is None else self.next_after(after)
        while following is not None and len(found) < limit:
            found.append(following)
            following = self.next_after(following)
        return found

    def count_reached(self, passed: int) -> bool:
        """Whether `passed` occurrences are all the definition allows (one, without recurrence)."""
        if self.recurrence is None:
            return passed >= 1
        return self.recurrence.count is not None and passed >= self.recurrence.count

    def is_complete(self, executions_done: int, last_occurrence: datetime) -> bool:
        """Whether nothing is left to run after `executions_done`, the last at `last_occurrence`."""
        if self.count_reached(executions_done):
            return True
        return self.recurrence is not None and self.next_after(last_occurrence) is None

    def shortest_gap(self, sample: int = 200) -> timedelta | None:
        """The shortest time between two consecutive occurrences among the first `sample`.

        Schedules repeat within a day, a week or a month, so a few hundred occurrences show the
        densest stretch; None when the job runs at most once.
        """
        if self.recurrence is None:
            return None
        # The grid alone: an immediate first run may fall just before a grid point by chance.
        unbounded = self.recurrence.model_copy(update={"count": None, "end_time": None})
        anchor = (self.start_time or self.created_at).replace(microsecond=0)
        found = Occurrences(anchor, unbounded, anchor).upcoming(sample)
        gaps = [later - earlier for earlier, later in itertools.pairwise(found)]
        return min(gaps, default=None)

    def excluded_between(self, start: datetime, end: datetime) -> list[ExcludedOccurrence]:
        """The occurrences the schedule alone selects in [start, end) that land on an excluded
        day, each with where it went: skipped (None) or the instant it was moved to."""
        view = self._calendar_view
        return [] if view is None else view.excluded_between(start, end)

    @functools.cached_property
    def _calendar_view(self) -> CalendarView | None:
        if self._calendar is None or self._grid is None or self.recurrence is None:
            return None
        return CalendarView(
            calendar=self._calendar,
            on_excluded=self.recurrence.on_excluded or OnExcluded.SKIP,
            zone=self._grid.zone,
            floor=max(self.start_time or self.created_at, self.created_at),
            end=self.recurrence.ends_at,
            scheduled_at_or_after=self._grid_at_or_after,
            scheduled_after=lambda instant: self._grid_at_or_after(instant, inclusive=False),
        )

    def _not_excluded(self, instant: datetime, *, inclusive: bool) -> datetime | None:
        view = self._calendar_view
        return None if view is None else view.search(instant, inclusive=inclusive)

    def _grid_at_or_after(self, instant: datetime, *, inclusive: bool = True) -> datetime | None:
        """The first occurrence the schedule alone selects at `instant` (if inclusive) or after."""
        first = self._grid_first
        if first is None or first > instant or (inclusive and first == instant):
            return first
        assert self._grid is not None
        return self._grid.search(instant, inclusive=inclusive)

    def _no_later_than_end(self, instant: datetime) -> datetime | None:
        end = self.recurrence.ends_at if self.recurrence else None
        return instant if end is None or instant <= end else None


class _RruleArguments(TypedDict, total=False):
    """rrule's by* keyword arguments, as the grids spell them out."""

    bymonth: int
    bymonthday: int | list[int]  # negative days count from the month's end
    byweekday: int | list[int] | list[rr.weekday]  # numbered weekdays on month grids only
    byhour: int | list[int] | None  # None: any
    byminute: int | list[int] | None
    bysecond: int


@dataclass(frozen=True)
class _Grid:
    """The instants a recurrence selects, found from any point without walking from the anchor.

    Minute and hour grids are rrule's alone. A day or coarser grid is its selected days times
    its times of day: rrule picks the days, and the times of a day come from a sorted list made
    once, so that a question about today does not make rrule expand all of today again.
    """

    zone: tzinfo
    anchor: datetime  # wall time, whole seconds: periods count from the one that holds it
    frequency: Frequency
    interval: int
    end: datetime | None
    rules: _RruleArguments  # the spec's defaults filled in
    times_of_day: tuple[time, ...]  # day and coarser grids only, in order

    @classmethod
    def of(cls, recurrence: Recurrence, anchor: datetime) -> _Grid:
        zone = zone_named(recurrence.time_zone) if recurrence.time_zone else UTC
        anchor_wall = wall_time(anchor, zone).replace(microsecond=0)
        hours, minutes = _hours_and_minutes(recurrence, anchor_wall)
        if recurrence.frequency in _SHORTER_THAN_A_DAY:
            rules: _RruleArguments = {
                "byhour": hours,
                "byminute": minutes,
                "bysecond": anchor_wall.second,
            }
            times_of_day: tuple[time, ...] = ()
        else:
            assert hours is not None and minutes is not None
            rules = {
                **_day_rules(recurrence, anchor_wall),
                "byhour": 0,
                "byminute": 0,
                "bysecond": 0,
            }
            times_of_day = tuple(
                time(hour, minute, anchor_wall.second) for hour in hours for minute in minutes
            )
        return cls(
            zone=zone,
            anchor=anchor_wall,
            frequency=recurrence.frequency,
            interval=recurrence.interval,
            end=recurrence.ends_at,
            rules=rules,
            times_of_day=times_of_day,
        )

    @functools.cached_property
    def is_empty(self) -> bool:
        """Whether no period of the grid holds a day its rules select.

        Only month grids can be empty: a day grid takes every day, a week grid weekdays every
        week has, a year grid its anchor's own date, and rrule refuses the minute and hour grids
        that never meet their schedule. Whether a month has a selected day depends on its length
        and the weekday it starts on alone, and the months a grid visits repeat with their
        calendars within one cycle (_MONTHS_IN_A_CALENDAR_CYCLE), so looking through one cycle
        of periods from the anchor's decides it: a few thousand steps of arithmetic at most,
        where rrule, which stops only at a selected day, would have walked to the year 9999.
        A grid that is not empty has a selected day in every cycle of its periods, so a search
        from any instant ends within one cycle too (a February 29th within 8 years).
        """
        if self.frequency is not Frequency.MONTH:
            return False
        has_a_day: dict[tuple[int, int], bool] = {}
        period = self._period_of(self.anchor)
        cycle = _MONTHS_IN_A_CALENDAR_CYCLE // math.gcd(_MONTHS_IN_A_CALENDAR_CYCLE, self.interval)
        for step in range(cycle):
            try:
                month = self._period_after(period, step * self.interval)
            except ValueError:
                break  # past the year 9999: no later month to hold a day
            first_weekday, length = calendar.monthrange(month.year, month.month)
            kind = (first_weekday, length)
            if kind not in has_a_day:
                has_a_day[kind] = _month_has_a_day(self.rules, first_weekday, length)
            if has_a_day[kind]:
                return False
        return True

    def search(self, instant: datetime, *, inclusive: bool) -> datetime | None:
        """The first grid instant after `instant` (or at it, if inclusive), unless past the end."""
        if self.is_empty:
            return None
        try:
            for wall in self._walls_from(wall_time(instant, self.zone), inclusive):
                candidate = instant_at(wall, self.zone)
                # A repeated wall time maps to its first instant and skipped ones to the jump, so
                # a wall time past `instant`'s can still name an instant at or before it.
                if candidate < instant or (candidate == instant and not inclusive):
                    continue
                return candidate if self.end is None or candidate <= self.end else None
        except OverflowError:
            pass  # the edge of the calendar (year 9999, in some zone): nothing comes after it
        return None

    def _walls_from(self, wall: datetime, inclusive: bool) -> Iterator[datetime]:
        try:
            start = self._search_start(wall)
            if not self.times_of_day:
                yield from self._rule(start).xafter(wall, inc=inclusive)
                return
            first_day = wall.date()
            for midnight in self._rule(start.replace(hour=0, minute=0, second=0, microsecond=0)):
                day = midnight.date()
                times = self.times_of_day
                if day == first_day:
                    later = bisect.bisect_left if inclusive else bisect.bisect_right
                    times = times[later(times, wall.time()) :]
                for time_of_day in times:
                    yield datetime.combine(day, time_of_day)
        except (ValueError, OverflowError):
            # rrule refuses minute/hour grids that never meet the schedule, and every grid ends
            # at year 9999: either way there is no further occurrence.
            return

    def _rule(self, start: datetime) -> rr.rrule:
        return rr.rrule(
            _RRULE_FREQUENCY[self.frequency],
            interval=self.interval,
            dtstart=start,
            wkst=rr.MO,
            cache=False,
            **self.rules,
        )

    def _search_start(self, wall: datetime) -> datetime:
        """Where rrule should start so that its first answers are the ones after `wall`.

        rrule counts its intervals from the period that holds its start, and skips everything
        before that start. So it may start at `wall` itself when `wall` lies in one of the
        grid's periods, and at the next of them otherwise: never periods, or parts of one,
        that hold only earlier instants.
        """
        first_period = self._period_of(self.anchor)
        elapsed = self._periods_between(first_period, wall)
        if elapsed < 0:
            return first_period
        if elapsed % self.interval == 0:
            return wall
        return self._period_after(first_period, elapsed + self.interval - elapsed % self.interval)

    def _period_of(self, wall: datetime) -> datetime:
        """The start of the period (minute, hour, day, Monday-first week, month, year) of `wall`."""
        if self.frequency is Frequency.MINUTE:
            return wall.replace(second=0, microsecond=0)
        if self.frequency is Frequency.HOUR:
            return wall.replace(minute=0, second=0, microsecond=0)
        midnight = wall.replace(hour=0, minute=0, second=0, microsecond=0)
        if self.frequency is Frequency.DAY:
            return midnight
        if self.frequency is Frequency.WEEK:
            return midnight - timedelta(days=wall.weekday())
        if self.frequency is Frequency.MONTH:
            return midnight.replace(day=1)
        return midnight.replace(month=1, day=1)

    def _periods_between(self, first_period: datetime, wall: datetime) -> int:
        """Whole periods from `first_period` to the one holding `wall` (negative before it)."""
        step = _FIXED_LENGTH_PERIOD.get(self.frequency)
        if step is not None:
            return (wall - first_period) // step
        months = (wall.year - first_period.year) * 12 + wall.month - first_period.month
        return months // 12 if self.frequency is Frequency.YEAR else months

    def _period_after(self, first_period: datetime, periods: int) -> datetime:
        step = _FIXED_LENGTH_PERIOD.get(self.frequency)
        if step is not None:
            return first_period + periods * step
        months = periods * 12 if self.frequency is Frequency.YEAR else periods
        year, month = divmod(first_period.month - 1 + months, 12)
        return first_period.replace(year=first_period.year + year, month=month + 1)


def _hours_and_minutes(
    recurrence: Recurrence, anchor: datetime
) -> tuple[list[int] | None, list[int] | None]:
    """The hours and minutes a schedule runs at, with the documented defaults; None means any."""
    frequency = recurrence.frequency
    schedule = recurrence.schedule
    listed_minutes = schedule.minutes if schedule else None
    listed_hours = schedule.hours if schedule else None

    if listed_minutes:
        minutes: list[int] | None = sorted(set(listed_minutes))
    elif frequency is Frequency.MINUTE:
        # Decision: with frequency Minute the grid itself picks the minutes; an anchor minute
        # would turn "every minute of hour 5" into "once at 05:MM".
        minutes = None
    else:
        minutes = [anchor.minute]

    if listed_hours:
        hours: list[int] | None = sorted(set(listed_hours))
    elif frequency in _SHORTER_THAN_A_DAY:
        hours = None
    else:
        hours = list(range(24)) if listed_minutes else [anchor.hour]
    return hours, minutes


def _day_rules(recurrence: Recurrence, anchor: datetime) -> _RruleArguments:
    """The days a day-or-coarser grid runs on, as rrule arguments with the documented defaults
    (docs/behaviour.md#days-without-a-schedule).

    rrule would fill missing ones from its start, which here is not the anchor, so every rule
    is spelled out.
    """
    schedule = recurrence.schedule
    if recurrence.frequency is Frequency.WEEK:
        days = schedule.week_days if schedule and schedule.week_days else None
        return {"byweekday": sorted({day.weekday for day in days}) if days else anchor.weekday()}
    if recurrence.frequency is Frequency.MONTH:
        return _month_day_rules(recurrence, anchor)
    if recurrence.frequency is Frequency.YEAR:
        return {"bymonth": anchor.month, "bymonthday": anchor.day}
    return {}


def _month_has_a_day(rules: _RruleArguments, first_weekday: int, length: int) -> bool:
    """Whether a month of `length` days starting on `first_weekday` has a day the month grid's
    `rules` select, read as rrule reads them: a day of `bymonthday` (negative from the end) and,
    when both are given, also one of the numbered weekdays of `byweekday`."""
    month_days = rules.get("bymonthday")
    if isinstance(month_days, int):
        month_days = [month_days]
    numbered = rules.get("byweekday")  # on a month grid, numbered weekdays (rr.weekday) alone
    weekdays = [
        (weekday.weekday, weekday.n)
        for weekday in (numbered if isinstance(numbered, list) else ())
        if isinstance(weekday, rr.weekday)
    ]
    for day in range(1, length + 1):
        if month_days and day not in month_days and day - length - 1 not in month_days:
            continue
        weekday = (first_weekday + day - 1) % 7
        nth, nth_from_end = (day - 1) // 7 + 1, -((length - day) // 7 + 1)
        if not weekdays or (weekday, nth) in weekdays or (weekday, nth_from_end) in weekdays:
            return True
    return False


def _month_day_rules(recurrence: Recurrence, anchor: datetime) -> _RruleArguments:
    schedule = recurrence.schedule
    month_days = schedule.month_days if schedule else None
    weekdays = schedule.monthly_occurrences if schedule else None
    if not month_days and not weekdays:
        return {"bymonthday": anchor.day}
    rules: _RruleArguments = {}
    if month_days:
        rules["bymonthday"] = sorted(set(month_days))
    if weekdays:
        # rrule requires a day to match both its plain and its numbered weekdays, where the
        # spec means either; "every Friday" is spelled as the first to fifth Friday instead.
        rules["byweekday"] = sorted(
            {
                _RRULE_WEEKDAY[weekday.day.weekday](nth)
                for weekday in weekdays
                for nth in (
                    (weekday.occurrence,) if weekday.occurrence else _NTH_WEEKDAYS_OF_A_MONTH
                )
            },
            key=lambda day: (day.weekday, day.n),
        )
    return rules
