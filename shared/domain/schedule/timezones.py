"""Time zones for `recurrence.timeZone`: names in, and the step between wall time and instants.

Azure users know Windows zone names ("W. Europe Standard Time"); everyone else knows IANA names
("Europe/Berlin"). Windows names are mapped with the CLDR table that tzlocal maintains.
"""

from __future__ import annotations

import functools
import zoneinfo
from datetime import UTC, datetime, timedelta, tzinfo

from tzlocal.windows_tz import win_tz


class UnknownTimeZone(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"'{name[:64]}' is not a known time zone; use an IANA name such as 'Europe/Berlin' "
            "or a Windows name such as 'W. Europe Standard Time'"
        )


def zone_named(name: str) -> tzinfo:
    """The zone for an IANA or Windows name, in any case; UnknownTimeZone otherwise."""
    iana = _iana_names().get(name.strip().casefold())
    if iana is None:
        raise UnknownTimeZone(name)
    return UTC if iana == "UTC" else zoneinfo.ZoneInfo(iana)


@functools.cache
def _iana_names() -> dict[str, str]:
    names = {iana.casefold(): iana for iana in zoneinfo.available_timezones()}
    names.update({windows.casefold(): iana for windows, iana in win_tz.items()})
    names["utc"] = "UTC"
    return names


def iana_name(written: str | None) -> str | None:
    """The IANA name of a job's `recurrence.timeZone` (which a browser can format times in), or
    None for UTC, no zone, or a name not known (any more)."""
    if not written:
        return None
    iana = _iana_names().get(written.strip().casefold())
    return None if iana in (None, "UTC") else iana


def wall_time(instant: datetime, zone: tzinfo) -> datetime:
    """What a clock in `zone` shows at `instant`, as a naive datetime."""
    if zone is UTC:
        return instant.replace(tzinfo=None)
    return instant.astimezone(zone).replace(tzinfo=None)


def instant_at(wall: datetime, zone: tzinfo) -> datetime:
    """The UTC instant at which a clock in `zone` shows `wall`.

    A wall time that happens twice (clocks going back) is its first instant, so it runs once. A
    wall time that never happens (clocks going forward) is the first instant after it: the moment
    the clocks jump.
    """
    if zone is UTC:
        return wall.replace(tzinfo=UTC)
    earlier = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if wall_time(earlier, zone) == wall:
        return earlier
    # Inside a gap, fold=0 reads the wall with the offset from before the jump (landing after
    # it) and fold=1 with the offset from after it (landing before it); the jump lies between.
    before_jump = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    return _first_instant_showing(wall, zone, before_jump, earlier)


_SECOND = timedelta(seconds=1)


def _first_instant_showing(
    wall: datetime, zone: tzinfo, before: datetime, after: datetime
) -> datetime:
    """The first instant in (before, after] at which the clock shows `wall` or later."""
    low, high = before, after
    while (gap := (high - low) // _SECOND) > 1:
        middle = low + (gap // 2) * _SECOND
        if wall_time(middle, zone) >= wall:
            high = middle
        else:
            low = middle
    return high
