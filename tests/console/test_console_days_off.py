"""The job form's days off (docs/console.md), in headless Chromium against the local host: a
holiday calendar picked from the `holidays` package's own list, blackout dates, the preview
marking the runs they skip or move, and an existing job's exclusions saved back unchanged.

`UPDATE_SCREENSHOTS=1` also writes docs/images/console-days-off.png.
"""

# The browser fixtures are test_console_browser.py's, imported: the tests' parameters name them.
# ruff: noqa: F811

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.conftest import ROOT, Service
from tests.console.test_console_browser import (  # noqa: F401 (fixtures used by name)
    axe_problems,
    browser,
    collection,
    collection_hash,
    new_job_form,
    page,
    put_job,
    screenshot,
    sign_in,
    target,
)
from tests.targets import Target

DAYS_OFF_SCREENSHOT = ROOT / "docs" / "images" / "console-days-off.png"
# The coming Christmas (a job starts at most 18 months ahead): daily at 09:00 in Berlin from the
# 22nd, the five runs previewed are the 22nd, 23rd, 24th, 27th and 28th, as the 25th and 26th
# are public holidays in Bavaria (and in all of Germany).
TODAY = datetime.now(UTC)
YEAR = TODAY.year if (TODAY.month, TODAY.day) < (12, 20) else TODAY.year + 1
START_WALL = f"{YEAR}-12-22T09:00:00"


def test_a_job_with_a_german_holiday_calendar_is_made_in_the_form_and_its_preview_marks_the_holiday(
    page: Page,
    service: Service,
    api: httpx.Client,
    collection: str,
    target: Target,
    *,
    tmp_path: Path,
) -> None:
    sign_in(page, service)
    new_job_form(page, service, collection)
    page.get_by_label("Name", exact=True).fill("bavarian-mornings")
    page.get_by_label("URI").first.fill(target.url("/ok").replace("http:", "https:"))
    page.get_by_label("Unit").select_option("Day")
    page.get_by_label("At hours").fill("9")
    page.get_by_label("At minutes").fill("0")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_label("Start time (Europe/Berlin)").fill(START_WALL)
    # The countries and regions come from the service (the holidays package), not the page.
    page.get_by_label("Country").select_option("DE")
    page.get_by_label("Region (optional)").select_option("BY")
    page.get_by_role("button", name="Add holiday calendar").click()
    expect(page.locator(".chosen-days").first).to_contain_text("Bayern, Germany (DE-BY)")
    page.get_by_label("From").fill(f"{YEAR}-12-31")
    page.get_by_role("button", name="Add dates").click()
    expect(page.get_by_role("button", name=f"Remove {YEAR}-12-31")).to_be_visible()

    preview = page.get_by_role("region", name="Preview")
    expect(preview).to_contain_text("except public holidays in Bayern, Germany")
    skipped = page.get_by_role("list", name="Runs the days off skip or move").get_by_role("listitem")
    expect(skipped).to_have_count(2)  # the 25th and 26th; the 31st is past the five runs shown
    expect(skipped.first).to_contain_text("Skipped:")
    expect(skipped.first).to_contain_text("Christmas Day (public holiday, DE-BY)")
    expect(skipped.first).to_contain_text("Europe/Berlin")

    page.get_by_label("A run that falls on a day off").select_option("NextBusinessDay")
    expect(skipped.first).to_contain_text("Moved:")
    expect(skipped.first).to_contain_text("runs at")
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, DAYS_OFF_SCREENSHOT, tmp_path)
    assert axe_problems(page) == []

    page.get_by_role("button", name="Create job").click()
    expect(page.get_by_role("heading", name="Job bavarian-mornings")).to_be_visible()
    recurrence = api.get(f"{collection}/jobs/bavarian-mornings").json()["properties"]["recurrence"]
    assert recurrence["exclusions"] == {
        "holidays": [{"country": "DE", "subdivision": "BY"}],
        "dates": [f"{YEAR}-12-31"],
    }
    assert recurrence["onExcluded"] == "NextBusinessDay"


def test_an_existing_jobs_exclusions_are_shown_and_saved_back_unchanged(
    page: Page,
    service: Service,
    api: httpx.Client,
    collection: str,
    target: Target,
) -> None:
    exclusions = {
        "holidays": [{"country": "gb", "subdivision": "SCT"}, {"country": "US"}],
        "dates": [f"{YEAR}-12-24", {"from": f"{YEAR}-12-28", "to": f"{YEAR + 1}-01-02"}],
        "weekdays": ["saturday", "Sunday"],
    }
    properties = {
        "startTime": f"{YEAR}-12-20T09:00:00Z",
        "action": {"type": "Http", "request": {"uri": target.url("/ok"), "method": "POST"}},
        "recurrence": {"frequency": "Day", "interval": 1, "exclusions": exclusions,
                       "onExcluded": "PreviousBusinessDay"},
    }  # fmt: skip
    before = put_job(api, collection, "kept-days-off", properties)["properties"]["recurrence"]
    sign_in(page, service)
    page.goto(f"{service.base_url}/console{collection_hash(collection)}/jobs/kept-days-off/edit")
    expect(page.get_by_role("heading", name="Edit job kept-days-off")).to_be_visible()
    chosen = page.locator(".chosen-days")
    expect(chosen.first).to_contain_text("Scotland, United Kingdom (gb-SCT)")
    expect(chosen.nth(1)).to_contain_text(f"{YEAR}-12-28 to {YEAR + 1}-01-02")
    expect(page.get_by_role("group", name="Weekdays that are not business days").get_by_label("Saturday")).to_be_checked()
    expect(page.get_by_label("A run that falls on a day off")).to_have_value("PreviousBusinessDay")
    expect(page.get_by_role("list", name="Runs the days off skip or move")).to_contain_text("Moved:")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Job kept-days-off was saved.")
    after = api.get(f"{collection}/jobs/kept-days-off").json()["properties"]["recurrence"]
    assert after == before
    # as sent: "gb" not upper-cased, a single date not turned into a range
    assert (after["exclusions"]["holidays"], after["exclusions"]["dates"]) == (exclusions["holidays"], exclusions["dates"])


def test_the_collections_timeline_marks_the_runs_skipped_on_a_blackout_date(
    page: Page,
    service: Service,
    api: httpx.Client,
    collection: str,
    target: Target,
) -> None:
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    properties = {
        "action": {"type": "Http", "request": {"uri": target.url("/ok"), "method": "POST"}},
        "startTime": (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0).isoformat(),
        "recurrence": {"frequency": "Hour", "interval": 1, "exclusions": {"dates": [tomorrow]}},
    }
    put_job(api, collection, "hourly-but-tomorrow", properties)
    sign_in(page, service)
    page.goto(f"{service.base_url}/console{collection_hash(collection)}")
    track = page.get_by_role("img", name="hourly-but-tomorrow: ", exact=False)
    expect(track).to_have_attribute("aria-label", re.compile(rf"Skipped: {tomorrow} \d\d:\d\d:\d\d UTC, a blackout date"))
    marks = track.locator(".day-off")
    expect(marks.first).to_have_text("⊘")  # a symbol beside the colour, and the reason in its title
    expect(marks.first).to_have_attribute("title", re.compile(r"^Skipped: .*, a blackout date$"))
    expect(page.get_by_text("⊘ a run skipped on a day off")).to_be_visible()
