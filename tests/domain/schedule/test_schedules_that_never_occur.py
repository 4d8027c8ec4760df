"""Schedules that select no day at all are known for what they are at once (issue 30, L3).

rrule stops only at a selected day: for a schedule with none it walked every month up to the
year 9999, about a second for each question (a preview, a save, each job of a console page).
The engine now looks through one cycle of the Gregorian calendar (400 years: every month length
and starting weekday the grid can meet) and knows the schedule is empty.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import DayOfWeek, Recurrence

CREATED = datetime(2026, 11, 27, 10, tzinfo=UTC)
FEBRUARY = datetime(2027, 2, 1, 9, tzinfo=UTC)
APRIL = datetime(2027, 4, 1, 9, tzinfo=UTC)
DAYS = [day.value for day in DayOfWeek]


def monthly(interval: int = 1, **schedule: Any) -> Recurrence:
    return Recurrence.model_validate({"frequency": "Month", "interval": interval, "schedule": schedule})


def first_monday(occurrence: int = 1, day: str = "Monday") -> list[dict[str, Any]]:
    return [{"day": day, "occurrence": occurrence}]


NEVER = [
    ("day-31-and-first-monday", FEBRUARY, monthly(monthDays=[31], monthlyOccurrences=first_monday())),
    ("day-1-and-last-friday", FEBRUARY, monthly(monthDays=[1], monthlyOccurrences=first_monday(-1, "Friday"))),
    ("day-8-and-first-weekdays", FEBRUARY, monthly(monthDays=[8, 9], monthlyOccurrences=[{"day": day, "occurrence": 1} for day in DAYS])),
    ("last-day-and-fifth-from-the-end", FEBRUARY, monthly(monthDays=[-1], monthlyOccurrences=first_monday(-5, "Sunday") + first_monday(-5, "Tuesday"))),
    ("february-30th", FEBRUARY, monthly(12, monthDays=[30])),
    ("february-the-31st-from-the-end", FEBRUARY, monthly(12, monthDays=[-30, -31])),
    ("april-31st", APRIL, monthly(12, monthDays=[31])),
]  # fmt: skip
RARE = [
    # Every fourth year, eight across 2100 (not a leap year).
    ("february-29th", FEBRUARY, monthly(12, monthDays=[29])),
    # The 31st falling on the last Friday: a few months a decade.
    ("day-31-and-last-friday-every-7-months", FEBRUARY, monthly(7, monthDays=[31], monthlyOccurrences=first_monday(-1, "Friday"))),
    # A fifth Monday in February: only when February 29th is a Monday, every 28 years at most.
    ("fifth-monday-of-february", FEBRUARY, monthly(12, monthlyOccurrences=first_monday(5))),
]  # fmt: skip


@pytest.mark.parametrize(("start", "recurrence"), [case[1:] for case in NEVER], ids=[case[0] for case in NEVER])
def test_a_schedule_that_selects_no_day_never_occurs_and_is_known_at_once(start: datetime, recurrence: Recurrence) -> None:
    occurrences = Occurrences(start, recurrence, CREATED)
    began = time.process_time()
    assert occurrences.never_match
    assert occurrences.first is None
    assert occurrences.next_after(datetime(2400, 1, 1, tzinfo=UTC)) is None
    assert occurrences.upcoming(10) == []
    assert occurrences.shortest_gap() is None
    # Each of these walked to the year 9999 (about a second of CPU each); now a few milliseconds.
    assert time.process_time() - began < 0.25


@pytest.mark.parametrize(("start", "recurrence"), [case[1:] for case in RARE], ids=[case[0] for case in RARE])
def test_a_schedule_that_selects_a_day_only_rarely_is_kept(start: datetime, recurrence: Recurrence) -> None:
    occurrences = Occurrences(start, recurrence, CREATED)
    assert not occurrences.never_match
    found = occurrences.upcoming(3)
    assert len(found) == 3
    assert all(found[0] < later for later in found[1:])


def test_february_29th_skips_2100() -> None:
    occurrences = Occurrences(datetime(2092, 2, 1, tzinfo=UTC), monthly(12, monthDays=[29]), datetime(2092, 1, 1, tzinfo=UTC))
    assert [moment.year for moment in occurrences.upcoming(3)] == [2092, 2096, 2104]


@st.composite
def month_schedules(draw: st.DrawFn) -> tuple[datetime, Recurrence]:
    schedule: dict[str, Any] = {}
    if draw(st.booleans()):
        schedule["monthDays"] = draw(st.lists(st.integers(1, 31) | st.integers(-31, -1), min_size=1, max_size=2))
    if draw(st.booleans()) or not schedule:
        schedule["monthlyOccurrences"] = draw(
            st.lists(st.builds(lambda day, nth: {"day": day, "occurrence": nth}, st.sampled_from(DAYS), st.integers(1, 5) | st.integers(-5, -1)), min_size=1, max_size=2)
        )
    start = draw(st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)))
    return start.replace(microsecond=0), monthly(draw(st.integers(1, 18)), **schedule)


@given(month_schedules())
def test_never_match_agrees_with_the_first_four_centuries_of_the_grid(case: tuple[datetime, Recurrence]) -> None:
    """Whatever it says, the search agrees: an empty schedule has no first occurrence, and one
    that is not empty has one within the 400 years after which the calendar repeats."""
    start, recurrence = case
    occurrences = Occurrences(start, recurrence, start)
    first = occurrences.first
    if occurrences.never_match:
        assert first is None
    else:
        assert first is not None and first.year < start.year + 400 * recurrence.interval
