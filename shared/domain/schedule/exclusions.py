"""Days a job does not run on: public holidays, blackout dates and weekdays off.

Our extension of `recurrence` (docs/behaviour.md#calendar-exclusions). The models check the
shape of each value and that it names something real (a country the `holidays` package knows,
a range that ends after it starts); `BusinessCalendar` answers the one question the schedule
engine asks of them: is this date, on the job's wall clock, excluded, and which is the nearest
day that is not.

The `holidays` package is large, so it is imported only when a calendar actually needs it.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Annotated

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from shared.domain.schedule.days import DayOfWeek
from shared.domain.wire import WireEnum, WireModel

MAX_EXCLUDED_DATES = 1000
# Decision: a business day is looked for at most this far from an excluded one; a calendar that
# excludes more than that in a row (a range of years) has no business day to move to.
LONGEST_EXCLUDED_STRETCH = timedelta(days=3 * 366)
WEEKEND = frozenset({DayOfWeek.SATURDAY.weekday, DayOfWeek.SUNDAY.weekday})
_ONE_DAY = timedelta(days=1)


class OnExcluded(WireEnum):
    """What happens to an occurrence that falls on an excluded day."""

    SKIP = "Skip"
    NEXT_BUSINESS_DAY = "NextBusinessDay"
    PREVIOUS_BUSINESS_DAY = "PreviousBusinessDay"


class HolidayCalendar(WireModel):
    """The public holidays of a country (ISO 3166-1), or of one of its subdivisions (ISO 3166-2
    without the country prefix, as the `holidays` package names them: "BY", not "DE-BY")."""

    country: Annotated[str, Field(min_length=2, max_length=3)]
    subdivision: str | None = None

    @model_validator(mode="after")
    def _known_to_the_library(self) -> HolidayCalendar:
        subdivisions = supported_countries().get(self.country.upper())
        if subdivisions is None:
            raise PydanticCustomError(
                "holiday_country",
                "'{country}' is not a country with known public holidays; use an ISO 3166-1 "
                "code such as DE, GB or US",
                {"country": self.country},
            )
        if self.subdivision is not None and self.subdivision.upper() not in {
            name.upper() for name in subdivisions
        }:
            raise PydanticCustomError(
                "holiday_subdivision",
                "'{subdivision}' is not a subdivision of {country} with known public holidays; "
                "known ones: {known}",
                {
                    "subdivision": self.subdivision,
                    "country": self.country.upper(),
                    "known": ", ".join(subdivisions) or "none",
                },
            )
        return self

    @property
    def key(self) -> tuple[str, str | None]:
        """The country and subdivision as the library spells them."""
        country = self.country.upper()
        if self.subdivision is None:
            return country, None
        spelled = {name.upper(): name for name in supported_countries()[country]}
        return country, spelled[self.subdivision.upper()]


class DateRange(WireModel):
    """Every day from `from` to `to`, both included; a single date is the range of one day."""

    from_: date = Field(alias="from")
    to: date

    @model_validator(mode="before")
    @classmethod
    def _single_date(cls, value: object) -> object:
        if isinstance(value, str):
            return {"from": value, "to": value}
        if not isinstance(value, dict):
            raise PydanticCustomError(
                "excluded_date",
                'must be a date ("2026-12-24") or a range ({"from": "2026-12-24", "to": '
                '"2027-01-01"})',
            )
        return value

    @model_serializer(mode="wrap")
    def _one_day_as_a_date(self, to_json: SerializerFunctionWrapHandler) -> object:
        # A date sent alone is echoed alone: a client reads back what it wrote.
        return self.from_.isoformat() if self.from_ == self.to else to_json(self)

    @model_validator(mode="after")
    def _in_order(self) -> DateRange:
        if self.to < self.from_:
            raise PydanticCustomError(
                "date_range_order",
                "'to' ({to}) is before 'from' ({start}); a range runs from its first day to "
                "its last",
                {"to": self.to.isoformat(), "start": self.from_.isoformat()},
            )
        return self


class Exclusions(WireModel):
    holidays: tuple[HolidayCalendar, ...] | None = None
    dates: Annotated[tuple[DateRange, ...], Field(max_length=MAX_EXCLUDED_DATES)] | None = None
    weekdays: Annotated[tuple[DayOfWeek, ...], Field(max_length=6)] | None = None
    """Days that are never business days; absent means Saturday and Sunday when occurrences
    move, and none when they are skipped. An empty list means every weekday is a business day."""

    @field_validator("weekdays", mode="after")
    @classmethod
    def _a_day_left(cls, days: tuple[DayOfWeek, ...] | None) -> tuple[DayOfWeek, ...] | None:
        if days is not None and len(set(days)) == len(DayOfWeek):
            raise PydanticCustomError(
                "weekdays_all", "excludes all seven days, which leaves no day to run on"
            )
        return days


def supported_countries() -> dict[str, list[str]]:
    """Country codes the `holidays` package knows, each with its subdivision codes."""
    return dict(_supported_countries())


@functools.cache
def _supported_countries() -> tuple[tuple[str, list[str]], ...]:
    import holidays  # noqa: PLC0415 (large: imported only where a job names holidays)

    return tuple(
        (country, list(subdivisions))
        for country, subdivisions in holidays.list_supported_countries().items()
    )


@functools.lru_cache(maxsize=4096)
def _holidays_in(country: str, subdivision: str | None, year: int) -> frozenset[date]:
    import holidays  # noqa: PLC0415 (as above)

    return frozenset(holidays.country_holidays(country, subdiv=subdivision, years=year).keys())


@dataclass(frozen=True)
class BusinessCalendar:
    """Which dates are excluded, and the nearest business day to any date."""

    holidays: tuple[tuple[str, str | None], ...]
    single_dates: frozenset[date]
    ranges: tuple[tuple[date, date], ...]  # sorted by start, overlaps merged
    weekdays_off: frozenset[int]

    @classmethod
    def of(cls, exclusions: Exclusions | None, on_excluded: OnExcluded | None) -> BusinessCalendar:
        exclusions = exclusions or Exclusions()
        if exclusions.weekdays is not None:
            weekdays_off = frozenset(day.weekday for day in exclusions.weekdays)
        elif (on_excluded or OnExcluded.SKIP) is OnExcluded.SKIP:
            weekdays_off = frozenset()
        else:
            weekdays_off = WEEKEND
        spans = [(span.from_, span.to) for span in exclusions.dates or () if span.from_ != span.to]
        single = frozenset(span.from_ for span in exclusions.dates or () if span.from_ == span.to)
        return cls(
            holidays=tuple(dict.fromkeys(calendar.key for calendar in exclusions.holidays or ())),
            single_dates=single,
            ranges=_merged(spans),
            weekdays_off=weekdays_off,
        )

    def excludes(self, day: date) -> bool:
        return (
            day.weekday() in self.weekdays_off
            or day in self.single_dates
            or self._range_holding(day) is not None
            or any(day in _holidays_in(country, sub, day.year) for country, sub in self.holidays)
        )

    def is_holiday(self, day: date) -> bool:
        return any(day in _holidays_in(country, sub, day.year) for country, sub in self.holidays)

    def next_business_day(self, day: date) -> date | None:
        """The first day after `day` that is not excluded; None past the calendar's reach."""
        return self._business_day(day, forward=True)

    def previous_business_day(self, day: date) -> date | None:
        """The last day before `day` that is not excluded; None past the calendar's reach."""
        return self._business_day(day, forward=False)

    def _business_day(self, day: date, *, forward: bool) -> date | None:
        step = _ONE_DAY if forward else -_ONE_DAY
        try:
            candidate = day + step
            while abs(candidate - day) <= LONGEST_EXCLUDED_STRETCH:
                span = self._range_holding(candidate)
                if span is not None:  # leap over a whole blackout at once
                    candidate = (span[1] if forward else span[0]) + step
                elif self.excludes(candidate):
                    candidate += step
                else:
                    return candidate
        except OverflowError:
            pass  # the year 1 or 9999: no day beyond
        return None

    def _range_holding(self, day: date) -> tuple[date, date] | None:
        position = bisect.bisect_right(self.ranges, (day, date.max)) - 1
        if position >= 0 and self.ranges[position][1] >= day:
            return self.ranges[position]
        return None


def _merged(spans: Iterable[tuple[date, date]]) -> tuple[tuple[date, date], ...]:
    merged: list[tuple[date, date]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1] + _ONE_DAY:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def place_name(country: str, subdivision: str | None = None) -> str:
    """A holiday calendar's place in words, "Bayern, Germany", from the library's own names
    (subdivisions in their local spelling); the codes where it has none."""
    import holidays  # noqa: PLC0415 (as above)

    try:
        entity = type(holidays.country_holidays(country, subdiv=subdivision))
    except NotImplementedError:
        return f"{country}-{subdivision}" if subdivision else country
    # The class a code names is an alias of the one named after the country ("DE" of Germany).
    named = next((kind for kind in entity.__mro__ if len(kind.__name__) > 3), entity)
    country_words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", named.__name__)
    if subdivision is None:
        return country_words
    aliases = getattr(entity, "subdivisions_aliases", {})
    local = next(
        (name for name, code in aliases.items() if code == subdivision and len(name) > 3),
        subdivision,
    )
    return f"{local}, {country_words}"
