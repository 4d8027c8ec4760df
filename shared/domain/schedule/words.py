"""A job's schedule in plain English, for the web console.

The words follow the semantics of `occurrences.py` (docs/behaviour.md#recurrence): the defaults
a schedule takes from its anchor (startTime), the way hours combine with minutes, and the grid
that an interval above 1 counts from the anchor. Times of day are wall-clock times of
`recurrence.timeZone` (UTC when absent); instants (a one-off's start, a series' end) are UTC.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from shared.domain.schedule.days import DayOfWeek
from shared.domain.schedule.exclusion_words import describe_exclusions
from shared.domain.schedule.recurrence import (
    Frequency,
    MonthlyOccurrence,
    Recurrence,
    Schedule,
)
from shared.domain.schedule.timezones import wall_time, zone_named
from shared.domain.wire import Instant

FALLBACK = "Custom schedule"
MOST_TIMES_LISTED = 6
"""Beyond this many times a day (or minutes an hour), a sentence summarises rather than lists."""

_SHORTEST_RUN_NAMED_AS_A_RANGE = 3  # "09 to 16", but "09 and 10"
_INSTANT = TypeAdapter(Instant)
_SUB_DAY = (Frequency.MINUTE, Frequency.HOUR)
_UNIT = {
    Frequency.MINUTE: "minute",
    Frequency.HOUR: "hour",
    Frequency.DAY: "day",
    Frequency.WEEK: "week",
    Frequency.MONTH: "month",
    Frequency.YEAR: "year",
}
_NTH_WORD = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_ORDINAL_SUFFIX = {1: "st", 2: "nd", 3: "rd"}
_MONTH_NAMES = (
    *("January", "February", "March", "April", "May", "June"),
    *("July", "August", "September", "October", "November", "December"),
)
_SAVE_MINUTE = "mm"  # stands for the minute of the save moment, which a definition does not hold


def describe_schedule(definition: Mapping[str, Any]) -> str:
    """When a job runs, in one English sentence, from its stored definition (wire JSON).

    Examples: "Once, at 2026-12-01 02:30:00 UTC"; "Every 2 hours, from 2026-12-01 02:30:00
    UTC"; "Every day at 02:30 UTC, from 2026-12-01"; "Mondays, Wednesdays and Fridays at 10:00
    and 22:00 UTC"; "Every hour at :00, :15, :30 and :45"; "On the first Friday of every month
    at 08:00 UTC, 10 times, until 2027-06-01 00:00:00 UTC".

    Conventions:
    - Times of day are HH:MM, or HH:MM:SS when startTime has seconds (every run takes its
      second from startTime); they are followed by the zone: "UTC" or recurrence.timeZone as
      written. Minutes past the hour (":15") name a zone only when timeZone is given.
    - Instants are "YYYY-MM-DD HH:MM:SS UTC"; the start of a day-or-longer grid is its date in
      the schedule's zone.
    - At most six times a day (or minutes an hour) are listed; more are summarised as "every
      15 minutes between 09:00 and 16:45" when evenly spaced, else "48 times between 00:00 and
      23:59".
    - An interval above 1 reads "Every 2 days", or "Mondays of every 2nd week" / "On the 1st of
      every 3rd month" where days are named.
    - The start is named ("from ...") when the runs are counted from it: without a schedule,
      or with an interval above 1. A schedule with interval 1 runs at the same points whenever
      it started, so its startTime, only a lower bound, is left out.
    - Without startTime the anchor is the save moment, which a definition does not hold: the
      sentence says "when it was saved" for whatever comes from it, and "mm" for its minute.
    - A definition whose startTime or recurrence cannot be read gives "Custom schedule".
    """
    try:
        start = _start_time_of(definition)
        recurrence = _recurrence_of(definition)
    except (ValidationError, ValueError, TypeError, OverflowError):
        return FALLBACK
    return describe(start, recurrence)


def describe(start: datetime | None, recurrence: Recurrence | None) -> str:
    """`describe_schedule` of a typed definition: its startTime and recurrence."""
    if recurrence is None:
        return f"Once, at {_instant(start)}" if start else "Once, as soon as it is saved"
    try:
        reading = _Reading.of(recurrence, start)
    except (ValueError, TypeError, OverflowError):
        return FALLBACK
    return _describe_series(reading)


@dataclass(frozen=True)
class _Reading:
    """A recurrence with what its anchor decides, seen on the schedule's wall clock."""

    recurrence: Recurrence
    schedule: Schedule
    start: datetime | None
    anchor: datetime | None  # the start as the zone's clock shows it, whole seconds
    zone: str

    @classmethod
    def of(cls, recurrence: Recurrence, start: datetime | None) -> _Reading:
        zone = zone_named(recurrence.time_zone) if recurrence.time_zone else UTC
        anchor = wall_time(start, zone).replace(microsecond=0) if start else None
        return cls(
            recurrence=recurrence,
            schedule=recurrence.schedule or Schedule(),
            start=start,
            anchor=anchor,
            zone=recurrence.time_zone.strip() if recurrence.time_zone else "UTC",
        )

    @property
    def interval(self) -> int:
        return self.recurrence.interval

    @property
    def has_schedule(self) -> bool:
        # Empty lists were read as absent, so `{"schedule": {}}` is no schedule at all.
        return any(value is not None for value in self.schedule.model_dump().values())

    @property
    def zone_after_minutes(self) -> str:
        """Minutes past the hour are the same on most clocks, so only a named zone is said."""
        return f" {self.zone}" if self.recurrence.time_zone else ""

    def clock(self, hour: int, minute: int) -> str:
        return f"{hour:02d}{self.minutes_past(minute)}"

    def minutes_past(self, minute: int) -> str:
        """A minute past the hour, ":15", with the anchor's second when it has one: ":15:19"."""
        second = self.anchor.second if self.anchor else 0
        return f":{minute:02d}:{second:02d}" if second else f":{minute:02d}"


def _describe_series(reading: _Reading) -> str:
    frequency = _equivalent_frequency(reading)
    if reading.anchor is None and not reading.has_schedule:
        # Everything comes from the save moment: the grid is all there is to say.
        runs = _every(reading.interval, _UNIT[frequency])
    elif frequency in _SUB_DAY:
        runs = _sub_day_runs(reading, frequency)
    else:
        runs = _days(reading, frequency) + _times_of_day(reading)
    return (
        runs
        + describe_exclusions(reading.recurrence)
        + _beginning(reading, frequency)
        + _ending(reading.recurrence)
    )


def _equivalent_frequency(reading: _Reading) -> Frequency:
    """The coarsest frequency that selects the same runs, so that a sentence can name times.

    With interval 1 a grid covers every period, so minutes listed on a minute grid are simply
    minutes of every hour, and hours listed on an hour grid are simply hours of every day.
    """
    frequency = reading.recurrence.frequency
    if reading.interval != 1:
        return frequency
    if frequency is Frequency.MINUTE and reading.schedule.minutes:
        frequency = Frequency.HOUR
    if frequency is Frequency.HOUR and reading.schedule.hours:
        frequency = Frequency.DAY
    return frequency


def _sub_day_runs(reading: _Reading, frequency: Frequency) -> str:
    """A minute or hour grid: its step, the minutes it keeps, the hours it keeps."""
    schedule = reading.schedule
    runs = _every(reading.interval, _UNIT[frequency])
    minutes = sorted(set(schedule.minutes or ()))
    if frequency is Frequency.HOUR and not minutes and schedule.hours and reading.anchor:
        minutes = [reading.anchor.minute]  # hours listed without minutes: the anchor's minute
    if minutes and frequency is Frequency.MINUTE:
        # On a minute grid the listed minutes filter its steps (interval 1 became an hour grid).
        runs += f", only those at {_minutes_kept(reading, minutes)} past the hour"
    elif minutes:
        runs += _points(
            [minute * 60 for minute in minutes], lambda at: reading.minutes_past(at // 60)
        )
    hours = sorted(set(schedule.hours or ()))
    if hours and len(hours) < 24:
        runs += f" during {_hours(hours)} {reading.zone}"
    elif minutes:
        runs += reading.zone_after_minutes
    return runs


def _minutes_kept(reading: _Reading, minutes: Sequence[int]) -> str:
    if len(minutes) <= MOST_TIMES_LISTED:
        return _join([reading.minutes_past(minute) for minute in minutes], last="or")
    first, last = reading.minutes_past(minutes[0]), reading.minutes_past(minutes[-1])
    return f"{len(minutes)} minutes between {first} and {last}"


def _days(reading: _Reading, frequency: Frequency) -> str:
    """The days a day-or-longer grid runs on, as the start of a sentence."""
    if frequency is Frequency.WEEK:
        return _weekdays(reading)
    if frequency is Frequency.MONTH:
        return _days_of_month(reading)
    if frequency is Frequency.YEAR:
        every = _every(reading.interval, "year")
        if reading.anchor is None:
            return f"{every} on the date it was saved"
        return f"{every} on {reading.anchor.day} {_MONTH_NAMES[reading.anchor.month - 1]}"
    return _every(reading.interval, "day")


def _weekdays(reading: _Reading) -> str:
    listed = reading.schedule.week_days
    if listed:
        days = sorted(set(listed), key=lambda day: day.weekday)
    elif reading.anchor is not None:
        days = [list(DayOfWeek)[reading.anchor.weekday()]]
    else:
        return f"{_every(reading.interval, 'week')} on the weekday it was saved"
    which_weeks = "" if reading.interval == 1 else f" of every {_ordinal(reading.interval)} week"
    if len(days) == len(DayOfWeek):
        return f"Every day{which_weeks}"
    names = _ranges(
        [day.weekday for day in days], lambda weekday: _plural(list(DayOfWeek)[weekday])
    )
    return _join(names) + which_weeks


def _days_of_month(reading: _Reading) -> str:
    schedule = reading.schedule
    month_days = schedule.month_days
    weekdays = schedule.monthly_occurrences
    if not month_days and not weekdays:
        if reading.anchor is None:
            return f"{_every(reading.interval, 'month')} on the day of the month it was saved"
        month_days = (reading.anchor.day,)
    which_months = (
        "every month" if reading.interval == 1 else f"every {_ordinal(reading.interval)} month"
    )
    if not month_days:
        assert weekdays is not None
        named = [_weekday_of_month(each) for each in _in_order(weekdays)]
        return f"On {_join(named)} of {which_months}"
    days = f"On {_month_days(month_days)} of {which_months}"
    if weekdays:
        # Decision (docs/behaviour.md#recurrence): both lists given select the days in both.
        kinds = [_weekday_of_month(each, every="a") for each in _in_order(weekdays)]
        days += f" (when it is {_join(kinds, last='or')})"
    return days


def _times_of_day(reading: _Reading) -> str:
    """The times of day a day-or-longer grid runs at, with the defaults the anchor gives."""
    schedule, anchor = reading.schedule, reading.anchor
    minutes = sorted(set(schedule.minutes)) if schedule.minutes else None
    if schedule.hours:
        hours: list[int] | None = sorted(set(schedule.hours))
    elif minutes:
        hours = list(range(24))  # minutes without hours: every hour
    else:
        hours = [anchor.hour] if anchor else None
    if minutes is None and anchor is not None:
        minutes = [anchor.minute]
    if hours is None:
        return " at the time of day it was saved"
    if minutes is None:
        said = _points(
            [hour * 3600 for hour in hours], lambda at: f"{at // 3600:02d}:{_SAVE_MINUTE}"
        )
        return f"{said} {reading.zone} ({_SAVE_MINUTE}: the minute it was saved)"
    seconds_of_day = [hour * 3600 + minute * 60 for hour in hours for minute in minutes]
    said = _points(seconds_of_day, lambda at: reading.clock(at // 3600, at % 3600 // 60))
    return f"{said} {reading.zone}"


def _beginning(reading: _Reading, frequency: Frequency) -> str:
    """Where the runs are counted from, when that changes which runs there are."""
    if reading.start is None or reading.anchor is None:
        # Without startTime a job runs as soon as it is saved, a schedule or not.
        return (
            ", after a first run when it was saved"
            if reading.has_schedule
            else ", from when it was saved"
        )
    if reading.has_schedule and reading.interval == 1:
        return ""
    if frequency in _SUB_DAY:
        return f", from {_instant(reading.start)}"
    return f", from {reading.anchor.date().isoformat()}"


def _ending(recurrence: Recurrence) -> str:
    words = ""
    if recurrence.count is not None:
        words += ", once" if recurrence.count == 1 else f", {recurrence.count} times"
    if recurrence.ends_at is not None:
        words += f", until {_instant(recurrence.ends_at)}"
    return words


# --- reading a definition -------------------------------------------------------------------


def _start_time_of(definition: Mapping[str, Any]) -> datetime | None:
    value = _property(definition, "startTime")
    return _INSTANT.validate_python(value) if value else None


def _recurrence_of(definition: Mapping[str, Any]) -> Recurrence | None:
    value = _property(definition, "recurrence")
    # As occurrences_of reads it: an empty recurrence is none.
    return Recurrence.model_validate(value) if value else None


def _property(definition: Mapping[str, Any], name: str) -> Any:
    """A property by its name in any case, as the API matches names."""
    folded = name.casefold()
    return next((value for key, value in definition.items() if str(key).casefold() == folded), None)


# --- words ----------------------------------------------------------------------------------


def _instant(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _every(interval: int, unit: str) -> str:
    return f"Every {unit}" if interval == 1 else f"Every {interval} {unit}s"


def _points(seconds: Sequence[int], label: Callable[[int], str]) -> str:
    """Points in a day or an hour (in seconds from its start): listed, or summarised if many.

    The answer begins with its own joining words: " at 10:00 and 22:00", ", every 15 minutes
    between 09:00 and 16:45", ", 48 times between 00:00 and 23:59".
    """
    ordered = sorted(set(seconds))
    if len(ordered) <= MOST_TIMES_LISTED:
        return " at " + _join([label(point) for point in ordered])
    span = f"between {label(ordered[0])} and {label(ordered[-1])}"
    gaps = {later - earlier for earlier, later in itertools.pairwise(ordered)}
    if len(gaps) == 1:
        return f", every {_duration(gaps.pop())} {span}"
    return f", {len(ordered)} times {span}"


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    if rest == 0:
        return "hour" if hours == 1 else f"{hours} hours"
    minutes = seconds // 60
    return "minute" if minutes == 1 else f"{minutes} minutes"


def _hours(hours: Sequence[int]) -> str:
    named = _ranges(hours, lambda hour: f"{hour:02d}")
    return f"hour {named[0]}" if len(hours) == 1 else f"hours {_join(named)}"


def _month_days(days: Sequence[int]) -> str:
    """ "the 1st and 15th", "the 1st to 7th", "the 1st and the last day", in calendar order."""
    ordered = sorted(set(days), key=lambda day: (day < 0, day))
    positive = [day for day in ordered if day > 0]
    from_the_end = [_from_the_end(day) for day in ordered if day < 0]
    counted = _ranges(positive, _ordinal)
    if not from_the_end:
        return "the " + _join(counted)
    return _join([f"the {day}" for day in counted + from_the_end])


def _from_the_end(day: int) -> str:
    if day == -1:
        return "last day"
    return f"{_nth_word(-day)}-to-last day"


def _weekday_of_month(weekday: MonthlyOccurrence, *, every: str = "every") -> str:
    name = weekday.day.value.capitalize()
    occurrence = weekday.occurrence
    if not occurrence:
        return f"{every} {name}"
    if occurrence > 0:
        return f"the {_nth_word(occurrence)} {name}"
    if occurrence == -1:
        return f"the last {name}"
    return f"the {_nth_word(-occurrence)}-to-last {name}"


def _in_order(weekdays: Sequence[MonthlyOccurrence]) -> list[MonthlyOccurrence]:
    """Weekdays of the month without repeats, by weekday, then first to last in the month."""

    def position(weekday: MonthlyOccurrence) -> tuple[int, int]:
        occurrence = weekday.occurrence or 0
        # Every such weekday first, then 1..5, then -5..-1: how they fall in a month.
        return weekday.day.weekday, occurrence if occurrence >= 0 else 10 + occurrence

    return sorted(set(weekdays), key=position)


def _plural(day: DayOfWeek) -> str:
    return f"{day.value.capitalize()}s"


def _nth_word(n: int) -> str:
    return _NTH_WORD.get(n, _ordinal(n))


def _ordinal(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return f"{n}th"
    return f"{n}{_ORDINAL_SUFFIX.get(n % 10, 'th')}"


def _ranges(values: Sequence[int], name: Callable[[int], str]) -> list[str]:
    """Sorted values named one by one, except runs of three or more: "Mondays to Fridays"."""
    named: list[str] = []
    for _, run in itertools.groupby(enumerate(values), key=lambda pair: pair[1] - pair[0]):
        members = [value for _, value in run]
        if len(members) >= _SHORTEST_RUN_NAMED_AS_A_RANGE:
            named.append(f"{name(members[0])} to {name(members[-1])}")
        else:
            named.extend(name(member) for member in members)
    return named


def _join(words: Sequence[str], *, last: str = "and") -> str:
    """ "A", "A and B", "A, B and C"."""
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} {last} {words[-1]}"
