"""The date functions of ARM templates that compute: `dateTimeAdd`, `dateTimeFromEpoch`,
`dateTimeToEpoch`. (`utcNow` reads the clock, which an import must not: its value is supplied,
as `reference()`'s is.) Times are written as ARM writes them, ISO 8601 with 'Z' for UTC, or in
a .NET date format given as an argument."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import isodate

from shared.domain.templates.expressions import ExpressionError, Scope
from shared.domain.templates.functions_common import arguments, int64, text, whole

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# ARM counts a year of a duration as 365 days and a month as 30, whatever the calendar says.
_DAYS_IN_YEAR, _DAYS_IN_MONTH = 365, 30
# .NET's standard date formats that a template may name by one letter.
_STANDARD = {
    "u": "yyyy'-'MM'-'dd HH':'mm':'ss'Z'",
    "s": "yyyy'-'MM'-'dd'T'HH':'mm':'ss",
    "o": "yyyy'-'MM'-'dd'T'HH':'mm':'ss'.'fffffffK",
    "O": "yyyy'-'MM'-'dd'T'HH':'mm':'ss'.'fffffffK",
    "d": "MM/dd/yyyy",
    "D": "dddd, dd MMMM yyyy",
    "t": "HH:mm",
    "T": "HH:mm:ss",
    "g": "MM/dd/yyyy HH:mm",
    "G": "MM/dd/yyyy HH:mm:ss",
    "R": "ddd, dd MMM yyyy HH':'mm':'ss 'GMT'",
    "r": "ddd, dd MMM yyyy HH':'mm':'ss 'GMT'",
}
_SPECIFIERS = re.compile(
    r"'[^']*'|\"[^\"]*\"|\\.|%|yyyy|yy|y|MMMM|MMM|MM|M|dddd|ddd|dd|d|HH|H|hh|h|mm|m|ss|s"
    r"|f{1,7}|F{1,7}|tt|t|K|zzz|zz|z|.",
    re.DOTALL,
)
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _moment(name: str, value: Any) -> dt.datetime:
    written = text(name, value).strip()
    try:
        moment = dt.datetime.fromisoformat(written)
    except ValueError:
        raise ExpressionError(
            f"{name}() needs an ISO 8601 date and time such as '2024-01-31T08:00:00Z', "
            f"not '{written[:40]}'"
        ) from None
    return moment.astimezone(dt.UTC) if moment.tzinfo else moment


def _duration(value: str) -> dt.timedelta:
    try:
        parsed = isodate.parse_duration(value.strip())
    except (isodate.ISO8601Error, ValueError, TypeError, OverflowError):
        raise ExpressionError(
            f"dateTimeAdd() needs an ISO 8601 duration such as 'P1D' or '-PT2H', not '{value[:40]}'"
        ) from None
    if isinstance(parsed, dt.timedelta):
        return parsed
    days = Decimal(parsed.years) * _DAYS_IN_YEAR + Decimal(parsed.months) * _DAYS_IN_MONTH
    if abs(days) > 4_000_000:
        raise ExpressionError("dateTimeAdd() is given a duration past the years a date can have")
    moved: dt.timedelta = dt.timedelta(days=float(days)) + parsed.tdelta
    return moved


def date_time_add(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("dateTimeAdd", given, 2, 3)
    base = _moment("dateTimeAdd", given[0])
    try:
        moved = base + _duration(text("dateTimeAdd", given[1]))
    except OverflowError:
        raise ExpressionError("dateTimeAdd() gives a date before year 1 or after 9999") from None
    if len(given) == 3:
        return _formatted(moved, text("dateTimeAdd", given[2]))
    return _iso(moved)


def date_time_from_epoch(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("dateTimeFromEpoch", given, 1)
    seconds = whole("dateTimeFromEpoch", given[0])
    try:
        return _iso(_EPOCH + dt.timedelta(seconds=seconds))
    except OverflowError:
        raise ExpressionError(
            "dateTimeFromEpoch() gives a date before year 1 or after 9999"
        ) from None


def date_time_to_epoch(_scope: Scope, given: Sequence[Any]) -> int:
    arguments("dateTimeToEpoch", given, 1)
    moment = _moment("dateTimeToEpoch", given[0])
    aware = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    return int64("dateTimeToEpoch", (aware - _EPOCH) // dt.timedelta(seconds=1))


def _iso(moment: dt.datetime) -> str:
    """As Json.NET writes a date: seconds, then a fraction only when there is one."""
    written = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if moment.microsecond:
        written += "." + f"{moment.microsecond:06d}".rstrip("0")
    return written + ("Z" if moment.tzinfo else "")


def _formatted(moment: dt.datetime, pattern: str) -> str:
    """A .NET date format: a standard one by its letter, or a custom one ('yyyyMMddHHmm')."""
    if len(pattern) == 1:
        if pattern not in _STANDARD:
            raise ExpressionError(f"dateTimeAdd() does not know the date format '{pattern}'")
        pattern = _STANDARD[pattern]
    if len(pattern) > 200:
        raise ExpressionError("dateTimeAdd() takes a date format of at most 200 characters")
    return "".join(_specifier(moment, each) for each in _SPECIFIERS.findall(pattern))


def _specifier(moment: dt.datetime, each: str) -> str:
    if each[0] in "'\"":
        return each[1:-1]
    if each[0] == "\\":
        return each[1:]
    letter, width = each[0], len(each)
    numbers = {"y": moment.year, "M": moment.month, "d": moment.day, "H": moment.hour,
               "h": moment.hour % 12 or 12, "m": moment.minute, "s": moment.second}  # fmt: skip
    if letter == "y":
        year = moment.year % 100 if width < 3 else moment.year
        return f"{year:0{min(width, 4) if width > 1 else 1}d}"
    if letter == "M" and width >= 3:
        return _MONTHS[moment.month - 1][: None if width == 4 else 3]
    if letter == "d" and width >= 3:
        return _DAYS[moment.weekday()][: None if width == 4 else 3]
    if letter in numbers:
        return f"{numbers[letter]:0{width}d}"
    if letter in "fF":
        fraction = f"{moment.microsecond:06d}0"[:width]
        return fraction.rstrip("0") if letter == "F" else fraction
    if letter == "t":
        return ("AM" if moment.hour < 12 else "PM")[:width]
    if letter in "Kz":
        return "Z" if letter == "K" and moment.tzinfo else ("+00:00" if letter == "z" else "")
    return "" if each == "%" else each
