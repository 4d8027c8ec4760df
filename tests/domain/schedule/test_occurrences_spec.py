"""The recurrence rules of docs/behaviour.md, table by table: the startTime rules, every schedule example, the seed's examples.

Expected times are written out by hand from the spec's words, never computed. Unless a case says
otherwise, the job starts on Monday 2026-06-01 at 09:00 UTC and is defined at that moment.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.factories import iso, occurrences, utc

MONDAY_9AM = "2026-06-01T09:00"
MON_WED_FRI = ["monday", "wednesday", "friday"]
WORKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"]


# --- startTime: the nine cells of the table -------------------------------------------------

START_TIME_TABLE = [
    pytest.param(
        None, None, "2026-06-01T10:17:42", ["2026-06-01T10:17:42"],
        id="absent-no_recurrence-runs_once_immediately",
    ),
    pytest.param(
        "2026-05-01T08:00", None, "2026-06-01T10:17", ["2026-06-01T10:17"],
        id="past-no_recurrence-runs_once_immediately",
    ),
    pytest.param(
        "2026-06-02T08:00", None, "2026-06-01T10:17", ["2026-06-02T08:00"],
        id="future-no_recurrence-runs_once_at_start",
    ),
    pytest.param(
        None, {"frequency": "hour"}, "2026-06-01T10:17:42",
        ["2026-06-01T10:17:42", "2026-06-01T11:17:42", "2026-06-01T12:17:42"],
        id="absent-recurrence-immediately_then_every_interval_from_that_run",
    ),
    pytest.param(
        "2015-04-07T14:00", {"frequency": "day", "interval": 2}, "2015-04-08T13:00",
        ["2015-04-09T14:00", "2015-04-11T14:00", "2015-04-13T14:00", "2015-04-15T14:00"],
        id="past-recurrence-first_grid_point_after_now",
    ),
    pytest.param(
        "2026-06-02T08:00", {"frequency": "day", "interval": 3}, "2026-06-01T10:17",
        ["2026-06-02T08:00", "2026-06-05T08:00", "2026-06-08T08:00"],
        id="future-recurrence-at_start_then_the_grid",
    ),
    pytest.param(
        None, {"frequency": "day", "schedule": {"hours": [5]}}, "2026-06-01T09:10:11",
        ["2026-06-01T09:10:11", "2026-06-02T05:10:11", "2026-06-03T05:10:11"],
        id="absent-schedule-immediately_then_schedule_minute_and_second_from_creation",
    ),
    pytest.param(
        "2026-05-01T08:20",
        {"frequency": "week", "interval": 2, "schedule": {"weekDays": ["monday"], "hours": [9]}},
        "2026-06-01T00:00",
        # Fortnights counted from the week of Mon 27 Apr: 11 May, 25 May (past), 8 Jun, 22 Jun.
        ["2026-06-08T09:20", "2026-06-22T09:20"],
        id="past-schedule-first_point_after_now_on_the_grid_from_start",
    ),
    pytest.param(
        "2026-06-03T12:00",
        {"frequency": "week", "schedule": {"weekDays": ["monday", "wednesday"], "hours": [9, 15]}},
        "2026-06-01T00:00",
        ["2026-06-03T15:00", "2026-06-08T09:00", "2026-06-08T15:00"],
        id="future-schedule-no_sooner_than_start",
    ),
]


@pytest.mark.parametrize(("start", "recurrence", "created", "expected"), START_TIME_TABLE)
def test_start_time_table(
    start: str | None, recurrence: dict[str, Any] | None, created: str, expected: list[str]
) -> None:
    series = occurrences(recurrence, start=start, created=created)
    assert iso(series.upcoming(len(expected))) == expected
    if recurrence is None:
        assert len(series.upcoming(5)) == 1


@pytest.mark.parametrize(
    "start", ["2015-04-07T14:00", "2015-04-05T14:00", "2015-04-01T14:00"], ids=lambda s: s[:10]
)
def test_worked_example_first_run_does_not_depend_on_how_far_back_start_is(start: str) -> None:
    series = occurrences({"frequency": "Day", "interval": 2}, start=start, created="2015-04-08T13:00")
    assert iso([series.first]) == ["2015-04-09T14:00"]


def test_past_grid_points_are_discarded_not_run() -> None:
    series = occurrences({"frequency": "minute"}, start="2026-06-01T00:00", created="2026-06-01T09:30:30")
    assert iso(series.upcoming(2)) == ["2026-06-01T09:31", "2026-06-01T09:32"]


# A client's "now plus five minutes" carries a fraction of a second; the grid counts whole ones.
WITH_A_FRACTION = "2026-06-02T08:00:00.25"


@pytest.mark.parametrize(("recurrence", "then"), [
    ({"frequency": "day"}, "2026-06-03T08:00"),
    ({"frequency": "day", "schedule": {"hours": [8, 20]}}, "2026-06-02T20:00"),
], ids=["no_schedule", "schedule_point_in_that_second"])  # fmt: skip
def test_a_future_start_time_with_a_fraction_runs_at_start_time_then_on_the_grid(
    recurrence: dict[str, Any], then: str
) -> None:
    series = occurrences(recurrence, start=WITH_A_FRACTION, created="2026-06-01T10:17")
    assert series.first == utc(WITH_A_FRACTION)
    assert series.next_after(utc(WITH_A_FRACTION)) == utc(then)


def test_a_fraction_never_moves_the_first_run_before_start_time() -> None:
    schedule = {"frequency": "day", "schedule": {"hours": [9]}}
    series = occurrences(schedule, start=WITH_A_FRACTION, created="2026-06-01T10:17")
    assert series.first == utc("2026-06-02T09:00")


def test_a_fraction_in_start_time_leaves_the_shortest_gap_whole() -> None:
    series = occurrences({"frequency": "minute"}, start=WITH_A_FRACTION, created="2026-06-01T10:17")
    assert series.first == utc(WITH_A_FRACTION)
    assert series.shortest_gap() == timedelta(minutes=1)  # a Standard collection allows it


def test_occurrences_never_drift_from_the_grid() -> None:
    series = occurrences({"frequency": "hour", "interval": 5}, start="2026-06-01T00:07", created="2026-06-01T00:00")
    late_execution = utc("2026-06-01T05:09:33")  # the 05:07 run started two minutes late
    assert iso([series.next_after(late_execution)]) == ["2026-06-01T10:07"]


# --- the schedule examples table -------------------------------------------------------------

SCHEDULE_EXAMPLES = [
    ("day", {"hours": [5]}, None,
     ["2026-06-02T05:00", "2026-06-03T05:00", "2026-06-04T05:00"], "hours_5-daily_at_05_00"),
    ("day", {"minutes": [15], "hours": [5]}, None,
     ["2026-06-02T05:15", "2026-06-03T05:15"], "05_15_daily"),
    ("day", {"minutes": [15], "hours": [5, 17]}, None,
     ["2026-06-01T17:15", "2026-06-02T05:15", "2026-06-02T17:15", "2026-06-03T05:15"],
     "05_15_and_17_15_daily"),
    ("day", {"minutes": [15, 45], "hours": [5, 17]}, None,
     ["2026-06-01T17:15", "2026-06-01T17:45", "2026-06-02T05:15", "2026-06-02T05:45",
      "2026-06-02T17:15"], "05_15_05_45_17_15_17_45_daily"),
    ("day", {"minutes": [0, 15, 30, 45]}, None,
     ["2026-06-01T09:00", "2026-06-01T09:15", "2026-06-01T09:30", "2026-06-01T09:45",
      "2026-06-01T10:00"], "every_15_minutes"),
    ("day", {"hours": list(range(24))}, ("2026-06-01T12:25", "2026-06-01T23:00"),
     ["2026-06-01T23:25", "2026-06-02T00:25", "2026-06-02T01:25"], "all_hours-hourly_at_anchor_minute"),
    ("day", {"minutes": [0]}, ("2026-06-01T09:00", "2026-06-01T21:30"),
     ["2026-06-01T22:00", "2026-06-01T23:00", "2026-06-02T00:00"], "minute_0-hourly_for_day"),
    ("week", {"minutes": [0]}, ("2026-06-01T09:00", "2026-06-01T22:30"),
     ["2026-06-01T23:00", "2026-06-08T00:00", "2026-06-08T01:00"],
     "minute_0-hourly_on_one_day_a_week_for_week"),
    ("month", {"minutes": [0]}, ("2026-06-01T09:00", "2026-06-01T22:30"),
     ["2026-06-01T23:00", "2026-07-01T00:00", "2026-07-01T01:00"],
     "minute_0-hourly_on_one_day_a_month_for_month"),
    ("day", {"minutes": [15]}, ("2026-06-01T09:00", "2026-06-01T22:30"),
     ["2026-06-01T23:15", "2026-06-02T00:15", "2026-06-02T01:15"], "every_hour_at_15"),
    ("week", {"hours": [17], "weekDays": ["saturday"]}, None,
     ["2026-06-06T17:00", "2026-06-13T17:00"], "saturdays_17_00"),
    ("week", {"hours": [17], "weekDays": MON_WED_FRI}, None,
     ["2026-06-01T17:00", "2026-06-03T17:00", "2026-06-05T17:00", "2026-06-08T17:00"],
     "mon_wed_fri_17_00"),
    ("week", {"minutes": [15, 45], "hours": [17], "weekDays": MON_WED_FRI}, None,
     ["2026-06-01T17:15", "2026-06-01T17:45", "2026-06-03T17:15", "2026-06-03T17:45"],
     "mon_wed_fri_17_15_and_17_45"),
    ("week", {"hours": [5, 17], "weekDays": MON_WED_FRI}, None,
     ["2026-06-01T17:00", "2026-06-03T05:00", "2026-06-03T17:00", "2026-06-05T05:00"],
     "mon_wed_fri_05_00_and_17_00"),
    ("week", {"minutes": [15, 45], "hours": [5, 17], "weekDays": MON_WED_FRI}, None,
     ["2026-06-01T17:15", "2026-06-01T17:45", "2026-06-03T05:15", "2026-06-03T05:45",
      "2026-06-03T17:15"], "mon_wed_fri_four_times"),
    ("week", {"minutes": [0, 15, 30, 45], "weekDays": WORKDAYS}, ("2026-06-01T09:00", "2026-06-05T23:40"),
     ["2026-06-05T23:45", "2026-06-08T00:00", "2026-06-08T00:15"], "every_15_minutes_on_workdays"),
    ("week", {"minutes": [0, 15, 30, 45], "hours": list(range(9, 17)), "weekDays": WORKDAYS},
     ("2026-06-01T09:00", "2026-06-05T16:40"),
     ["2026-06-05T16:45", "2026-06-08T09:00", "2026-06-08T09:15"],
     "every_15_minutes_09_00_to_16_45_on_workdays"),
    ("week", {"weekDays": ["sunday"]}, None,
     ["2026-06-07T09:00", "2026-06-14T09:00"], "sundays_at_start_time"),
    ("week", {"weekDays": ["tuesday", "thursday"]}, None,
     ["2026-06-02T09:00", "2026-06-04T09:00", "2026-06-09T09:00"], "tuesdays_and_thursdays"),
    ("month", {"minutes": [0], "hours": [6], "monthDays": [28]}, None,
     ["2026-06-28T06:00", "2026-07-28T06:00"], "the_28th_at_06_00"),
    ("month", {"minutes": [0], "hours": [6], "monthDays": [-1]}, None,
     ["2026-06-30T06:00", "2026-07-31T06:00", "2026-08-31T06:00", "2026-09-30T06:00"],
     "last_day_at_06_00"),
    ("month", {"minutes": [0], "hours": [6], "monthDays": [1, -1]}, None,
     ["2026-06-30T06:00", "2026-07-01T06:00", "2026-07-31T06:00"], "first_and_last_day_at_06_00"),
    ("month", {"monthDays": [1, -1]}, None,
     ["2026-06-01T09:00", "2026-06-30T09:00", "2026-07-01T09:00"], "first_and_last_day_at_start_time"),
    ("month", {"monthDays": [1, 14]}, None,
     ["2026-06-01T09:00", "2026-06-14T09:00", "2026-07-01T09:00"], "the_1st_and_14th"),
    ("month", {"monthDays": [2]}, None,
     ["2026-06-02T09:00", "2026-07-02T09:00"], "the_2nd"),
    ("month", {"minutes": [0], "hours": [5], "monthlyOccurrences": [{"day": "friday", "occurrence": 1}]},
     None, ["2026-06-05T05:00", "2026-07-03T05:00", "2026-08-07T05:00"], "first_friday_05_00"),
    ("month", {"monthlyOccurrences": [{"day": "friday", "occurrence": 1}]}, None,
     ["2026-06-05T09:00", "2026-07-03T09:00", "2026-08-07T09:00"], "first_friday_at_start_time"),
    ("month", {"monthlyOccurrences": [{"day": "friday", "occurrence": -3}]}, None,
     ["2026-06-12T09:00", "2026-07-17T09:00", "2026-08-14T09:00"], "third_friday_from_the_end"),
    ("month", {"minutes": [15], "hours": [5], "monthlyOccurrences": [
        {"day": "friday", "occurrence": 1}, {"day": "friday", "occurrence": -1}]}, None,
     ["2026-06-05T05:15", "2026-06-26T05:15", "2026-07-03T05:15", "2026-07-31T05:15"],
     "first_and_last_friday_05_15"),
    ("month", {"monthlyOccurrences": [{"day": "friday", "occurrence": 5}]}, None,
     ["2026-07-31T09:00", "2026-10-30T09:00"], "fifth_friday_months_without_one_skipped"),
    ("month", {"minutes": [0, 15, 30, 45], "monthlyOccurrences": [{"day": "friday", "occurrence": -1}]},
     ("2026-06-01T09:00", "2026-06-26T23:40"),
     ["2026-06-26T23:45", "2026-07-31T00:00", "2026-07-31T00:15"], "every_15_minutes_on_last_friday"),
    ("month", {"minutes": [15, 45], "hours": [5, 17], "monthlyOccurrences": [
        {"day": "wednesday", "occurrence": 3}]}, None,
     ["2026-06-17T05:15", "2026-06-17T05:45", "2026-06-17T17:15", "2026-06-17T17:45",
      "2026-07-15T05:15"], "third_wednesday_four_times"),
]


@pytest.mark.parametrize(
    ("frequency", "schedule", "start_and_now", "expected"),
    [pytest.param(*case[:4], id=case[4]) for case in SCHEDULE_EXAMPLES],
)
def test_schedule_examples(
    frequency: str,
    schedule: dict[str, Any],
    start_and_now: tuple[str, str] | None,
    expected: list[str],
) -> None:
    start, now = start_and_now or (MONDAY_9AM, MONDAY_9AM)
    series = occurrences({"frequency": frequency, "schedule": schedule}, start=start, created=now)
    assert iso(series.upcoming(len(expected))) == expected


# --- the seed's examples -------------------------------------------------------------------

def test_comprehensive_example_mon_wed_fri_twice_a_day_count_10() -> None:
    series = occurrences(
        {
            "frequency": "week",
            "interval": 1,
            "schedule": {"weekDays": ["monday", "wednesday", "friday"], "hours": [10, 22]},
            "count": 10,
            "endTime": "2012-11-04",
        },
        start="2012-08-04T00:00",
        created="2012-08-01T00:00",
    )
    runs = series.upcoming(100)
    assert iso(runs) == [
        "2012-08-06T10:00", "2012-08-06T22:00", "2012-08-08T10:00", "2012-08-08T22:00",
        "2012-08-10T10:00", "2012-08-10T22:00", "2012-08-13T10:00", "2012-08-13T22:00",
        "2012-08-15T10:00", "2012-08-15T22:00",
    ]
    assert not series.is_complete(9, runs[8])
    assert series.is_complete(10, runs[9])


def test_daily_count_7_starting_monday_ends_after_sunday() -> None:
    series = occurrences({"frequency": "day", "count": 7}, start=MONDAY_9AM, created=MONDAY_9AM)
    runs = series.upcoming(100)
    assert len(runs) == 7
    assert runs[-1].strftime("%A %Y-%m-%d") == "Sunday 2026-06-07"
    assert series.is_complete(7, runs[-1])


def test_count_and_end_time_whichever_comes_first_wins() -> None:
    end_first = occurrences(
        {"frequency": "day", "count": 5, "endTime": "2026-06-03T09:00"}, start=MONDAY_9AM, created=MONDAY_9AM
    )
    assert iso(end_first.upcoming(100)) == ["2026-06-01T09:00", "2026-06-02T09:00", "2026-06-03T09:00"]
    assert end_first.is_complete(3, utc("2026-06-03T09:00"))

    count_first = occurrences(
        {"frequency": "day", "count": 2, "endTime": "2026-06-30"}, start=MONDAY_9AM, created=MONDAY_9AM
    )
    assert iso(count_first.upcoming(100)) == ["2026-06-01T09:00", "2026-06-02T09:00"]


def test_a_preview_continues_from_what_has_already_run() -> None:
    series = occurrences({"frequency": "day", "count": 4}, start=MONDAY_9AM, created=MONDAY_9AM)
    after_two = series.upcoming(10, after=utc("2026-06-02T09:00"), executions_done=2)
    assert iso(after_two) == ["2026-06-03T09:00", "2026-06-04T09:00"]


def test_end_time_in_the_past_means_no_run_at_all() -> None:
    for start in (None, "2026-05-01T00:00"):
        series = occurrences(
            {"frequency": "hour", "endTime": "2026-05-15"}, start=start, created=MONDAY_9AM
        )
        assert series.first is None
        assert series.is_complete(0, utc(MONDAY_9AM))


def test_an_occurrence_at_end_time_still_runs() -> None:
    series = occurrences(
        {"frequency": "hour", "endTime": "2026-06-01T11:00Z"}, start=MONDAY_9AM, created=MONDAY_9AM
    )
    assert iso(series.upcoming(10)) == ["2026-06-01T09:00", "2026-06-01T10:00", "2026-06-01T11:00"]


def test_a_one_off_job_completes_after_its_single_run() -> None:
    series = occurrences(None, start="2026-06-02T08:00", created=MONDAY_9AM)
    assert not series.is_complete(0, utc(MONDAY_9AM))
    assert series.is_complete(1, utc("2026-06-02T08:00"))
    assert series.next_after(utc("2026-06-02T08:00")) is None


def test_a_job_anchored_ten_years_ago_answers_as_one_anchored_now() -> None:
    old = occurrences({"frequency": "minute", "interval": 7}, start="2016-06-01T09:00:05", created="2016-06-01T09:00")
    now = utc("2026-06-01T09:00")
    # 3,652 days = 5,258,880 minutes less 5 s since the anchor: 751,268 whole periods of 7 minutes
    # end at 08:56:05, so the next grid point is 09:03:05.
    assert iso([old.next_after(now)]) == ["2026-06-01T09:03:05"]
