"""With a calendar, the engine agrees with a naive reading: every scheduled occurrence kept,
skipped or moved day by day, over random schedules, countries, blackout dates and years."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import Recurrence
from tests.domain.schedule.test_occurrences_properties import DAYS, ZONES, moments
from tests.naive_schedule import NaiveJob, naive_series_with_calendar

PLACES = [
    {"country": "DE", "subdivision": "BY"},
    {"country": "DE"},
    {"country": "GB", "subdivision": "SCT"},
    {"country": "GB"},
    {"country": "US", "subdivision": "NY"},
    {"country": "US"},
    {"country": "FR"},
    {"country": "JP"},
    {"country": "AU", "subdivision": "NSW"},
    {"country": "BR"},
]
# Blackouts are at most ten days long, so no run moves further than this.
FURTHEST_MOVE = timedelta(days=25)
LOOKED_AHEAD = timedelta(days=45)


def some(values: st.SearchStrategy[Any], most: int) -> st.SearchStrategy[list[Any] | None]:
    return st.none() | st.lists(values, min_size=1, max_size=most, unique_by=repr)


@st.composite
def blackout(draw: st.DrawFn, around: date) -> str | dict[str, str]:
    first = around + timedelta(days=draw(st.integers(-25, 50)))
    length = draw(st.integers(0, 10))
    if length == 0:
        return first.isoformat()
    return {"from": first.isoformat(), "to": (first + timedelta(days=length)).isoformat()}


@st.composite
def recurrences_with_calendars(draw: st.DrawFn, around: date) -> dict[str, Any]:
    """A schedule with a calendar whose blackout dates lie near `around`, where they matter."""
    frequency = draw(st.sampled_from(["Day", "Week", "Month"]))
    schedule: dict[str, Any] = {
        "minutes": draw(some(st.integers(0, 59), 2)),
        "hours": draw(some(st.integers(0, 23) | st.integers(1, 3), 2)),
    }
    if frequency == "Week":
        schedule["weekDays"] = draw(some(st.sampled_from(DAYS), 3))
    if frequency == "Month":
        schedule["monthDays"] = draw(some(st.integers(1, 31) | st.integers(-31, -1), 3))
    exclusions = {
        "holidays": draw(some(st.sampled_from(PLACES), 2)),
        "dates": draw(some(blackout(around), 6)),
        "weekdays": draw(some(st.sampled_from(DAYS), 3)),
    }
    recurrence = {
        "frequency": frequency,
        "interval": draw(st.integers(1, 3)),
        "schedule": {name: value for name, value in schedule.items() if value is not None} or None,
        "timeZone": draw(st.sampled_from(ZONES)),
        "exclusions": {name: value for name, value in exclusions.items() if value is not None},
        "onExcluded": draw(st.sampled_from(["Skip", "NextBusinessDay", "PreviousBusinessDay"])),
    }
    return {name: value for name, value in recurrence.items() if value is not None}


# The naive walk is slow: fewer examples than the profile, each one a few months of runs.
@settings(max_examples=60, deadline=None)
@given(
    start=st.none() | moments,
    age=st.timedeltas(timedelta(0), timedelta(days=20)),
    asked=moments,
    data=st.data(),
)
def test_engine_matches_the_naive_reading_with_a_calendar(
    start: datetime | None, age: timedelta, asked: datetime, data: st.DataObject
) -> None:
    recurrence = data.draw(recurrences_with_calendars(asked.date()), label="recurrence")
    parsed = Recurrence.model_validate(recurrence)
    created = asked - age
    if start is not None and start > asked + timedelta(days=20):
        start = asked + timedelta(days=20)  # keep the series inside the window looked at
    engine = Occurrences(start_time=start, recurrence=parsed, created_at=created)
    naive = NaiveJob(start_time=start, recurrence=parsed, created_at=created)
    until = asked + LOOKED_AHEAD
    expected = naive_series_with_calendar(naive, until + FURTHEST_MOVE)
    trusted = [instant for instant in expected if instant <= until]

    if trusted:
        assert engine.first == trusted[0]
    found = engine.upcoming(8, after=asked)
    wanted = [instant for instant in trusted if instant > asked][:8]
    assert [instant for instant in found if instant <= until] == wanted
    # Every occurrence is where the naive reading puts one, and none twice.
    assert found == sorted(set(found))
    assert all(instant in expected for instant in found if instant <= until + FURTHEST_MOVE / 2)


def test_a_calendar_reads_codes_in_any_case_and_single_dates_as_one_day() -> None:
    """Country codes come back as the library spells them; a lone date is a range of one day."""
    parsed = Recurrence.model_validate(
        {
            "frequency": "Day",
            "exclusions": {
                "holidays": [PLACES[0]],
                "dates": ["2026-12-24"],
                "weekdays": ["sunday"],
            },
            "onExcluded": "NextBusinessDay",
        }
    )
    assert parsed.exclusions is not None and parsed.exclusions.holidays is not None
    assert parsed.exclusions.holidays[0].key == ("DE", "BY")
    assert [(span.from_, span.to) for span in parsed.exclusions.dates or ()] == [
        (date(2026, 12, 24), date(2026, 12, 24))
    ]
