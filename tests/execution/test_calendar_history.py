"""Occurrences on excluded days (docs/behaviour.md#calendar-exclusions), end to end on Azurite:
due index, tick, queue, executor, history, with a clock the test moves. Bavarian public
holidays: 25 and 26 December 2030 (a Wednesday and a Thursday)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.pipeline import Pipeline
from tests.targets import Target

BAVARIA = {"holidays": [{"country": "DE", "subdivision": "BY"}]}
NINE_IN_BERLIN = {"hours": [9], "minutes": [0]}  # 08:00 UTC in winter


def at_eight_utc(day: int, month: int = 12, year: int = 2030) -> datetime:
    return datetime(year, month, day, 8, 0, tzinfo=UTC)


def calendar_job(target: Target, path: str, recurrence: dict[str, Any]) -> dict[str, Any]:
    request = {"uri": target.url(path), "method": "POST", "body": "hello"}
    return {
        "startTime": at_eight_utc(20).isoformat(),
        "action": {"type": "Http", "request": request},
        "recurrence": {"timeZone": "Europe/Berlin", "exclusions": BAVARIA} | recurrence,
    }


def live_through(pipeline: Pipeline, instant: datetime) -> None:
    """Jump to a minute before `instant` (nothing was due in between), then live two minutes."""
    pipeline.clock.at = instant - timedelta(minutes=1)
    pipeline.advance(timedelta(minutes=2))


def expected_times(target: Target, path: str) -> list[str]:
    return [
        call.headers["x-ms-scheduler-expected-execution-time"] for call in target.received(path)
    ]


@pytest.mark.parametrize(
    "overlap", ["Wait", "Allow"]
)  # Allow begins occurrences on a path of its own
def test_a_daily_job_skips_christmas_and_its_history_says_why(
    pipeline: Pipeline, target: Target, overlap: str
) -> None:
    path = f"/daily-{overlap.lower()}"
    target.answer(path, 200)
    pipeline.clock.at = at_eight_utc(23) + timedelta(hours=1)  # after that day's run time
    properties = calendar_job(target, path, {"frequency": "Day", "schedule": NINE_IN_BERLIN})
    job = pipeline.put_job("daily", properties | {"overlapPolicy": overlap})
    live_through(pipeline, at_eight_utc(24))
    live_through(pipeline, at_eight_utc(25))  # holidays: the target is not called
    live_through(pipeline, at_eight_utc(26))
    assert expected_times(target, path) == ["2030-12-24T08:00:00Z"]
    assert pipeline.job(job).document.status.next_execution_time == at_eight_utc(27)
    live_through(pipeline, at_eight_utc(27))
    assert expected_times(target, path) == ["2030-12-24T08:00:00Z", "2030-12-27T08:00:00Z"]
    story = [
        (entry["expectedExecutionTime"], entry["status"], entry["message"])
        for entry in pipeline.history(job)
    ]
    assert [(expected, status) for expected, status, _ in story] == [
        ("2030-12-24T08:00:00Z", "Completed"),
        ("2030-12-25T08:00:00Z", "Postponed"),
        ("2030-12-26T08:00:00Z", "Postponed"),
        ("2030-12-27T08:00:00Z", "Completed"),
    ]
    assert story[1][2].startswith("Skipped: 2030-12-25 is Christmas Day (public holiday, DE-BY);")
    assert story[2][2].startswith(
        "Skipped: 2030-12-26 is Second Day of Christmas (public holiday, DE-BY);"
    )
    document = pipeline.job(job).document
    assert document.status.execution_count == 2  # skipped occurrences are not runs
    assert document.occurrences == 2  # nor do they count towards `count`


def test_a_weekly_job_moved_to_the_next_business_day_runs_there_and_its_history_says_moved(
    pipeline: Pipeline, target: Target
) -> None:
    target.answer("/weekly", 200)
    pipeline.clock.at = at_eight_utc(23) + timedelta(hours=1)  # after that day's run time
    recurrence = {"frequency": "Week", "schedule": {"weekDays": ["Wednesday"]} | NINE_IN_BERLIN,
                  "onExcluded": "NextBusinessDay"}  # fmt: skip
    job = pipeline.put_job("weekly", calendar_job(target, "/weekly", recurrence))
    # Wednesday the 25th and Thursday the 26th are holidays: Friday the 27th is the next business day.
    assert pipeline.job(job).document.status.next_execution_time == at_eight_utc(27)
    live_through(pipeline, at_eight_utc(25))
    assert target.received("/weekly") == []
    live_through(pipeline, at_eight_utc(27))
    assert expected_times(target, "/weekly") == ["2030-12-27T08:00:00Z"]
    moved, ran = pipeline.history(job)
    assert (moved["expectedExecutionTime"], moved["status"]) == (
        "2030-12-25T08:00:00Z",
        "Postponed",
    )
    assert moved["message"] == (
        "Moved: 2030-12-25 is Christmas Day (public holiday, DE-BY); the occurrence ran on the next "
        "business day instead, at 2030-12-27T08:00:00Z (onExcluded NextBusinessDay)."
    )
    assert (ran["expectedExecutionTime"], ran["status"]) == ("2030-12-27T08:00:00Z", "Completed")
    # New Year's Day 2031 is a Wednesday and a holiday too: Thursday the 2nd.
    assert pipeline.job(job).document.status.next_execution_time == at_eight_utc(2, 1, 2031)
