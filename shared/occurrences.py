"""When a job runs: its first occurrence, the next one after any instant, a preview, completion.

The semantics are SPEC.md section 3. dateutil's rrule expands a recurrence's schedule within
each period exactly as the spec reads (the schedule restricts and extends), but it always
iterates from its start: a minute job anchored ten years ago would cost millions of steps per
question. So every search begins with an rrule whose start is moved, by arithmetic, to the
period of the grid that holds the instant asked about; the cost does not grow with the job's age.

Schedules are evaluated on the wall clock of `recurrence.timeZone` (UTC when absent).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from dateutil import rrule as rr

from shared.recurrence import Frequency, Recurrence
from shared.timezones import instant_at, wall_time, zone_named

_RRULE_FREQUENCY = {
    Frequency.MINUTE: rr.MINUTELY,
    Frequency.HOUR: rr.HOURLY,
    Frequency.DAY: rr.DAILY,
    Frequency.WEEK: rr.WEEKLY,
    Frequency.MONTH: rr.MONTHLY,
    Frequency.YEAR: rr.YEARLY,
}
_RRULE_WEEKDAY = (rr.MO, rr.TU, rr.WE, rr.TH, rr.FR, rr.SA, rr.SU)
_NTH_WEEKDAYS_OF_A_MONTH = range(1, 6)
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
    def first(self) -> datetime | None:
        """The first occurrence (startTime table of SPEC.md); None if there is none."""
        if self._grid is None:
            return (
                self.created_at
                if self.start_time is None
                else max(self.start_time, self.created_at)
            )
        if self.start_time is None:
            return self._no_later_than_end(self.created_at)
        return self._grid.search(max(self.start_time, self.created_at), inclusive=True)

    def next_after(self, instant: datetime) -> datetime | None:
        """The first occurrence strictly after `instant`, whatever count says; None when none."""
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

    def is_complete(self, executions_done: int, last_occurrence: datetime) -> bool:
        """Whether nothing is left to run after `executions_done`, the last at `last_occurrence`."""
        if self.recurrence is None:
            return executions_done >= 1
        count = self.recurrence.count
        if count is not None and executions_done >= count:
            return True
        return self.next_after(last_occurrence) is None

    def _no_later_than_end(self, instant: datetime) -> datetime | None:
        end = self.recurrence.end_time if self.recurrence else None
        return instant if end is None or instant <= end else None


@dataclass(frozen=True)
class _Grid:
    """The instants a recurrence selects, found from any point without walking from the anchor."""

    zone: tzinfo
    anchor: datetime  # wall time, whole seconds: periods count from the one that holds it
    frequency: Frequency
    interval: int
    end: datetime | None
    by_rules: dict[str, Any]  # rrule's by* arguments with the spec's defaults filled in

    @classmethod
    def of(cls, recurrence: Recurrence, anchor: datetime) -> _Grid:
        zone = zone_named(recurrence.time_zone) if recurrence.time_zone else UTC
        anchor_wall = wall_time(anchor, zone).replace(microsecond=0)
        return cls(
            zone=zone,
            anchor=anchor_wall,
            frequency=recurrence.frequency,
            interval=recurrence.interval,
            end=recurrence.end_time,
            by_rules=_by_rules(recurrence, anchor_wall),
        )

    def search(self, instant: datetime, *, inclusive: bool) -> datetime | None:
        """The first grid instant after `instant` (or at it, if inclusive), unless past the end."""
        for wall in self._walls_from(wall_time(instant, self.zone), inclusive):
            candidate = instant_at(wall, self.zone)
            # A repeated wall time maps to its first instant and skipped ones to the jump, so a
            # wall time past `instant`'s can still name an instant at or before it.
            if candidate < instant or (candidate == instant and not inclusive):
                continue
            return candidate if self.end is None or candidate <= self.end else None
        return None

    def _walls_from(self, wall: datetime, inclusive: bool) -> Iterator[datetime]:
        try:
            rule = rr.rrule(
                _RRULE_FREQUENCY[self.frequency],
                interval=self.interval,
                dtstart=self._period_start(wall),
                wkst=rr.MO,
                cache=False,
                **self.by_rules,
            )
            yield from rule.xafter(wall, inc=inclusive)
        except (ValueError, OverflowError):
            # rrule refuses minute/hour grids that never meet the schedule, and every grid ends
            # at year 9999: either way there is no further occurrence.
            return

    def _period_start(self, wall: datetime) -> datetime:
        """The start of the latest period of the grid that begins at or before `wall`."""
        step = _FIXED_LENGTH_PERIOD.get(self.frequency)
        if step is not None:
            first = _truncate(self.anchor, self.frequency)
            periods = max((wall - first) // (step * self.interval), 0)
            return first + periods * self.interval * step
        months_per_period = self.interval * (12 if self.frequency is Frequency.YEAR else 1)
        first_month = self.anchor.year * 12 + (
            0 if self.frequency is Frequency.YEAR else self.anchor.month - 1
        )
        elapsed = max(wall.year * 12 + wall.month - 1 - first_month, 0)
        year, month = divmod(first_month + elapsed - elapsed % months_per_period, 12)
        return datetime(year, month + 1, 1)


def _truncate(wall: datetime, frequency: Frequency) -> datetime:
    """The start of the minute, hour, day or (Monday-first) week that holds `wall`."""
    if frequency is Frequency.MINUTE:
        return wall.replace(second=0)
    if frequency is Frequency.HOUR:
        return wall.replace(minute=0, second=0)
    midnight = wall.replace(hour=0, minute=0, second=0)
    if frequency is Frequency.DAY:
        return midnight
    return midnight - timedelta(days=wall.weekday())


def _by_rules(recurrence: Recurrence, anchor: datetime) -> dict[str, Any]:
    """The schedule as rrule arguments, every default of SPEC.md section 3 made explicit.

    rrule fills gaps from its dtstart, which here is the start of a period rather than the
    anchor, so nothing may be left for it to fill.
    """
    frequency = recurrence.frequency
    schedule = recurrence.schedule
    minutes = schedule.minutes if schedule else None
    hours = schedule.hours if schedule else None
    rules: dict[str, Any] = {"bysecond": anchor.second}

    if minutes:
        rules["byminute"] = sorted(set(minutes))
    elif frequency is not Frequency.MINUTE:
        # Decision: with frequency Minute the grid itself picks the minutes; an anchor minute
        # would turn "every minute of hour 5" into "once at 05:MM".
        rules["byminute"] = anchor.minute

    if hours:
        rules["byhour"] = sorted(set(hours))
    elif frequency not in (Frequency.MINUTE, Frequency.HOUR):
        rules["byhour"] = range(24) if minutes else anchor.hour

    if frequency is Frequency.WEEK:
        days = schedule.week_days if schedule and schedule.week_days else None
        rules["byweekday"] = sorted({day.index for day in days}) if days else anchor.weekday()
    elif frequency is Frequency.MONTH:
        rules.update(_month_day_rules(recurrence, anchor))
    elif frequency is Frequency.YEAR:
        rules["bymonth"] = anchor.month
        rules["bymonthday"] = anchor.day
    return rules


def _month_day_rules(recurrence: Recurrence, anchor: datetime) -> dict[str, Any]:
    schedule = recurrence.schedule
    month_days = schedule.month_days if schedule else None
    weekdays = schedule.monthly_occurrences if schedule else None
    if not month_days and not weekdays:
        return {"bymonthday": anchor.day}
    rules: dict[str, Any] = {}
    if month_days:
        rules["bymonthday"] = sorted(set(month_days))
    if weekdays:
        # rrule requires a day to match both its plain and its numbered weekdays, where the
        # spec means either; "every Friday" is spelled as the first to fifth Friday instead.
        rules["byweekday"] = sorted(
            {
                _RRULE_WEEKDAY[weekday.day.index](nth)
                for weekday in weekdays
                for nth in (
                    (weekday.occurrence,) if weekday.occurrence else _NTH_WEEKDAYS_OF_A_MONTH
                )
            },
            key=lambda day: (day.weekday, day.n),
        )
    return rules
