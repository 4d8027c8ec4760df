"""Calendar edges and time zones: DST in two zones, Windows zone names, leap years, short months."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.schedule.timezones import UnknownTimeZone, instant_at, wall_time, zone_named
from tests.factories import iso, occurrences, utc

# Europe/Berlin: clocks jump 02:00 -> 03:00 on 2026-03-29 (01:00 UTC) and fall back 03:00 -> 02:00
# on 2026-10-25 (01:00 UTC). America/New_York: 02:00 -> 03:00 on 2026-03-08 (07:00 UTC), and
# 02:00 -> 01:00 on 2026-11-01 (06:00 UTC).
DST_CASES = [
    pytest.param(
        "Europe/Berlin", "day", {"hours": [2], "minutes": [30]}, "2026-03-27T00:00",
        ["2026-03-27T01:30", "2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"],
        id="berlin-spring_skip-daily_02_30_runs_at_the_jump",
    ),
    pytest.param(
        "Europe/Berlin", "hour", {"minutes": [30]}, "2026-03-28T23:00",
        ["2026-03-28T23:30", "2026-03-29T00:30", "2026-03-29T01:00", "2026-03-29T01:30"],
        id="berlin-spring_skip-hourly_at_30_skipped_hour_runs_at_the_jump",
    ),
    pytest.param(
        "Europe/Berlin", "day", {"hours": [2], "minutes": [30]}, "2026-10-24T00:00",
        ["2026-10-24T00:30", "2026-10-25T00:30", "2026-10-26T01:30"],
        id="berlin-fall_back-daily_02_30_runs_once",
    ),
    pytest.param(
        "Europe/Berlin", "hour", {"minutes": [30]}, "2026-10-24T23:00",
        ["2026-10-24T23:30", "2026-10-25T00:30", "2026-10-25T02:30", "2026-10-25T03:30"],
        id="berlin-fall_back-hourly_at_30_repeated_hour_runs_once",
    ),
    pytest.param(
        "Europe/Berlin", "day", {"hours": [9]}, "2026-03-27T00:00",
        ["2026-03-27T08:00", "2026-03-28T08:00", "2026-03-29T07:00", "2026-03-30T07:00"],
        id="berlin-wall_clock_kept_across_spring",
    ),
    pytest.param(
        "America/New_York", "day", {"hours": [2], "minutes": [15]}, "2026-03-07T00:00",
        ["2026-03-07T07:15", "2026-03-08T07:00", "2026-03-09T06:15"],
        id="new_york-spring_skip-daily_02_15_runs_at_the_jump",
    ),
    pytest.param(
        "America/New_York", "day", {"hours": [1], "minutes": [30]}, "2026-10-31T00:00",
        ["2026-10-31T05:30", "2026-11-01T05:30", "2026-11-02T06:30"],
        id="new_york-fall_back-daily_01_30_runs_once",
    ),
    pytest.param(
        "America/New_York", "week", {"weekDays": ["sunday"], "hours": [1, 2], "minutes": [0, 30]},
        "2026-10-31T00:00",
        # Sunday 1 Nov: 01:00 and 01:30 EDT once each, then 02:00 and 02:30 EST.
        ["2026-11-01T05:00", "2026-11-01T05:30", "2026-11-01T07:00", "2026-11-01T07:30",
         "2026-11-08T06:00"],
        id="new_york-fall_back-weekly_several_times_in_the_repeated_hour",
    ),
    pytest.param(
        "Australia/Lord_Howe", "day", {"hours": [2], "minutes": [15, 45]}, "2026-10-03T00:00",
        # Lord Howe moves only 30 minutes: 02:00 -> 02:30 on Sunday 4 Oct 2026 (15:30 UTC on the
        # 3rd), so 02:15 runs at the jump and 02:45 is already on summer time (+11:00).
        ["2026-10-03T15:30", "2026-10-03T15:45", "2026-10-04T15:15"],
        id="lord_howe-half_hour_spring_skip",
    ),
]


@pytest.mark.parametrize(("zone", "frequency", "schedule", "start", "expected"), DST_CASES)
def test_daylight_saving(
    zone: str, frequency: str, schedule: dict[str, Any], start: str, expected: list[str]
) -> None:
    series = occurrences(
        {"frequency": frequency, "schedule": schedule, "timeZone": zone}, start=start, created=start
    )
    assert iso(series.upcoming(len(expected))) == expected


def test_next_after_an_instant_in_the_repeated_hour_does_not_go_back() -> None:
    series = occurrences(
        {"frequency": "hour", "schedule": {"minutes": [30]}, "timeZone": "Europe/Berlin"},
        start="2026-10-24T00:00",
        created="2026-10-24T00:00",
    )
    second_pass_of_02_45 = utc("2026-10-25T01:45")
    assert wall_time(second_pass_of_02_45, zone_named("Europe/Berlin")).strftime("%H:%M") == "02:45"
    assert iso([series.next_after(second_pass_of_02_45)]) == ["2026-10-25T02:30"]


@pytest.mark.parametrize(
    ("windows", "iana"),
    [
        ("W. Europe Standard Time", "Europe/Berlin"),
        ("Eastern Standard Time", "America/New_York"),
        ("Tokyo Standard Time", "Asia/Tokyo"),
        ("AUS Eastern Standard Time", "Australia/Sydney"),
        ("w. europe standard time", "Europe/Berlin"),
    ],
)
def test_windows_zone_names_follow_their_iana_zone(windows: str, iana: str) -> None:
    def upcoming(zone: str) -> list[str]:
        recurrence = {"frequency": "day", "schedule": {"hours": [2], "minutes": [30]}, "timeZone": zone}
        return iso(occurrences(recurrence, start="2026-01-01T00:00", created="2026-01-01T00:00").upcoming(400))

    assert upcoming(windows) == upcoming(iana)


def test_zone_names_are_matched_in_any_case_and_unknown_ones_refused() -> None:
    assert zone_named("europe/berlin") == zone_named("Europe/Berlin")
    assert zone_named("utc") == zone_named("UTC")
    for name in ("Mars/Olympus_Mons", "../../etc/passwd", "", "Europe/"):
        with pytest.raises(UnknownTimeZone, match="not a known time zone"):
            zone_named(name)


def test_instant_at_maps_skipped_wall_times_to_the_jump_and_repeated_ones_to_their_first_pass() -> None:
    berlin = zone_named("Europe/Berlin")
    assert iso([instant_at(utc("2026-03-29T02:59:59").replace(tzinfo=None), berlin)]) == ["2026-03-29T01:00"]
    assert iso([instant_at(utc("2026-10-25T02:10").replace(tzinfo=None), berlin)]) == ["2026-10-25T00:10"]


# --- leap years and short months --------------------------------------------------------------

CALENDAR_CASES = [
    pytest.param(
        "year", None, "2024-02-29T12:00",
        ["2024-02-29T12:00", "2028-02-29T12:00", "2032-02-29T12:00"],
        id="feb_29_yearly-leap_years_only",
    ),
    pytest.param(
        "year", None, "2096-02-29T12:00", ["2096-02-29T12:00", "2104-02-29T12:00"],
        id="feb_29_yearly-2100_is_not_a_leap_year",
    ),
    pytest.param(
        "month", {"monthDays": [31]}, "2026-01-01T06:00",
        ["2026-01-31T06:00", "2026-03-31T06:00", "2026-05-31T06:00", "2026-07-31T06:00",
         "2026-08-31T06:00", "2026-10-31T06:00"],
        id="month_days_31-only_months_that_have_one",
    ),
    pytest.param(
        "month", {"monthDays": [-1]}, "2027-01-01T06:00",
        ["2027-01-31T06:00", "2027-02-28T06:00", "2027-03-31T06:00", "2027-04-30T06:00"],
        id="month_days_minus_1-last_day_of_short_months",
    ),
    pytest.param(
        "month", {"monthDays": [-1]}, "2028-02-01T06:00", ["2028-02-29T06:00", "2028-03-31T06:00"],
        id="month_days_minus_1-feb_29_in_a_leap_year",
    ),
    pytest.param(
        "month", {"monthDays": [-31, 30]}, "2026-01-01T06:00",
        ["2026-01-01T06:00", "2026-01-30T06:00", "2026-03-01T06:00", "2026-03-30T06:00",
         "2026-04-30T06:00", "2026-05-01T06:00"],
        id="month_days_minus_31_and_30-skip_where_missing",
    ),
    pytest.param(
        "month", None, "2026-01-31T08:00",
        ["2026-01-31T08:00", "2026-03-31T08:00", "2026-05-31T08:00"],
        id="monthly_without_schedule_on_the_31st-skips_short_months",
    ),
    pytest.param(
        "month", {"monthlyOccurrences": [{"day": "friday", "occurrence": 5}]}, "2026-01-01T08:00",
        ["2026-01-30T08:00", "2026-05-29T08:00", "2026-07-31T08:00", "2026-10-30T08:00",
         "2027-01-29T08:00"],
        id="fifth_friday-months_without_one_skipped",
    ),
    pytest.param(
        "month", {"monthDays": [13], "monthlyOccurrences": [{"day": "friday"}]}, "2026-01-01T08:00",
        ["2026-02-13T08:00", "2026-03-13T08:00", "2026-11-13T08:00"],
        id="month_days_and_weekdays_together-friday_the_13th",
    ),
    pytest.param(
        "month", {"monthlyOccurrences": [{"day": "friday"}, {"day": "monday", "occurrence": 1}]},
        "2026-06-01T08:00",
        ["2026-06-01T08:00", "2026-06-05T08:00", "2026-06-12T08:00", "2026-06-19T08:00",
         "2026-06-26T08:00", "2026-07-03T08:00", "2026-07-06T08:00"],
        id="every_friday_plus_first_monday",
    ),
]


@pytest.mark.parametrize(("frequency", "schedule", "start", "expected"), CALENDAR_CASES)
def test_calendar(frequency: str, schedule: dict[str, Any] | None, start: str, expected: list[str]) -> None:
    recurrence: dict[str, Any] = {"frequency": frequency}
    if schedule:
        recurrence["schedule"] = schedule
    series = occurrences(recurrence, start=start, created=start)
    assert iso(series.upcoming(len(expected))) == expected


def test_weeks_start_on_monday_for_intervals() -> None:
    # Start Sunday 7 June: its week began Monday 1 June, so the fortnights are the weeks of
    # 1 June, 15 June and 29 June.
    series = occurrences(
        {"frequency": "week", "interval": 2, "schedule": {"weekDays": ["monday", "sunday"]}},
        start="2026-06-07T09:00",
        created="2026-06-07T09:00",
    )
    assert iso(series.upcoming(5)) == [
        "2026-06-07T09:00", "2026-06-15T09:00", "2026-06-21T09:00", "2026-06-29T09:00", "2026-07-05T09:00",
    ]


def test_every_three_months_from_the_31st_keeps_the_grid_and_skips_short_months() -> None:
    series = occurrences({"frequency": "month", "interval": 3}, start="2026-01-31T00:00", created="2026-01-31T00:00")
    assert iso(series.upcoming(4)) == ["2026-01-31T00:00", "2026-07-31T00:00", "2026-10-31T00:00", "2027-01-31T00:00"]


def test_a_schedule_that_never_meets_its_grid_has_no_occurrence() -> None:
    # Every 12 months from February, on the 30th: February never has one.
    never = occurrences(
        {"frequency": "month", "interval": 12, "schedule": {"monthDays": [30]}},
        start="2026-02-01T00:00",
        created="2026-02-01T00:00",
    )
    assert never.first is None
    # Every 120 minutes from :07, but only at minute 30: the grid never lands there.
    odd = occurrences(
        {"frequency": "minute", "interval": 120, "schedule": {"minutes": [30]}},
        start="2026-02-01T00:07",
        created="2026-02-01T00:00",
    )
    assert odd.first is None


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "Pacific/Pago_Pago", "UTC"])
def test_the_edges_of_the_calendar_end_the_series_instead_of_failing(zone: str) -> None:
    early = occurrences({"frequency": "minute", "interval": 7, "timeZone": zone}, start="1900-01-01T00:00", created="2026-06-01T09:00")
    assert early.first is not None and early.first >= utc("2026-06-01T09:00")
    # The next yearly tick after 9998-12-31 10:00 UTC is past year 9999 on Kiritimati's clock.
    late = occurrences({"frequency": "year", "timeZone": zone}, start="9998-12-31T10:00", created="9998-12-31T00:00")
    found = late.upcoming(3)
    assert found[0] == utc("9998-12-31T10:00")
    assert len(found) == (1 if zone == "Pacific/Kiritimati" else 2)
