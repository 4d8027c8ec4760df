"""Calendar exclusions through the API: previews of unsaved and saved jobs skip or move runs on
excluded days, the definition echoes the calendar as sent, and bad calendars get a 400 naming
the field."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import httpx

from tests.api.test_jobs import collection, collection_path, http_job, job_path, put_job, unique
from tests.api.test_templates import import_into, new_group, provider

__all__ = ["collection"]  # the fixture, used by name


def _z(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def test_previews_skip_and_move_runs_on_excluded_days(api: httpx.Client, collection: str) -> None:
    start = datetime.combine(datetime.now(UTC).date() + timedelta(days=2), time(9), tzinfo=UTC)
    blackout = [(start + timedelta(days=1)).date().isoformat()]
    recurrence = {"frequency": "Day", "exclusions": {"dates": blackout, "weekdays": []}}
    body = http_job(startTime=_z(start), recurrence=recurrence)

    preview = api.post(
        f"{collection_path(collection)}/previewOccurrences", params={"count": 3}, json=body
    )
    assert preview.status_code == 200, preview.text
    assert preview.json()["value"] == [
        _z(start),
        _z(start + timedelta(days=2)),
        _z(start + timedelta(days=3)),
    ]
    assert f"on {blackout[0]}" in preview.json()["schedule"]

    moved = http_job(
        startTime=_z(start), recurrence={**recurrence, "onExcluded": "PreviousBusinessDay"}
    )
    name = unique("cal")
    assert put_job(api, collection, moved, name=name).status_code in (200, 201)
    saved = api.get(job_path(collection, name)).json()["properties"]["recurrence"]
    assert saved["exclusions"] == recurrence["exclusions"]
    assert saved["onExcluded"] == "PreviousBusinessDay"
    # The blacked-out day's run moves back onto the first day's 09:00: one run, not two.
    upcoming = api.get(f"{job_path(collection, name)}/nextOccurrences", params={"count": 2}).json()[
        "value"
    ]
    assert upcoming == [_z(start), _z(start + timedelta(days=2))]


def test_a_bad_calendar_is_a_400_naming_the_field(api: httpx.Client, collection: str) -> None:
    body = http_job(recurrence={"frequency": "Day", "exclusions": {"holidays": [{"country": "DE", "subdivision": "XX"}]},
                                "onExcluded": "Sometimes"})  # fmt: skip
    answer = put_job(api, collection, body)
    assert answer.status_code == 400, answer.text
    targets = {detail["target"] for detail in answer.json()["error"]["details"]}
    assert targets == {
        "properties.recurrence.exclusions.holidays[0]",
        "properties.recurrence.onExcluded",
    }
    assert api.get(f"{collection_path(collection)}/jobs").json()["value"] == []


def test_a_calendar_survives_template_export_and_import(api: httpx.Client) -> None:
    source, copy = new_group(), new_group()
    collection = f"{provider(source)}/jobCollections/calendars"
    assert (
        api.put(
            collection,
            json={"location": "West Europe", "properties": {"sku": {"name": "Standard"}}},
        ).status_code
        == 201
    )
    recurrence = {
        "frequency": "Month",
        "schedule": {"monthDays": [-1], "hours": [18], "minutes": [0]},
        "timeZone": "America/New_York",
        "exclusions": {
            "holidays": [{"country": "US", "subdivision": "NY"}],
            "dates": ["2027-03-31"],
        },
        "onExcluded": "PreviousBusinessDay",
    }
    assert (
        api.put(f"{collection}/jobs/month-end", json=http_job(recurrence=recurrence)).status_code
        == 201
    )
    exported = api.post(f"{provider(source)}/exportTemplate")
    assert exported.status_code == 200, exported.text
    assert import_into(api, copy, template=exported.json()["template"]).status_code == 200
    before = api.get(f"{collection}/jobs/month-end").json()["properties"]
    after = api.get(f"{provider(copy)}/jobCollections/calendars/jobs/month-end").json()[
        "properties"
    ]
    assert after["recurrence"] == before["recurrence"]
    assert after["recurrence"]["exclusions"] == recurrence["exclusions"]


def _coming_christmas_year() -> int:
    """The year of the next 23 December (a job may start at most 18 months ahead)."""
    today = datetime.now(UTC)
    return today.year if (today.month, today.day) < (12, 20) else today.year + 1


def test_a_preview_lists_the_runs_the_calendar_skips_or_moves_and_why(
    api: httpx.Client, collection: str
) -> None:
    year = _coming_christmas_year()
    start = datetime(year, 12, 23, 9, tzinfo=UTC)
    # Germany has no substitute days: the 25th and 26th are holidays whatever their weekday.
    exclusions = {"holidays": [{"country": "DE"}], "dates": [f"{year}-12-24"], "weekdays": []}
    body = http_job(startTime=_z(start), recurrence={"frequency": "Day", "exclusions": exclusions})
    path = f"{collection_path(collection)}/previewOccurrences"

    skipped = api.post(path, params={"count": 3}, json=body).json()
    day = timedelta(days=1)
    assert skipped["value"] == [_z(start), _z(start + 4 * day), _z(start + 5 * day)]
    assert skipped["excluded"] == [
        {"scheduled": _z(start + day), "reason": "a blackout date"},
        {"scheduled": _z(start + 2 * day), "reason": "Christmas Day (public holiday, DE)"},
        {
            "scheduled": _z(start + 3 * day),
            "reason": "Second Day of Christmas (public holiday, DE)",
        },
    ]

    body["properties"]["recurrence"]["onExcluded"] = "NextBusinessDay"
    moved = api.post(path, params={"count": 3}, json=body).json()
    assert moved["value"] == [_z(start), _z(start + 4 * day), _z(start + 5 * day)]
    assert [entry.get("movedTo") for entry in moved["excluded"]] == [_z(start + 4 * day)] * 3

    plain = http_job(startTime=_z(start), recurrence={"frequency": "Day"})
    assert "excluded" not in api.post(path, params={"count": 3}, json=plain).json()


def test_the_console_lists_the_holiday_calendars_of_the_holidays_package(api: httpx.Client) -> None:
    answer = api.get("/console/api/holidays", params={})
    assert answer.status_code == 200, answer.text
    countries = {country["code"]: country for country in answer.json()["value"]}
    assert countries["DE"]["name"] == "Germany"
    assert {"code": "BY", "name": "Bayern"} in countries["DE"]["subdivisions"]
    assert {"code": "SCT", "name": "Scotland"} in countries["GB"]["subdivisions"]
    assert len(countries) > 100
