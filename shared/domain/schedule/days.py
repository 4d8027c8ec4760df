"""The days of the week, as the API spells them; shared by schedules and their exclusions."""

from __future__ import annotations

from shared.domain.wire import WireEnum


class DayOfWeek(WireEnum):
    """Days in ISO order, so that a member's position is Python's `weekday()`."""

    MONDAY = "monday"
    TUESDAY = "tuesday"
    WEDNESDAY = "wednesday"
    THURSDAY = "thursday"
    FRIDAY = "friday"
    SATURDAY = "saturday"
    SUNDAY = "sunday"

    @property
    def weekday(self) -> int:
        """The day as Python's `date.weekday()` numbers it: Monday 0, Sunday 6."""
        return _WEEKDAY[self]


_WEEKDAY = {day: position for position, day in enumerate(DayOfWeek)}
