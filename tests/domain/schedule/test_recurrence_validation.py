"""Every recurrence rule of docs/behaviour.md#recurrence, with the message a client gets when it is broken."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.errors import arm_error
from shared.domain.problems import InvalidRequest
from shared.domain.schedule.recurrence import Frequency, read_recurrence
from tests.factories import utc

NOW = utc("2026-06-01T09:00")

INVALID = [
    ({"interval": 2}, "recurrence.frequency: is required"),
    ({"frequency": "fortnight"},
     "recurrence.frequency: \"fortnight\" is not one of 'minute', 'hour', 'day', 'week', 'month' or 'year'"),
    ({"frequency": "day", "interval": 0}, "recurrence.interval: 0 is too small: the least allowed is 1"),
    ({"frequency": "day", "interval": "2"}, 'recurrence.interval: must be a whole number, not "2"'),
    ({"frequency": "minute", "interval": 1001},
     "recurrence.interval: 1001 is too long for frequency minute: the maximum is 1000"),
    ({"frequency": "hour", "interval": 1001},
     "recurrence.interval: 1001 is too long for frequency hour: the maximum is 1000"),
    ({"frequency": "day", "interval": 549}, "recurrence.interval: 549 is too long for frequency day: the maximum is 548"),
    ({"frequency": "week", "interval": 79}, "recurrence.interval: 79 is too long for frequency week: the maximum is 78"),
    ({"frequency": "month", "interval": 19}, "recurrence.interval: 19 is too long for frequency month: the maximum is 18"),
    ({"frequency": "year", "interval": 2}, "recurrence.interval: 2 is too long for frequency year: the maximum is 1"),
    ({"frequency": "day", "schedule": {"minutes": [0, 60]}},
     "recurrence.schedule.minutes[1]: 60 is too large: the most allowed is 59"),
    ({"frequency": "day", "schedule": {"minutes": [-1]}},
     "recurrence.schedule.minutes[0]: -1 is too small: the least allowed is 0"),
    ({"frequency": "day", "schedule": {"hours": [24]}},
     "recurrence.schedule.hours[0]: 24 is too large: the most allowed is 23"),
    ({"frequency": "day", "schedule": {"hours": [1.5]}},
     "recurrence.schedule.hours[0]: must be a whole number, not 1.5"),
    ({"frequency": "day", "schedule": {"weekDays": ["monday"]}},
     "recurrence.schedule.weekDays: is allowed only with frequency week, not day"),
    ({"frequency": "week", "schedule": {"weekDays": ["funday"]}},
     "recurrence.schedule.weekDays[0]: \"funday\" is not one of 'monday', 'tuesday', 'wednesday', "
     "'thursday', 'friday', 'saturday' or 'sunday'"),
    ({"frequency": "week", "schedule": {"weekDays": ["monday"] * 8}},
     "recurrence.schedule.weekDays: has 8 items; at most 7 are allowed"),
    ({"frequency": "week", "schedule": {"monthDays": [1]}},
     "recurrence.schedule.monthDays: is allowed only with frequency month, not week"),
    ({"frequency": "month", "schedule": {"monthDays": [32]}},
     "recurrence.schedule.monthDays[0]: 32 is too large: the most allowed is 31"),
    ({"frequency": "month", "schedule": {"monthDays": [-32]}},
     "recurrence.schedule.monthDays[0]: -32 is too small: the least allowed is -31"),
    ({"frequency": "month", "schedule": {"monthDays": [5, 0]}},
     "recurrence.schedule.monthDays[1]: 0 is not a day of the month; use 1..31, or -1..-31"),
    ({"frequency": "year", "schedule": {"monthlyOccurrences": [{"day": "friday"}]}},
     "recurrence.schedule.monthlyOccurrences: is allowed only with frequency month, not year"),
    ({"frequency": "month", "schedule": {"monthlyOccurrences": [{"occurrence": 1}]}},
     "recurrence.schedule.monthlyOccurrences[0].day: is required"),
    ({"frequency": "month", "schedule": {"monthlyOccurrences": [{"day": "someday"}]}},
     "recurrence.schedule.monthlyOccurrences[0].day: \"someday\" is not one of 'monday'"),
    ({"frequency": "month", "schedule": {"monthlyOccurrences": [{"day": "friday", "occurrence": 6}]}},
     "recurrence.schedule.monthlyOccurrences[0].occurrence: 6 is too large: the most allowed is 5"),
    ({"frequency": "month", "schedule": {"monthlyOccurrences": [{"day": "friday", "occurrence": -6}]}},
     "recurrence.schedule.monthlyOccurrences[0].occurrence: -6 is too small: the least allowed is -5"),
    ({"frequency": "month", "schedule": {"monthlyOccurrences": [{"day": "friday", "occurrence": 0}]}},
     "recurrence.schedule.monthlyOccurrences[0].occurrence: 0 is not an occurrence; use 1..5"),
    ({"frequency": "day", "count": 0}, "recurrence.count: 0 is too small: the least allowed is 1"),
    ({"frequency": "day", "count": True}, "recurrence.count: must be a whole number, not true"),
    ({"frequency": "day", "endTime": "next tuesday"},
     "recurrence.endTime: 'next tuesday' is not an ISO 8601 date or date-time"),
    ({"frequency": "day", "endTime": 1767225600}, "recurrence.endTime: must be an ISO 8601 date-time string"),
    ({"frequency": "day", "endTime": "9999-12-31T23:00:00-05:00"},
     "recurrence.endTime: '9999-12-31T23:00:00-05:00' is outside the years 1 to 9999 in UTC"),
    ({"frequency": "day", "timeZone": "Mars/Olympus_Mons"},
     "recurrence.timeZone: 'Mars/Olympus_Mons' is not a known time zone; use an IANA name"),
    ({"frequency": "day", "schedule": {"minutes": "5"}}, 'recurrence.schedule.minutes: must be a list, not a string'),
    ("daily", 'recurrence: must be an object, not a string'),
]


@pytest.mark.parametrize(
    ("recurrence", "message"), INVALID, ids=[message.split(":")[0] + f"-{n}" for n, (_, message) in enumerate(INVALID)]
)
def test_invalid_recurrence_is_refused_naming_field_and_rule(recurrence: Any, message: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        read_recurrence(recurrence, now=NOW)
    assert message in refused.value.message
    assert arm_error(refused.value).status == 400  # the API answers it as a 400


@pytest.mark.parametrize(
    ("frequency", "longest"),
    [("minute", 1000), ("hour", 1000), ("day", 548), ("week", 78), ("month", 18), ("year", 1)],
)
def test_the_longest_interval_of_each_frequency_is_accepted(frequency: str, longest: int) -> None:
    assert read_recurrence({"frequency": frequency, "interval": longest}, now=NOW).interval == longest


def test_start_time_more_than_18_months_ahead_is_refused() -> None:
    with pytest.raises(InvalidRequest, match=r"startTime: 2027-12-01T09:00:01\+00:00 is more than 18 months away"):
        read_recurrence({"frequency": "day"}, start_time=utc("2027-12-01T09:00:01"), now=NOW)
    assert read_recurrence({"frequency": "day"}, start_time=utc("2027-12-01T09:00"), now=NOW)


def test_start_time_before_1900_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="startTime: 0001-01-01T00:00:00\\+00:00 is before 1900"):
        read_recurrence({"frequency": "day"}, start_time=utc("0001-01-01T00:00"), now=NOW)
    assert read_recurrence({"frequency": "day"}, start_time=utc("1900-01-01T00:00"), now=NOW)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(InvalidRequest) as refused:
        read_recurrence(
            {"frequency": "day", "interval": 600, "schedule": {"weekDays": ["monday"], "monthDays": [1]}},
            now=NOW,
        )
    assert [error.field for error in refused.value.errors] == [
        "recurrence.interval",
        "recurrence.schedule.weekDays",
        "recurrence.schedule.monthDays",
    ]


def test_names_and_enum_values_are_read_in_any_case_and_written_canonically() -> None:
    recurrence = read_recurrence(
        {
            "FREQUENCY": "mOnTh",
            "Interval": 2,
            "schedule": {"MonthlyOccurrences": [{"Day": "FRIDAY", "Occurrence": -1}], "HOURS": [5]},
            "timezone": "w. europe standard time",
        },
        now=NOW,
    )
    assert recurrence.frequency is Frequency.MONTH
    assert recurrence.to_wire() == {
        "frequency": "month",
        "interval": 2,
        "schedule": {"hours": [5], "monthlyOccurrences": [{"day": "friday", "occurrence": -1}]},
        "timeZone": "w. europe standard time",
    }


def test_defaults_and_lenient_absences() -> None:
    recurrence = read_recurrence(
        {"frequency": "day", "interval": None, "schedule": {"minutes": [], "hours": None}}, now=NOW
    )
    assert recurrence.interval == 1
    assert recurrence.schedule is not None
    assert recurrence.schedule.minutes is None


def test_dates_and_times_without_offset_are_utc() -> None:
    date_only = read_recurrence({"frequency": "day", "endTime": "2012-11-04"}, now=NOW)
    assert date_only.ends_at == utc("2012-11-04T00:00")
    assert date_only.end_time == "2012-11-04T00:00:00Z"
    with_offset = read_recurrence({"frequency": "day", "endTime": "2012-11-04T10:00+02:00"}, now=NOW)
    assert with_offset.ends_at == utc("2012-11-04T08:00")
    assert with_offset.end_time == "2012-11-04T08:00:00Z"
    short = read_recurrence({"frequency": "day", "endTime": "2012-08-04T00:00Z"}, now=NOW)
    assert short.ends_at == utc("2012-08-04T00:00")
    assert short.end_time == "2012-08-04T00:00:00Z"


def test_end_time_is_echoed_in_utc_to_the_100_ns_sent() -> None:
    precise = read_recurrence({"frequency": "day", "endTime": "2030-01-02T05:04:05.1234560+02:00"}, now=NOW)
    assert precise.end_time == "2030-01-02T03:04:05.123456Z"
    assert precise.to_wire()["endTime"] == "2030-01-02T03:04:05.123456Z"
    seventh = read_recurrence({"frequency": "day", "endTime": "2030-01-02T03:04:05.1234567Z"}, now=NOW)
    assert seventh.end_time == "2030-01-02T03:04:05.1234567Z"
