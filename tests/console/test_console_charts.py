"""The console's charts of runs over time (charts.js) in headless Chromium, against the local host
on Azurite: drawn from history entries written straight to the job's table, so that a day and a
week of runs exist at once. Checked with axe; `UPDATE_SCREENSHOTS=1` writes the screenshots
docs/console.md shows."""

# The browser fixtures are test_console_browser.py's, imported: the tests' parameters name them.
# ruff: noqa: F811

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Locator, Page, expect

from shared.domain.history import entry_id
from shared.domain.ids import CollectionId, JobId
from shared.domain.wire import iso
from shared.storage.table_store import table_storage_from_connection_string
from tests.conftest import ROOT, Service
from tests.console.test_console_browser import (  # noqa: F401 (fixtures)
    axe_problems,
    browser,
    collection,
    collection_hash,
    page,
    put_job,
    sign_in,
    soon,
    target,
    weekly_job,
)
from tests.targets import Target

JOB_CHARTS = ROOT / "docs" / "images" / "console-charts-job.png"
COLLECTION_CHARTS = ROOT / "docs" / "images" / "console-charts-collection.png"


def entry(
    expected: datetime, status: str, *, late_ms: int, took_ms: int, retry: int = 0
) -> tuple[str, dict[str, Any]]:
    started = expected + timedelta(milliseconds=late_ms)
    return entry_id(expected, retry, False), {
        "startTime": iso(started), "endTime": iso(started + timedelta(milliseconds=took_ms)),
        "expectedExecutionTime": iso(expected), "actionName": "MainAction", "status": status,
        "message": f"{status} (seeded)", "retryCount": retry, "repeatCount": 1,
    }  # fmt: skip


def seed_history(service: Service, collection_id: str, name: str) -> dict[str, int]:
    """A run every hour of the last day (every fifth failed, one postponed), and one a day for
    the five days before; how many of each the last day holds."""
    parts = collection_id.split("/")
    job = JobId(CollectionId(parts[2], parts[4], parts[8]), name)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    entries = []
    for back in range(1, 24):
        status = "Postponed" if back == 7 else "Failed" if back % 5 == 0 else "Completed"
        entries.append(
            entry(hour - timedelta(hours=back), status, late_ms=40 * back, took_ms=150 + 20 * back)
        )
    for day in range(2, 7):
        entries.append(entry(hour - timedelta(days=day), "Completed", late_ms=3000, took_ms=900))
    table_storage_from_connection_string(service.storage).history.add(job, entries)
    return {"completed": 18, "failed": 4, "postponed": 1}


def screenshot(part: Locator, kept: Path, tmp_path: Path) -> None:
    shot = tmp_path / kept.name
    part.screenshot(path=str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("UPDATE_SCREENSHOTS"):
        kept.write_bytes(shot.read_bytes())


def test_the_job_page_charts_outcomes_lateness_and_response_time_for_a_day_and_a_week(
    page: Page,
    service: Service,
    api: httpx.Client,
    collection: str,
    target: Target,
    *,
    tmp_path: Path,
) -> None:
    put_job(api, collection, "hourly", weekly_job(target.url("/ok"), soon()))
    seed_history(service, collection, "hourly")
    sign_in(page, service)
    page.goto(f"{service.base_url}/console{collection_hash(collection)}/jobs/hourly")
    charts = page.get_by_role("region", name="Runs: last 24 hours")
    outcomes = charts.get_by_role("img", name=re.compile(r"^Runs by outcome"))
    expect(outcomes).to_have_accessible_name(
        "Runs by outcome, per hour: 18 completed, 4 failed, 1 postponed or skipped"
    )
    # Failed and postponed bars are patterned, not only coloured; each bar says its numbers.
    expect(outcomes.locator("rect[fill^='url(#chart-hatch)']")).to_have_count(4)
    expect(outcomes.locator("rect[fill^='url(#chart-dots)']")).to_have_count(1)
    expect(
        charts.get_by_role("img", name=re.compile(r"^Highest lateness and response time per hour"))
    ).to_be_visible()
    expect(charts.locator("circle title").first).to_contain_text("lateness")
    screenshot(charts, JOB_CHARTS, tmp_path)
    charts.get_by_text("The numbers behind the charts").click()
    table = charts.get_by_role("table")
    expect(table.get_by_role("row")).to_have_count(1 + 23)
    expect(table.get_by_role("row").nth(1)).to_contain_text("40 ms")  # the newest hour: 40 ms late
    assert axe_problems(page) == []

    charts.get_by_role("button", name="Last 7 days").click()
    week = page.get_by_role("region", name="Runs: last 7 days")
    expect(week.get_by_role("button", name="Last 7 days")).to_have_attribute("aria-pressed", "true")
    expect(week.get_by_role("img", name=re.compile(r"^Runs by outcome"))).to_have_accessible_name(
        "Runs by outcome, per 6 hours: 23 completed, 4 failed, 1 postponed or skipped"
    )
    expect(week.locator("circle title").filter(has_text="3.0 s")).to_have_count(
        5
    )  # the older, slower days
    assert axe_problems(page) == []
    week.get_by_role("button", name="Last 24 hours").click()  # the choice stays for other pages
    expect(page.get_by_role("region", name="Runs: last 24 hours")).to_be_visible()


def test_the_collection_page_charts_every_jobs_runs_beside_the_timeline(
    page: Page,
    service: Service,
    api: httpx.Client,
    collection: str,
    target: Target,
    *,
    tmp_path: Path,
) -> None:
    for name in ("first", "second"):
        put_job(api, collection, name, weekly_job(target.url("/ok"), soon()))
        seed_history(service, collection, name)
    put_job(api, collection, "never-ran", weekly_job(target.url("/ok"), soon()))
    sign_in(page, service)
    page.get_by_role("link", name=collection.rsplit("/", 1)[1], exact=True).click()
    charts = page.get_by_role("region", name="Runs: last 24 hours")
    expect(charts.get_by_role("img", name=re.compile(r"^Runs by outcome"))).to_have_accessible_name(
        "Runs by outcome, per hour: 36 completed, 8 failed, 2 postponed or skipped"
    )
    expect(page.get_by_role("heading", name="Next 24 hours")).to_be_visible()
    assert axe_problems(page) == []
    screenshot(charts, COLLECTION_CHARTS, tmp_path)
