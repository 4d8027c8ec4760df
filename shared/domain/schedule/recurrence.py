"""A job's recurrence as the API writes it, and the rules a valid one obeys.

See docs/behaviour.md#recurrence.

The models check the shape of each value (types, per-value ranges); `timing_problems` checks the
rules that join several values (what goes with which frequency, interval maxima, how far ahead a
start may lie) and names the field each one concerns.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from dateutil.relativedelta import relativedelta
from pydantic import Field, Strict, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from shared.domain.problems import FieldError, InvalidRequest, field_errors, field_path
from shared.domain.schedule.days import DayOfWeek
from shared.domain.schedule.exclusions import Exclusions, OnExcluded
from shared.domain.schedule.timezones import UnknownTimeZone, zone_named
from shared.domain.wire import SentInstant, WireEnum, WireModel, parse_iso


class Frequency(WireEnum):
    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    YEAR = "year"


MAX_INTERVAL = {
    Frequency.MINUTE: 1000,
    Frequency.HOUR: 1000,
    Frequency.DAY: 548,  # these three are 18 months, the longest recurrence span
    Frequency.WEEK: 78,
    Frequency.MONTH: 18,
    Frequency.YEAR: 1,  # Decision: no span beyond 18 months (behaviour.md#frequency-and-interval)
}

LONGEST_WAIT_FOR_START = relativedelta(months=18)
# Decision: a start before 1900 is refused; before time zones were standard, local mean times
# can push a wall clock outside the calendar (a year-1 start in Kiritimati is year 0 there).
EARLIEST_START = datetime(1900, 1, 1, tzinfo=UTC)

# Whole JSON numbers only: `true` or "5" for a count is a client bug worth reporting.
MinuteOfHour = Annotated[int, Strict(), Field(ge=0, le=59)]
HourOfDay = Annotated[int, Strict(), Field(ge=0, le=23)]
DayOfMonth = Annotated[int, Strict(), Field(ge=-31, le=31)]
Occurrence = Annotated[int, Strict(), Field(ge=-5, le=5)]
Positive = Annotated[int, Strict(), Field(ge=1)]


class MonthlyOccurrence(WireModel):
    """A weekday of the month: the `occurrence`-th one (negative counts from the end), or all."""

    day: DayOfWeek
    occurrence: Occurrence | None = None


class Schedule(WireModel):
    """The advanced schedule. An empty list counts as absent."""

    minutes: tuple[MinuteOfHour, ...] | None = None
    hours: tuple[HourOfDay, ...] | None = None
    week_days: Annotated[tuple[DayOfWeek, ...], Field(max_length=7)] | None = None
    month_days: tuple[DayOfMonth, ...] | None = None
    monthly_occurrences: tuple[MonthlyOccurrence, ...] | None = None

    @field_validator("*", mode="after")
    @classmethod
    def _empty_is_absent(cls, values: tuple[object, ...] | None) -> tuple[object, ...] | None:
        return values or None


class Recurrence(WireModel):
    frequency: Frequency
    interval: Positive = 1
    schedule: Schedule | None = None
    count: Positive | None = None
    end_time: SentInstant | None = None
    time_zone: str | None = None
    """Our extension: the zone whose wall clock the schedule follows (UTC when absent)."""
    exclusions: Exclusions | None = None
    """Our extension: days the job does not run on (docs/behaviour.md#calendar-exclusions)."""
    on_excluded: OnExcluded | None = None
    """Our extension: skip an occurrence on an excluded day (the default), or move it."""

    @property
    def ends_at(self) -> datetime | None:
        return parse_iso(self.end_time) if self.end_time else None

    @field_validator("interval", mode="before")
    @classmethod
    def _default_interval(cls, value: object) -> object:
        return 1 if value is None else value

    @field_validator("time_zone", mode="after")
    @classmethod
    def _known_zone(cls, name: str | None) -> str | None:
        if name is not None:
            try:
                zone_named(name)
            except UnknownTimeZone as unknown:
                raise PydanticCustomError("time_zone", str(unknown)) from None
        return name


def read_recurrence(
    data: object, *, start_time: datetime | None = None, now: datetime
) -> Recurrence:
    """A recurrence from its JSON, or InvalidRequest listing every problem, each by its field."""
    try:
        recurrence = Recurrence.model_validate(data)
    except ValidationError as invalid:
        raise InvalidRequest(field_errors(invalid, "recurrence")) from None
    problems = timing_problems(start_time, recurrence, now)
    if problems:
        raise InvalidRequest(problems)
    return recurrence


def timing_problems(
    start_time: datetime | None, recurrence: Recurrence | None, now: datetime
) -> list[FieldError]:
    """Every rule that a job's startTime and recurrence break together, each naming its field."""
    problems = []
    if start_time is not None and start_time < EARLIEST_START:
        problems.append(
            FieldError(
                "startTime", f"{start_time.isoformat()} is before 1900, the earliest start allowed"
            )
        )
    if start_time is not None and start_time > now + LONGEST_WAIT_FOR_START:
        problems.append(
            FieldError(
                "startTime",
                f"{start_time.isoformat()} is more than 18 months away; a job may start at most "
                f"18 months after it is defined (now {now.isoformat()})",
            )
        )
    if recurrence is not None:
        problems.extend(recurrence_problems(recurrence))
    return problems


def recurrence_problems(recurrence: Recurrence) -> list[FieldError]:
    """Every recurrence rule that joins several values of a recurrence."""
    frequency = recurrence.frequency
    problems = []
    if recurrence.interval > MAX_INTERVAL[frequency]:
        problems.append(
            FieldError(
                "recurrence.interval",
                f"{recurrence.interval} is too long for frequency {frequency.value}: the maximum "
                f"is {MAX_INTERVAL[frequency]} (a recurrence spans at most 18 months)",
            )
        )
    schedule = recurrence.schedule
    if schedule is None:
        return problems
    only_with = (
        ("weekDays", schedule.week_days, Frequency.WEEK),
        ("monthDays", schedule.month_days, Frequency.MONTH),
        ("monthlyOccurrences", schedule.monthly_occurrences, Frequency.MONTH),
    )
    for name, values, required in only_with:
        if values is not None and frequency is not required:
            problems.append(
                FieldError(
                    f"recurrence.schedule.{name}",
                    f"is allowed only with frequency {required.value}, not {frequency.value}",
                )
            )
    for position, day in enumerate(schedule.month_days or ()):
        if day == 0:
            problems.append(
                FieldError(
                    field_path("recurrence", "schedule", "monthDays", position),
                    "0 is not a day of the month; use 1..31, or -1..-31 to count from the end",
                )
            )
    for position, weekday in enumerate(schedule.monthly_occurrences or ()):
        if weekday.occurrence == 0:
            problems.append(
                FieldError(
                    field_path(
                        "recurrence", "schedule", "monthlyOccurrences", position, "occurrence"
                    ),
                    "0 is not an occurrence; use 1..5 (first to fifth), -1..-5 (last to fifth "
                    "from the end), or leave it out for every such weekday",
                )
            )
    return problems
