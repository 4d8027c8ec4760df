"""The engine agrees with a naive minute-by-minute reading of the spec, over random schedules."""

from __future__ import annotations

import functools
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import DayOfWeek, Frequency, Recurrence
from tests.naive_schedule import NaiveJob

ZONES = [None, "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Sao_Paulo"]
DAYS = [day.value for day in DayOfWeek]
LARGEST_INTERVAL = {"Minute": 200, "Hour": 60, "Day": 12, "Week": 6, "Month": 18, "Year": 1}


def horizon_for(recurrence: Recurrence) -> timedelta:
    """How far the naive walk must look to be sure there is no further occurrence.

    A minute or hour grid on the wall clock repeats its pattern of times of day within
    `interval` days; calendar rules repeat within a few years (a Feb 29, a fifth Friday in one
    month of an 18-month grid).
    """
    if recurrence.frequency in (Frequency.MINUTE, Frequency.HOUR):
        return timedelta(days=recurrence.interval + 2)
    return timedelta(days=6 * 366)

@functools.cache
def clock_changes(zone: str | None) -> list[datetime]:
    """The instants at which `zone`'s clocks change between 2019 and 2031, found by scanning."""
    if zone is None:
        return []
    tz, found = ZoneInfo(zone), []
    moment = datetime(2019, 1, 1, tzinfo=UTC)
    offset = moment.astimezone(tz).utcoffset()
    while moment < datetime(2031, 1, 1, tzinfo=UTC):
        moment += timedelta(minutes=30)
        if (new_offset := moment.astimezone(tz).utcoffset()) != offset:
            found.append(moment)
            offset = new_offset
    return found


def instants_to_ask(zone: str | None) -> st.SearchStrategy[datetime]:
    """Any moment, or, half of the time in zones that change their clocks, close to a change."""
    changes = clock_changes(zone)
    if not changes:
        return moments
    shortly_before = st.timedeltas(-timedelta(hours=3), timedelta(minutes=10))
    a_day_around = st.timedeltas(-timedelta(hours=30), timedelta(hours=6))
    near_a_change = st.builds(
        lambda change, shift: change + shift - shift % timedelta(seconds=1),
        st.sampled_from(changes),
        shortly_before | a_day_around,
    )
    return moments | near_a_change


moments = st.datetimes(
    min_value=datetime(2019, 1, 1), max_value=datetime(2031, 1, 1), timezones=st.just(UTC)
).map(lambda moment: moment.replace(microsecond=0))


def some(values: st.SearchStrategy[Any], most: int) -> st.SearchStrategy[list[Any] | None]:
    return st.none() | st.lists(values, min_size=1, max_size=most, unique_by=repr)


@st.composite
def recurrences(draw: st.DrawFn) -> dict[str, Any]:
    frequency = draw(st.sampled_from(list(LARGEST_INTERVAL)))
    schedule: dict[str, Any] = {
        "minutes": draw(some(st.integers(0, 59), 4)),
        # Hours 1..3 more often than their share: that is where clocks change.
        "hours": draw(some(st.integers(0, 23) | st.integers(1, 3), 3)),
    }
    if frequency == "Week":
        schedule["weekDays"] = draw(some(st.sampled_from(DAYS), 3))
    if frequency == "Month":
        schedule["monthDays"] = draw(some(st.integers(1, 31) | st.integers(-31, -1), 3))
        schedule["monthlyOccurrences"] = draw(
            some(
                st.fixed_dictionaries(
                    {"day": st.sampled_from(DAYS)},
                    optional={"occurrence": st.integers(1, 5) | st.integers(-5, -1)},
                ),
                2,
            )
        )
    recurrence: dict[str, Any] = {
        "frequency": frequency,
        # Small intervals more often: they are the grids that land inside a clock change.
        "interval": draw(st.integers(1, 2) | st.integers(1, LARGEST_INTERVAL[frequency])),
        "schedule": {name: value for name, value in schedule.items() if value is not None} or None,
        "timeZone": draw(st.sampled_from(ZONES)),
    }
    return {name: value for name, value in recurrence.items() if value is not None}


@given(
    recurrence=recurrences(),
    start=st.none() | moments,
    age=st.timedeltas(timedelta(0), timedelta(days=3 * 366)),
    data=st.data(),
)
def test_engine_matches_the_naive_reading(
    recurrence: dict[str, Any], start: datetime | None, age: timedelta, data: st.DataObject
) -> None:
    parsed = Recurrence.model_validate(recurrence)
    asked = data.draw(instants_to_ask(parsed.time_zone), label="asked")
    created = asked - age - age % timedelta(seconds=1)
    engine = Occurrences(start_time=start, recurrence=parsed, created_at=created)
    naive = NaiveJob(start_time=start, recurrence=parsed, created_at=created)

    def horizon_from(instant: datetime) -> datetime:
        return max(instant, created, start or created) + horizon_for(parsed)
    horizon = horizon_from(asked)

    expected_first = naive.first(horizon)
    assert _within(engine.first, horizon) == expected_first

    # A few steps along the series from an arbitrary instant.
    instant, steps = asked, 0
    while steps < 6:
        horizon = horizon_from(instant)
        expected = naive.next_after(instant, horizon)
        assert _within(engine.next_after(instant), horizon) == expected, f"after {instant.isoformat()}"
        if expected is None:
            break
        instant, steps = expected, steps + 1


def _within(found: datetime | None, horizon: datetime) -> datetime | None:
    """The naive walk stops at the horizon: an occurrence beyond it counts as not found."""
    return found if found is not None and found <= horizon else None


@given(recurrence=recurrences(), start=moments, created=moments, count=st.integers(1, 6))
def test_a_preview_is_the_chain_of_next_occurrences_and_respects_count(
    recurrence: dict[str, Any], start: datetime, created: datetime, count: int
) -> None:
    engine = Occurrences(
        start_time=start,
        recurrence=Recurrence.model_validate({**recurrence, "count": count}),
        created_at=created,
    )
    preview = engine.upcoming(10)
    assert len(preview) <= count
    assert preview == sorted(set(preview))
    if preview:
        assert preview[0] == engine.first
        assert preview[0] >= max(start, created)
    for earlier, later in itertools.pairwise(preview):
        assert engine.next_after(earlier) == later
