"""A deliberately naive reading of docs/behaviour.md#recurrence, to check the engine against.

It walks the wall clock one minute at a time and applies each rule literally: no rrule, no
period arithmetic, no jumps. Its only shortcut is to skip a whole day or hour that a rule
already refuses. It is slow on purpose, and so only used on horizons of a few years.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

import holidays

from shared.domain.schedule.recurrence import Frequency, Recurrence

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
COARSER_THAN_HOUR = {Frequency.DAY, Frequency.WEEK, Frequency.MONTH, Frequency.YEAR}


@dataclass(frozen=True)
class NaiveJob:
    start_time: datetime | None
    recurrence: Recurrence | None
    created_at: datetime

    @property
    def zone(self) -> tzinfo:
        name = self.recurrence.time_zone if self.recurrence else None
        return ZoneInfo(name) if name else UTC

    @property
    def anchor(self) -> datetime:
        instant = self.start_time or self.created_at
        return instant.astimezone(self.zone).replace(tzinfo=None, microsecond=0)

    def first(self, horizon: datetime) -> datetime | None:
        if self.recurrence is None:
            return (
                self.created_at
                if self.start_time is None
                else max(self.start_time, self.created_at)
            )
        if self.start_time is None:
            end = self.recurrence.end_time
            return self.created_at if end is None or self.created_at <= end else None
        return self._search(max(self.start_time, self.created_at), horizon, inclusive=True)

    def next_after(self, instant: datetime, horizon: datetime) -> datetime | None:
        first = self.first(horizon)
        if first is None or first > instant:
            return first
        if self.recurrence is None:
            return None
        return self._search(instant, horizon, inclusive=False)

    def _search(self, instant: datetime, horizon: datetime, *, inclusive: bool) -> datetime | None:
        assert self.recurrence is not None
        # Walk from a little before `instant`'s wall time: around a clock change, a wall time
        # earlier than `instant`'s can name a later instant.
        wall = (
            instant.astimezone(self.zone).replace(tzinfo=None, second=0, microsecond=0) - 3 * HOUR
        )
        end_wall = horizon.astimezone(self.zone).replace(tzinfo=None)
        while wall <= end_wall:
            if not self._day_matches(wall.date()):
                wall = datetime.combine(wall.date() + DAY, datetime.min.time())
                continue
            if not self._hour_matches(wall):
                wall = wall.replace(minute=0) + HOUR
                continue
            for minute in self._minutes_to_try(wall.minute):
                candidate_wall = wall.replace(minute=minute, second=self.anchor.second)
                if not self._minute_matches(candidate_wall):
                    continue
                candidate = naive_instant(candidate_wall, self.zone)
                if candidate > instant or (inclusive and candidate == instant):
                    end = self.recurrence.end_time
                    return candidate if end is None or candidate <= end else None
            wall = wall.replace(minute=0) + HOUR
        return None

    def _minutes_to_try(self, from_minute: int) -> list[int]:
        """The minutes of this hour still to look at; only the listed ones when there is a list."""
        schedule = self.recurrence.schedule if self.recurrence else None
        listed = sorted(schedule.minutes) if schedule and schedule.minutes else range(60)
        return [minute for minute in listed if minute >= from_minute]

    # The rules, each applied at its own level.

    def _day_matches(self, day: date) -> bool:
        recurrence, anchor = self.recurrence, self.anchor
        assert recurrence is not None
        frequency, schedule = recurrence.frequency, recurrence.schedule
        if frequency is Frequency.DAY and (day - anchor.date()).days % recurrence.interval:
            return False
        if frequency is Frequency.WEEK:
            weeks = (
                (day - timedelta(days=day.weekday()))
                - (anchor.date() - timedelta(days=anchor.weekday()))
            ).days // 7
            if weeks % recurrence.interval:
                return False
            wanted = (
                {d.weekday for d in schedule.week_days}
                if schedule and schedule.week_days
                else {anchor.weekday()}
            )
            return day.weekday() in wanted
        if frequency is Frequency.MONTH:
            months = (day.year - anchor.year) * 12 + day.month - anchor.month
            if months % recurrence.interval:
                return False
            return self._month_day_matches(day)
        if frequency is Frequency.YEAR:
            return (day.year - anchor.year) % recurrence.interval == 0 and (day.month, day.day) == (
                anchor.month,
                anchor.day,
            )
        return True

    def _month_day_matches(self, day: date) -> bool:
        schedule = self.recurrence.schedule if self.recurrence else None
        month_days = schedule.month_days if schedule else None
        weekdays = schedule.monthly_occurrences if schedule else None
        if not month_days and not weekdays:
            return day.day == self.anchor.day
        length = calendar.monthrange(day.year, day.month)[1]
        if month_days and not any(day.day == (d if d > 0 else length + 1 + d) for d in month_days):
            return False
        if weekdays:
            nth_from_start = (day.day - 1) // 7 + 1
            nth_from_end = -((length - day.day) // 7 + 1)
            return any(
                w.day.weekday == day.weekday()
                and w.occurrence in (None, nth_from_start, nth_from_end)
                for w in weekdays
            )
        return True

    def _hour_matches(self, wall: datetime) -> bool:
        recurrence, anchor = self.recurrence, self.anchor
        assert recurrence is not None
        schedule = recurrence.schedule
        if recurrence.frequency is Frequency.HOUR:
            hours = (wall.replace(minute=0) - anchor.replace(minute=0, second=0)) // HOUR
            if hours % recurrence.interval:
                return False
        if schedule and schedule.hours:
            return wall.hour in schedule.hours
        if recurrence.frequency in COARSER_THAN_HOUR and not (schedule and schedule.minutes):
            return wall.hour == anchor.hour
        return True

    def _minute_matches(self, wall: datetime) -> bool:
        recurrence, anchor = self.recurrence, self.anchor
        assert recurrence is not None
        schedule = recurrence.schedule
        if recurrence.frequency is Frequency.MINUTE:
            minutes = (wall.replace(second=0) - anchor.replace(second=0)) // MINUTE
            if minutes % recurrence.interval:
                return False
        if schedule and schedule.minutes:
            return wall.minute in schedule.minutes
        return recurrence.frequency is Frequency.MINUTE or wall.minute == anchor.minute


def naive_instant(wall: datetime, zone: tzinfo) -> datetime:
    """The instant a wall time names: its first pass if repeated, the jump if skipped (by scanning)."""
    first_pass = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first_pass.astimezone(zone).replace(tzinfo=None) == wall:
        return first_pass
    probe = wall.replace(tzinfo=zone, fold=1).astimezone(UTC).replace(second=0)
    while probe.astimezone(zone).replace(tzinfo=None) < wall:
        probe += MINUTE
    # The jump is on a whole minute in every zone with clock changes today; step back seconds.
    while (probe - timedelta(seconds=1)).astimezone(zone).replace(tzinfo=None) >= wall:
        probe -= timedelta(seconds=1)
    return probe


class NaiveCalendar:
    """docs/behaviour.md#calendar-exclusions read literally: every day checked on its own, and
    business days found by stepping one day at a time."""

    def __init__(self, recurrence: Recurrence) -> None:
        exclusions = recurrence.exclusions
        self.mode = (recurrence.on_excluded or "Skip").value if recurrence.on_excluded else "Skip"
        self.places = [
            holidays.country_holidays(c.country.upper(), subdiv=c.subdivision)
            for c in (exclusions.holidays or () if exclusions else ())
        ]
        self.spans = [(s.from_, s.to) for s in (exclusions.dates or () if exclusions else ())]
        if exclusions is not None and exclusions.weekdays is not None:
            self.off = {day.weekday for day in exclusions.weekdays}
        else:
            self.off = set() if self.mode == "Skip" else {5, 6}

    def excludes(self, day: date) -> bool:
        return (
            day.weekday() in self.off
            or any(start <= day <= end for start, end in self.spans)
            or any(day in place for place in self.places)
        )

    def landing_day(self, day: date) -> date | None:
        if not self.excludes(day):
            return day
        if self.mode == "Skip":
            return None
        step = DAY if self.mode == "NextBusinessDay" else -DAY
        day += step
        while self.excludes(day):
            day += step
        return day


def naive_series_with_calendar(job: NaiveJob, until: datetime) -> list[datetime]:
    """Every run of `job` up to `until` with its calendar applied: each scheduled occurrence
    kept, dropped or moved on its own, then the landed instants as a sorted set."""
    assert job.recurrence is not None
    calendar = NaiveCalendar(job.recurrence)
    floor = max(job.start_time or job.created_at, job.created_at)
    landed: set[datetime] = set()
    scheduled = job.first(until)
    while scheduled is not None and scheduled <= until:
        wall = scheduled.astimezone(job.zone).replace(tzinfo=None)
        day = calendar.landing_day(wall.date())
        if day is not None:
            moved = naive_instant(datetime.combine(day, wall.time()), job.zone)
            end = job.recurrence.ends_at
            if moved >= floor and (end is None or moved <= end):
                landed.add(moved)
        scheduled = job.next_after(scheduled, until)
    return sorted(landed)
