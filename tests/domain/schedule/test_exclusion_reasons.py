"""Why a day is excluded, in words (history entries and previews show them), and the bounded
walks over a schedule's excluded occurrences, against the plain walk they stand in for."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from shared.domain.schedule.exclusion_reasons import first_excluded, last_excluded, why_excluded
from shared.domain.schedule.exclusions import BusinessCalendar, Exclusions, OnExcluded
from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import Recurrence

CALENDAR = BusinessCalendar.of(
    Exclusions.model_validate({
        "holidays": [{"country": "DE", "subdivision": "BY"}, {"country": "GB", "subdivision": "SCT"}],
        "dates": ["2030-12-24", {"from": "2030-12-28", "to": "2031-01-02"}],
    }),
    OnExcluded.NEXT_BUSINESS_DAY,
)  # fmt: skip


@pytest.mark.parametrize(
    ("day", "reason"),
    [
        pytest.param(date(2030, 12, 25), "Christmas Day (public holiday, DE-BY) and Christmas Day (public holiday, GB-SCT)", id="two-calendars"),
        pytest.param(date(2031, 1, 6), "Epiphany (public holiday, DE-BY)", id="bavaria-only"),
        pytest.param(date(2030, 12, 24), "a blackout date", id="single-date"),
        pytest.param(date(2030, 12, 30), "in the blackout from 2030-12-28 to 2031-01-02", id="range"),
        pytest.param(date(2031, 1, 1), "New Year's Day (public holiday, DE-BY) and New Year's Day (public holiday, GB-SCT) and in the blackout from 2030-12-28 to 2031-01-02", id="holiday-in-range"),
        pytest.param(date(2031, 1, 4), "a Saturday, a day off", id="weekend-when-moving"),
        pytest.param(date(2031, 1, 7), "", id="a-business-day"),
    ],
)  # fmt: skip
def test_a_day_is_excluded_for_every_reason_that_applies(day: date, reason: str) -> None:
    assert why_excluded(CALENDAR, day) == reason


def minute_job(exclusions: dict[str, Any]) -> Occurrences:
    recurrence = Recurrence.model_validate({"frequency": "Minute", "interval": 7, "exclusions": exclusions})
    return Occurrences(None, recurrence, datetime(2030, 12, 1, tzinfo=UTC))


@pytest.mark.parametrize("most", [1, 50, 1000, 10**6])
def test_the_bounded_walks_find_what_the_plain_walk_finds(most: int) -> None:
    schedule = minute_job({"dates": ["2030-12-03", {"from": "2030-12-20", "to": "2030-12-27"}]})
    start, end = datetime(2030, 12, 2, 13, tzinfo=UTC), datetime(2030, 12, 26, 5, tzinfo=UTC)
    everything = schedule.excluded_between(start, end)
    assert len(everything) > 1000
    assert first_excluded(schedule, start, end, most) == everything[:most]
    assert last_excluded(schedule, start, end, most) == everything[-most:]
    assert first_excluded(schedule, end, end + timedelta(hours=1), most) == schedule.excluded_between(end, end + timedelta(hours=1))[:most]
