"""Why a day is excluded, in words a history entry or a preview can show: "Christmas Day
(public holiday, DE-BY)", "a blackout date", "a Saturday, a day off".

Holiday names come from the `holidays` package, in English where it has them (its default is
each country's own language).
"""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime, timedelta
from typing import NotRequired, TypedDict

from shared.domain.schedule.days import DayOfWeek
from shared.domain.schedule.excluded_days import ExcludedOccurrence
from shared.domain.schedule.exclusions import BusinessCalendar
from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.timezones import wall_time, zone_named
from shared.domain.wire import iso

_ENGLISH = ("en_US", "en_GB", "en")
_DAY_NAMES = [day.value.capitalize() for day in DayOfWeek]


def why_excluded(calendar: BusinessCalendar, day: date) -> str:
    """Every reason `calendar` excludes `day`, holidays first; empty when it does not."""
    reasons = [
        f"{name} (public holiday, {_code(country, subdivision)})"
        for country, subdivision in calendar.holidays
        if (name := _holiday_names(country, subdivision, day.year).get(day))
    ]
    if day in calendar.single_dates:
        reasons.append("a blackout date")
    reasons.extend(
        f"in the blackout from {start} to {end}"
        for start, end in calendar.ranges
        if start <= day <= end
    )
    if day.weekday() in calendar.weekdays_off:
        reasons.append(f"a {_DAY_NAMES[day.weekday()]}, a day off")
    return " and ".join(reasons)


def holiday_countries() -> list[dict[str, object]]:
    """The countries the `holidays` package knows, each with its subdivisions: code and name,
    in English where the package has one, sorted by name. For pickers."""
    return [dict(country) for country in _holiday_countries()]


@functools.cache
def _holiday_countries() -> tuple[dict[str, object], ...]:
    import holidays  # noqa: PLC0415 (large: imported only where a calendar is shown)

    countries: list[dict[str, object]] = []
    for code, subdivisions in holidays.list_supported_countries().items():
        entity = holidays.country_holidays(code)
        named = next((kind for kind in type(entity).__mro__ if len(kind.__name__) > 3), None)
        name = _spaced(named.__name__) if named is not None else code
        local_names = _subdivision_names(entity)
        countries.append(
            {
                "code": code,
                "name": name,
                "subdivisions": [
                    {"code": sub, "name": local_names.get(sub, sub)} for sub in subdivisions
                ],
            }
        )
    return tuple(sorted(countries, key=lambda country: str(country["name"])))


def _subdivision_names(entity: object) -> dict[str, str]:
    """A subdivision's name by its code: the longest alias the package gives it."""
    names: dict[str, str] = {}
    for alias, code in getattr(entity, "subdivisions_aliases", {}).items():
        if len(alias) > len(names.get(code, "")) and len(alias) > 3:
            names[code] = alias
    return names


def _spaced(class_name: str) -> str:
    return "".join(f" {letter}" if letter.isupper() and at else letter
                   for at, letter in enumerate(class_name))  # fmt: skip


def _code(country: str, subdivision: str | None) -> str:
    return f"{country}-{subdivision}" if subdivision else country


@functools.lru_cache(maxsize=1024)
def _holiday_names(country: str, subdivision: str | None, year: int) -> dict[date, str]:
    import holidays  # noqa: PLC0415 (as above)

    plain = holidays.country_holidays(country, subdiv=subdivision, years=year)
    language = next((name for name in _ENGLISH if name in plain.supported_languages), None)
    if language is None:
        return dict(plain.items())
    named = holidays.country_holidays(country, subdiv=subdivision, years=year, language=language)
    return dict(named.items())


class ExcludedView(TypedDict):
    """An occurrence a calendar skips or moves, as a preview shows it."""

    scheduled: str
    reason: str
    movedTo: NotRequired[str]  # absent: skipped


def excluded_occurrences(
    schedule: Occurrences, start: datetime, end: datetime, most: int = 50
) -> list[ExcludedView]:
    """The occurrences in [start, end] that a job's calendar skips or moves, for a preview:
    when each was scheduled, where it went (absent: skipped) and why; at most `most`."""
    calendar, recurrence = schedule.calendar, schedule.recurrence
    if calendar is None or recurrence is None:
        return []
    zone = zone_named(recurrence.time_zone) if recurrence.time_zone else UTC
    found: list[ExcludedView] = []
    for excluded in first_excluded(schedule, start, end + timedelta(microseconds=1), most):
        shown: ExcludedView = {
            "scheduled": iso(excluded.scheduled),
            "reason": why_excluded(calendar, wall_time(excluded.scheduled, zone).date()),
        }
        if excluded.moved_to is not None:
            shown["movedTo"] = iso(excluded.moved_to)
        found.append(shown)
    return found


# The walks below look at windows that double from this width: a schedule's occurrences on
# excluded days can be many (a minute job through a month of blackout: 43,200), and each costs
# tens of microseconds to place, so a walk stops once it has found what it may show.
_FIRST_WINDOW = timedelta(days=1)


def first_excluded(
    schedule: Occurrences, start: datetime, end: datetime, most: int
) -> list[ExcludedOccurrence]:
    """The first `most` occurrences on excluded days in [start, end)."""
    found: list[ExcludedOccurrence] = []
    lower, width = start, _FIRST_WINDOW
    while lower < end and len(found) < most:
        upper = min(end, lower + width)
        found += schedule.excluded_between(lower, upper)
        lower, width = upper, width * 2
    return found[:most]


def last_excluded(
    schedule: Occurrences, start: datetime, end: datetime, most: int
) -> list[ExcludedOccurrence]:
    """The last `most` occurrences on excluded days in [start, end), oldest first."""
    found: list[ExcludedOccurrence] = []
    upper, width = end, _FIRST_WINDOW
    while upper > start and len(found) < most:
        lower = max(start, upper - width)
        found = schedule.excluded_between(lower, upper) + found
        upper, width = lower, width * 2
    return found[-most:]
