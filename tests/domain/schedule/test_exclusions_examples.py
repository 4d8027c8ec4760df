"""Calendar exclusions on examples checked by hand against published holiday lists: German
(Bavarian), UK and US holidays, across clock changes and year ends; and what invalid
exclusions are told."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from shared.domain.problems import InvalidRequest
from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import Recurrence, read_recurrence
from shared.domain.schedule.words import describe_schedule

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
WORKING_WEEK = ["monday", "tuesday", "wednesday", "thursday", "friday"]


def runs(recurrence: dict[str, Any], saved: datetime, limit: int) -> list[str]:
    """The next runs as the schedule's own wall clock shows them."""
    parsed = Recurrence.model_validate(recurrence)
    zone = ZoneInfo(parsed.time_zone or "UTC")
    found = Occurrences(start_time=None, recurrence=parsed, created_at=saved).upcoming(
        limit, after=saved
    )
    return [instant.astimezone(zone).strftime("%a %Y-%m-%d %H:%M %Z") for instant in found]


def test_weekdays_in_bavaria_skip_christmas_new_year_and_epiphany() -> None:
    recurrence = {
        "frequency": "Week",
        "schedule": {"weekDays": WORKING_WEEK, "hours": [7], "minutes": [0]},
        "timeZone": "Europe/Berlin",
        "exclusions": {"holidays": [{"country": "DE", "subdivision": "BY"}]},
    }
    # 24 Dec is no public holiday; 25 and 26 Dec, 1 Jan and (in Bavaria) 6 Jan are.
    assert runs(recurrence, datetime(2026, 12, 23, 12, tzinfo=UTC), 6) == [
        "Thu 2026-12-24 07:00 CET",
        "Mon 2026-12-28 07:00 CET",
        "Tue 2026-12-29 07:00 CET",
        "Wed 2026-12-30 07:00 CET",
        "Thu 2026-12-31 07:00 CET",
        "Mon 2027-01-04 07:00 CET",
    ]
    assert runs(recurrence, datetime(2027, 1, 4, 12, tzinfo=UTC), 2) == [
        "Tue 2027-01-05 07:00 CET",
        "Thu 2027-01-07 07:00 CET",
    ]
    # Elsewhere in Germany 6 Jan is a working day.
    berlin = {**recurrence, "exclusions": {"holidays": [{"country": "DE", "subdivision": "BE"}]}}
    assert runs(berlin, datetime(2027, 1, 4, 12, tzinfo=UTC), 2)[1] == "Wed 2027-01-06 07:00 CET"


def test_uk_first_of_the_month_moves_to_the_next_business_day_across_the_clock_change() -> None:
    recurrence = {
        "frequency": "Month",
        "schedule": {"monthDays": [1], "hours": [7], "minutes": [0]},
        "timeZone": "Europe/London",
        "exclusions": {"holidays": [{"country": "GB"}]},
        "onExcluded": "NextBusinessDay",
    }
    # 1 Jan 2027 is New Year's Day (a Friday); 1 May 2027 is a Saturday and 3 May the Early May
    # bank holiday; clocks go forward on 28 Mar 2027, so April's run is at 07:00 BST.
    assert runs(recurrence, datetime(2026, 12, 15, tzinfo=UTC), 6) == [
        "Mon 2027-01-04 07:00 GMT",
        "Mon 2027-02-01 07:00 GMT",
        "Mon 2027-03-01 07:00 GMT",
        "Thu 2027-04-01 07:00 BST",
        "Tue 2027-05-04 07:00 BST",
        "Tue 2027-06-01 07:00 BST",
    ]


def test_us_last_business_day_of_the_month() -> None:
    recurrence = {
        "frequency": "Month",
        "schedule": {"monthDays": [-1], "hours": [18], "minutes": [0]},
        "timeZone": "America/New_York",
        "exclusions": {"holidays": [{"country": "US"}]},
        "onExcluded": "PreviousBusinessDay",
    }
    # 31 Jan 2027 is a Sunday, 28 Feb a Sunday, 31 May Memorial Day, 31 Oct a Sunday; clocks
    # go back on 7 Nov 2027.
    assert runs(recurrence, datetime(2027, 1, 2, tzinfo=UTC), 12) == [
        "Fri 2027-01-29 18:00 EST",
        "Fri 2027-02-26 18:00 EST",
        "Wed 2027-03-31 18:00 EDT",
        "Fri 2027-04-30 18:00 EDT",
        "Fri 2027-05-28 18:00 EDT",
        "Wed 2027-06-30 18:00 EDT",
        "Fri 2027-07-30 18:00 EDT",
        "Tue 2027-08-31 18:00 EDT",
        "Thu 2027-09-30 18:00 EDT",
        "Fri 2027-10-29 18:00 EDT",
        "Tue 2027-11-30 18:00 EST",
        # 1 Jan 2028 is a Saturday, so New Year's Day is observed on Friday 31 Dec 2027.
        "Thu 2027-12-30 18:00 EST",
    ]


def test_runs_moved_onto_one_instant_run_once() -> None:
    recurrence = {
        "frequency": "Day",
        "schedule": {"hours": [9], "minutes": [30]},
        "exclusions": {"dates": [{"from": "2026-12-24", "to": "2027-01-01"}]},
        "onExcluded": "NextBusinessDay",
    }
    # Nine blacked-out days and a weekend all land on Monday 4 Jan at 09:30: one run.
    assert runs(recurrence, datetime(2026, 12, 22, 12, tzinfo=UTC), 4) == [
        "Wed 2026-12-23 09:30 UTC",
        "Mon 2027-01-04 09:30 UTC",
        "Tue 2027-01-05 09:30 UTC",
        "Wed 2027-01-06 09:30 UTC",
    ]


def test_skipped_runs_do_not_count_towards_count() -> None:
    recurrence = Recurrence.model_validate(
        {
            "frequency": "Day",
            "count": 3,
            "schedule": {"hours": [9], "minutes": [0]},
            "exclusions": {"dates": ["2026-12-02"], "weekdays": ["saturday", "sunday"]},
        }
    )
    saved = datetime(2026, 11, 30, 12, tzinfo=UTC)  # a Monday
    preview = Occurrences(None, recurrence, saved).upcoming(10, after=saved)
    assert [instant.date().isoformat() for instant in preview] == [
        "2026-12-01",
        "2026-12-03",
        "2026-12-04",
    ]


def test_a_schedule_that_only_falls_on_days_off_never_runs() -> None:
    recurrence = Recurrence.model_validate(
        {
            "frequency": "Week",
            "schedule": {"weekDays": ["saturday"]},
            "exclusions": {"weekdays": ["saturday"]},
        }
    )
    assert Occurrences(None, recurrence, NOW).next_after(NOW) is None


def test_excluded_occurrences_are_listed_with_where_they_went() -> None:
    recurrence = Recurrence.model_validate(
        {
            "frequency": "Day",
            "schedule": {"hours": [8], "minutes": [0]},
            "exclusions": {"holidays": [{"country": "GB"}]},
            "onExcluded": "NextBusinessDay",
        }
    )
    occurrences = Occurrences(None, recurrence, datetime(2026, 12, 20, tzinfo=UTC))
    excluded = occurrences.excluded_between(
        datetime(2026, 12, 25, tzinfo=UTC), datetime(2026, 12, 27, tzinfo=UTC)
    )
    # Christmas (a Friday) and the Saturday move to Monday; Boxing Day's substitute is Monday
    # 28 Dec, so they land on Tuesday 29 Dec.
    assert [(e.scheduled.date().isoformat(), e.moved_to) for e in excluded] == [
        ("2026-12-25", datetime(2026, 12, 29, 8, tzinfo=UTC)),
        ("2026-12-26", datetime(2026, 12, 29, 8, tzinfo=UTC)),
    ]


def test_the_schedule_in_words_names_the_calendar() -> None:
    sentence = describe_schedule(
        {
            "recurrence": {
                "frequency": "Week",
                "schedule": {"weekDays": WORKING_WEEK, "hours": [7], "minutes": [0]},
                "timeZone": "Europe/Berlin",
                "exclusions": {"holidays": [{"country": "DE", "subdivision": "BY"}]},
            }
        }
    )
    assert (
        "Mondays to Fridays at 07:00 Europe/Berlin except public holidays in Bayern, Germany"
        in (sentence)
    )


@pytest.mark.parametrize(
    ("exclusions", "field", "words"),
    [
        (
            {"exclusions": {"holidays": [{"country": "XX"}]}},
            "recurrence.exclusions.holidays[0]",
            "XX",
        ),
        (
            {"exclusions": {"holidays": [{"country": "DE", "subdivision": "QQ"}]}},
            "recurrence.exclusions.holidays[0]",
            "QQ",
        ),
        (
            {"exclusions": {"dates": [{"from": "2026-12-24", "to": "2026-12-01"}]}},
            "recurrence.exclusions.dates[0]",
            "before",
        ),
        ({"exclusions": {"dates": ["2026-01-01"] * 1001}}, "recurrence.exclusions.dates", "1000"),
        ({"exclusions": {"dates": [7]}}, "recurrence.exclusions.dates[0]", "a date"),
        ({"onExcluded": "Whenever"}, "recurrence.onExcluded", "NextBusinessDay"),
        ({"exclusions": {"weekdays": ["funday"]}}, "recurrence.exclusions.weekdays[0]", "funday"),
    ],
)
def test_invalid_exclusions_name_their_field(
    exclusions: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        read_recurrence({"frequency": "Day", **exclusions}, now=NOW)
    problems = {error.field: error.problem for error in refused.value.errors}
    assert field in problems, problems
    assert words in problems[field]
