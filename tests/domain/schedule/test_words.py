"""A job's schedule in plain English: the exact sentence for each kind of definition, and that any
definition the API accepts gets one.

Unless a case says otherwise the job starts on Tuesday 2026-12-01 at 02:30:00 UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.schedule.recurrence import MAX_INTERVAL, DayOfWeek, Frequency
from shared.domain.schedule.words import FALLBACK, describe_schedule

START = "2026-12-01T02:30:00Z"  # a Tuesday
MON_WED_FRI = ["monday", "wednesday", "friday"]
WORKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"]


def job(recurrence: dict[str, Any] | None = None, *, start: str | None = START) -> dict[str, Any]:
    """A stored definition with this startTime and recurrence (either may be absent)."""
    definition: dict[str, Any] = {
        "action": {"type": "Http", "request": {"uri": "https://example.com", "method": "GET"}},
        "state": "enabled",
    }
    if start is not None:
        definition["startTime"] = start
    if recurrence is not None:
        definition["recurrence"] = recurrence
    return definition


SENTENCES = [
    # --- no recurrence: one run --------------------------------------------------------------
    pytest.param(job(), "Once, at 2026-12-01 02:30:00 UTC", id="once-at_start"),
    pytest.param(job(start=None), "Once, as soon as it is saved", id="once-without_start"),
    pytest.param(
        job(start="2026-12-01T03:30:00+01:00"),
        "Once, at 2026-12-01 02:30:00 UTC",
        id="once-start_with_an_offset_said_in_utc",
    ),
    # --- frequency and interval, no schedule: the grid anchored at startTime -----------------
    pytest.param(
        job({"frequency": "minute"}), "Every minute, from 2026-12-01 02:30:00 UTC", id="minute"
    ),
    pytest.param(
        job({"frequency": "minute", "interval": 5}),
        "Every 5 minutes, from 2026-12-01 02:30:00 UTC",
        id="minute-interval",
    ),
    pytest.param(job({"frequency": "hour"}), "Every hour, from 2026-12-01 02:30:00 UTC", id="hour"),
    pytest.param(
        job({"frequency": "hour", "interval": 2}),
        "Every 2 hours, from 2026-12-01 02:30:00 UTC",
        id="hour-interval",
    ),
    pytest.param(job({"frequency": "day"}), "Every day at 02:30 UTC, from 2026-12-01", id="day"),
    pytest.param(
        job({"frequency": "day", "interval": 2}),
        "Every 2 days at 02:30 UTC, from 2026-12-01",
        id="day-interval",
    ),
    pytest.param(
        job({"frequency": "week"}),
        "Tuesdays at 02:30 UTC, from 2026-12-01",
        id="week-on_the_start_weekday",
    ),
    pytest.param(
        job({"frequency": "week", "interval": 2}),
        "Tuesdays of every 2nd week at 02:30 UTC, from 2026-12-01",
        id="week-interval",
    ),
    pytest.param(
        job({"frequency": "month"}),
        "On the 1st of every month at 02:30 UTC, from 2026-12-01",
        id="month-on_the_start_day",
    ),
    pytest.param(
        job({"frequency": "month", "interval": 3}),
        "On the 1st of every 3rd month at 02:30 UTC, from 2026-12-01",
        id="month-interval",
    ),
    pytest.param(
        job({"frequency": "year"}),
        "Every year on 1 December at 02:30 UTC, from 2026-12-01",
        id="year-on_the_start_date",
    ),
    pytest.param(
        job({"Frequency": "WEEK", "Interval": 1}),
        "Tuesdays at 02:30 UTC, from 2026-12-01",
        id="names_and_values_in_any_case",
    ),
    # --- no startTime: the anchor is the save moment -----------------------------------------
    pytest.param(
        job({"frequency": "hour", "interval": 2}, start=None),
        "Every 2 hours, from when it was saved",
        id="no_start-hour-interval",
    ),
    pytest.param(
        job({"frequency": "day"}, start=None),
        "Every day, from when it was saved",
        id="no_start-day",
    ),
    pytest.param(
        job({"frequency": "week", "interval": 2}, start=None),
        "Every 2 weeks, from when it was saved",
        id="no_start-week-interval",
    ),
    pytest.param(
        job({"frequency": "week", "schedule": {"weekDays": ["sunday"]}}, start=None),
        "Sundays at the time of day it was saved, after a first run when it was saved",
        id="no_start-schedule-time_of_day_from_saving",
    ),
    pytest.param(
        job({"frequency": "day", "schedule": {"hours": [5, 17]}}, start=None),
        "Every day at 05:mm and 17:mm UTC (mm: the minute it was saved), after a first run when it was saved",
        id="no_start-hours_without_minutes",
    ),
    # --- schedules ----------------------------------------------------------------------------
    pytest.param(
        job(
            {
                "frequency": "week",
                "interval": 1,
                "schedule": {"weekDays": MON_WED_FRI, "hours": [10, 22], "minutes": [0]},
            }
        ),
        "Mondays, Wednesdays and Fridays at 10:00 and 22:00 UTC",
        id="issue_example-mon_wed_fri_at_10_and_22",
    ),
    pytest.param(
        job(
            {
                "frequency": "week",
                "interval": 2,
                "schedule": {"weekDays": MON_WED_FRI, "hours": [10, 22], "minutes": [0]},
            }
        ),
        "Mondays, Wednesdays and Fridays of every 2nd week at 10:00 and 22:00 UTC, from 2026-12-01",
        id="weekdays-interval_counts_weeks_from_start",
    ),
    pytest.param(
        job(
            {
                "frequency": "week",
                "schedule": {
                    "weekDays": ["Friday", "MONDAY", "tuesday", "thursday", "wednesday"],
                    "hours": [17],
                },
            }
        ),
        "Mondays to Fridays at 17:30 UTC",
        id="weekdays-a_run_of_days_as_a_range",
    ),
    pytest.param(
        job(
            {
                "frequency": "week",
                "schedule": {
                    "weekDays": [day.value for day in DayOfWeek],
                    "hours": [6],
                    "minutes": [0],
                },
            }
        ),
        "Every day at 06:00 UTC",
        id="weekdays-all_seven",
    ),
    pytest.param(
        job({"frequency": "hour", "schedule": {"minutes": [0, 15, 30, 45]}}),
        "Every hour at :00, :15, :30 and :45",
        id="minutes_only-hourly",
    ),
    pytest.param(
        job({"frequency": "minute", "schedule": {"minutes": [45, 0, 15, 30]}}),
        "Every hour at :00, :15, :30 and :45",
        id="minutes_only-minute_grid_is_the_same_hourly",
    ),
    pytest.param(
        job({"frequency": "minute", "interval": 5, "schedule": {"minutes": [0, 30]}}),
        "Every 5 minutes, only those at :00 or :30 past the hour, from 2026-12-01 02:30:00 UTC",
        id="minutes_filter_a_longer_minute_grid",
    ),
    pytest.param(
        job({"frequency": "minute", "schedule": {"hours": [5, 17]}}),
        "Every minute during hours 05 and 17 UTC",
        id="hours_filter_a_minute_grid",
    ),
    pytest.param(
        job({"frequency": "hour", "interval": 3, "schedule": {"hours": [5, 17]}}),
        "Every 3 hours at :30 during hours 05 and 17 UTC, from 2026-12-01 02:30:00 UTC",
        id="hours_filter_a_longer_hour_grid-minute_from_start",
    ),
    pytest.param(
        job({"frequency": "day", "schedule": {"hours": [5, 17]}}),
        "Every day at 05:30 and 17:30 UTC",
        id="hours_without_minutes-minute_from_start",
    ),
    pytest.param(
        job({"frequency": "hour", "schedule": {"hours": [5, 17]}}),
        "Every day at 05:30 and 17:30 UTC",
        id="hours_on_an_hour_grid_are_hours_of_every_day",
    ),
    pytest.param(
        job({"frequency": "day", "schedule": {"minutes": [15, 45], "hours": [5, 17]}}),
        "Every day at 05:15, 05:45, 17:15 and 17:45 UTC",
        id="every_hour_with_every_minute",
    ),
    pytest.param(
        job({"frequency": "day", "schedule": {"hours": [10]}}, start="2026-12-01T02:30:19Z"),
        "Every day at 10:30:19 UTC",
        id="start_with_seconds-times_with_seconds",
    ),
    pytest.param(
        job({"frequency": "hour", "schedule": {"minutes": [0, 30]}}, start="2026-12-01T02:30:19Z"),
        "Every hour at :00:19 and :30:19",
        id="start_with_seconds-minutes_with_seconds",
    ),
    pytest.param(
        job(
            {"frequency": "month", "schedule": {"monthDays": [15, 1], "hours": [9], "minutes": [0]}}
        ),
        "On the 1st and 15th of every month at 09:00 UTC",
        id="month_days",
    ),
    pytest.param(
        job({"frequency": "month", "schedule": {"monthDays": [-1], "hours": [6], "minutes": [0]}}),
        "On the last day of every month at 06:00 UTC",
        id="month_days-last",
    ),
    pytest.param(
        job(
            {
                "frequency": "month",
                "schedule": {"monthDays": [-1, 1, -2], "hours": [6], "minutes": [0]},
            }
        ),
        "On the 1st, the second-to-last day and the last day of every month at 06:00 UTC",
        id="month_days-counted_from_both_ends",
    ),
    pytest.param(
        job(
            {
                "frequency": "month",
                "interval": 2,
                "schedule": {"monthDays": [1, 2, 3, 4, 5, 6, 7, 21, 22, 31]},
            }
        ),
        "On the 1st to 7th, 21st, 22nd and 31st of every 2nd month at 02:30 UTC, from 2026-12-01",
        id="month_days-runs_as_ranges-interval",
    ),
    pytest.param(
        job(
            {
                "frequency": "month",
                "schedule": {
                    "monthlyOccurrences": [{"day": "friday", "occurrence": 1}],
                    "hours": [8],
                    "minutes": [0],
                },
            }
        ),
        "On the first Friday of every month at 08:00 UTC",
        id="monthly_occurrence-first",
    ),
    pytest.param(
        job(
            {
                "frequency": "month",
                "schedule": {
                    "monthlyOccurrences": [{"day": "Friday", "Occurrence": -1}],
                    "hours": [8],
                    "minutes": [0],
                },
            }
        ),
        "On the last Friday of every month at 08:00 UTC",
        id="monthly_occurrence-last",
    ),
    pytest.param(
        job(
            {
                "frequency": "month",
                "schedule": {
                    "monthlyOccurrences": [{"day": "friday", "occurrence": -3}],
                    "hours": [8],
                    "minutes": [0],
                },
            }
        ),
        "On the third-to-last Friday of every month at 08:00 UTC",
        id="monthly_occurrence-third_from_the_end",
    ),
    pytest.param(
        job(
            {
                "frequency": "month",
                "schedule": {
                    "monthlyOccurrences": [{"day": "friday"}],
                    "hours": [8],
                    "minutes": [0],
                },
            }
        ),
        "On every Friday of every month at 08:00 UTC",
        id="monthly_occurrence-every",
    ),
    pytest.param(
        job(
            {
                "frequency": "month",
                "schedule": {
                    "minutes": [15],
                    "hours": [5],
                    "monthlyOccurrences": [
                        {"day": "friday", "occurrence": -1},
                        {"day": "friday", "occurrence": 1},
                    ],
                },
            }
        ),
        "On the first Friday and the last Friday of every month at 05:15 UTC",
        id="monthly_occurrences-first_and_last_in_month_order",
    ),
    pytest.param(
        job(
            {
                "frequency": "month",
                "schedule": {"monthDays": [13], "monthlyOccurrences": [{"day": "friday"}]},
            }
        ),
        "On the 13th of every month (when it is a Friday) at 02:30 UTC",
        id="month_days_and_weekdays-days_in_both",
    ),
    # --- many times a day: summarised -----------------------------------------------------------
    pytest.param(
        job(
            {
                "frequency": "week",
                "schedule": {
                    "minutes": [0, 15, 30, 45],
                    "hours": list(range(9, 17)),
                    "weekDays": WORKDAYS,
                },
            }
        ),
        "Mondays to Fridays, every 15 minutes between 09:00 and 16:45 UTC",
        id="many_times-evenly_spaced",
    ),
    pytest.param(
        job({"frequency": "day", "schedule": {"minutes": [0]}}),
        "Every day, every hour between 00:00 and 23:00 UTC",
        id="many_times-minutes_without_hours_is_every_hour",
    ),
    pytest.param(
        job({"frequency": "day", "schedule": {"minutes": [0, 7], "hours": list(range(0, 24, 2))}}),
        "Every day, 24 times between 00:00 and 22:07 UTC",
        id="many_times-unevenly_spaced",
    ),
    pytest.param(
        job({"frequency": "hour", "schedule": {"minutes": list(range(0, 60, 5))}}),
        "Every hour, every 5 minutes between :00 and :55",
        id="many_minutes_an_hour",
    ),
    # --- count, endTime, timeZone -----------------------------------------------------------------
    pytest.param(
        job({"frequency": "day", "count": 1}),
        "Every day at 02:30 UTC, from 2026-12-01, once",
        id="count-1",
    ),
    pytest.param(
        job({"frequency": "day", "count": 10}),
        "Every day at 02:30 UTC, from 2026-12-01, 10 times",
        id="count-10",
    ),
    pytest.param(
        job({"frequency": "day", "endTime": "2027-06-01"}),
        "Every day at 02:30 UTC, from 2026-12-01, until 2027-06-01 00:00:00 UTC",
        id="end_time",
    ),
    pytest.param(
        job(
            {
                "frequency": "week",
                "schedule": {"weekDays": MON_WED_FRI, "hours": [10, 22], "minutes": [0]},
                "count": 10,
                "endTime": "2027-06-01T00:00:00Z",
                "timeZone": "W. Europe Standard Time",
            }
        ),
        "Mondays, Wednesdays and Fridays at 10:00 and 22:00 W. Europe Standard Time, 10 times, until 2027-06-01 00:00:00 UTC",
        id="time_zone-count-end_time",
    ),
    pytest.param(
        job({"frequency": "day", "timeZone": "Europe/Berlin"}, start="2026-11-30T23:30:00Z"),
        "Every day at 00:30 Europe/Berlin, from 2026-12-01",
        id="time_zone-time_and_date_from_the_zone_clock",
    ),
    pytest.param(
        job({"frequency": "hour", "schedule": {"minutes": [0]}, "timeZone": "Asia/Kolkata"}),
        "Every hour at :00 Asia/Kolkata",
        id="time_zone-named_for_minutes_past_the_hour",
    ),
    # --- unreadable (never stored, but the console must not break) -----------------------------
    pytest.param(job({"frequency": "fortnightly"}), FALLBACK, id="unreadable-frequency"),
    pytest.param({"recurrence": "daily"}, FALLBACK, id="unreadable-recurrence"),
    pytest.param({"startTime": "soon"}, FALLBACK, id="unreadable-start_time"),
]


@pytest.mark.parametrize(("definition", "sentence"), SENTENCES)
def test_describes_the_schedule_in_words(definition: dict[str, Any], sentence: str) -> None:
    assert describe_schedule(definition) == sentence


# --- any definition the API accepts has a sentence ----------------------------------------------

DAYS = [day.value for day in DayOfWeek]
ZONES = ["Europe/Berlin", "W. Europe Standard Time", "Asia/Kolkata", "Pacific/Kiritimati", "utc"]


def some(values: st.SearchStrategy[Any], most: int) -> st.SearchStrategy[list[Any] | None]:
    return st.none() | st.lists(values, max_size=most)


def any_case(word: str) -> st.SearchStrategy[str]:
    return st.sampled_from([word, word.upper(), word.capitalize()])


@st.composite
def recurrences(draw: st.DrawFn) -> dict[str, Any]:
    """Recurrences within the model's ranges, each schedule list with any frequency."""
    frequency = draw(st.sampled_from(list(Frequency)))
    schedule = {
        "minutes": draw(some(st.integers(0, 59), 61)),
        "hours": draw(some(st.integers(0, 23), 25)),
        "weekDays": draw(some(st.sampled_from(DAYS).flatmap(any_case), 7)),
        "monthDays": draw(some(st.integers(-31, 31).filter(bool), 40)),
        "monthlyOccurrences": draw(
            some(
                st.fixed_dictionaries(
                    {"day": st.sampled_from(DAYS).flatmap(any_case)},
                    optional={"occurrence": st.integers(-5, 5).filter(bool)},
                ),
                6,
            )
        ),
    }
    recurrence = {
        "frequency": draw(any_case(frequency.value)),
        "interval": draw(st.none() | st.integers(1, MAX_INTERVAL[frequency])),
        "schedule": draw(
            st.none()
            | st.just({name: value for name, value in schedule.items() if value is not None})
        ),
        "count": draw(st.none() | st.integers(1, 10_000)),
        "endTime": draw(st.none() | instants.map(lambda moment: moment.isoformat())),
        "timeZone": draw(st.none() | st.sampled_from(ZONES)),
    }
    return {name: value for name, value in recurrence.items() if value is not None}


instants = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
# The API refuses a startTime before 1900 or more than 18 months ahead.
start_times = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(recurrence=st.none() | recurrences(), start=st.none() | start_times)
def test_every_accepted_definition_has_a_sentence(
    recurrence: dict[str, Any] | None, start: datetime | None
) -> None:
    sentence = describe_schedule(job(recurrence, start=start.isoformat() if start else None))
    assert isinstance(sentence, str)
    assert sentence
    assert sentence != FALLBACK


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


@given(
    definition=st.dictionaries(
        st.sampled_from(["startTime", "recurrence", "STARTTIME", "state"]),
        json_values | recurrences(),
    )
)
def test_any_json_gets_a_sentence_or_the_fallback(definition: dict[str, Any]) -> None:
    assert describe_schedule(definition)
