"""A recurrence's calendar exclusions in words, the tail of schedules.words' sentence:
" except public holidays in Bayern, Germany, on 2026-12-24; moved to the next business
day (not Saturdays or Sundays)"."""

from __future__ import annotations

from shared.domain.schedule.days import DayOfWeek
from shared.domain.schedule.exclusions import (
    WEEKEND,
    BusinessCalendar,
    OnExcluded,
    place_name,
)
from shared.domain.schedule.recurrence import Recurrence

_MOVED_TO = {
    OnExcluded.NEXT_BUSINESS_DAY: "the next business day",
    OnExcluded.PREVIOUS_BUSINESS_DAY: "the previous business day",
}
_LISTED_DATES = 4  # more are counted, not listed


def describe_exclusions(recurrence: Recurrence) -> str:
    """The words to add after a schedule's sentence; empty when nothing is excluded."""
    exclusions = recurrence.exclusions
    on_excluded = recurrence.on_excluded or OnExcluded.SKIP
    if exclusions is None and on_excluded is OnExcluded.SKIP:
        return ""
    calendar = BusinessCalendar.of(exclusions, on_excluded)
    parts = []
    places = (
        [place_name(*holidays.key) for holidays in exclusions.holidays or ()] if exclusions else []
    )
    if places:
        parts.append("public holidays in " + _join(places))
    dates = [
        span.from_.isoformat() if span.from_ == span.to else f"{span.from_} to {span.to}"
        for span in (exclusions.dates or () if exclusions else ())
    ]
    if len(dates) > _LISTED_DATES:
        parts.append(f"on {len(dates)} blackout dates")
    elif dates:
        parts.append("on " + _join(dates))
    off = [day for day in DayOfWeek if day.weekday in calendar.weekdays_off]
    if off and (on_excluded is OnExcluded.SKIP or calendar.weekdays_off != WEEKEND):
        parts.append("on " + _join([f"{day.value.capitalize()}s" for day in off]))
    words = f" except {', '.join(parts)}" if parts else ""
    if on_excluded in _MOVED_TO:
        weekend = ", ".join(f"{day.value.capitalize()}s" for day in off) or "no weekday"
        words += f"; runs on excluded days move to {_MOVED_TO[on_excluded]} (days off: {weekend})"
    return words


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
