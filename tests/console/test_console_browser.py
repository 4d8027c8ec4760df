"""The web console in a real browser: headless Chromium driven by Playwright, against the local
host on Azurite (the session's `service`), with jobs made through the management API as a user's
scripts would make them.

`UPDATE_SCREENSHOTS=1` also writes the screenshot README shows, docs/images/console.png.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.conftest import ROOT, Service
from tests.targets import Target

CHROMIUM = os.environ.get("SCHEDULER_CHROMIUM", "/usr/bin/chromium")
# Chromium's background services reach for Google's hosts, which this machine's closed network
# refuses; a fresh profile per launch keeps runs independent.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
WAIT_MS = 15_000
SCREENSHOT = ROOT / "docs" / "images" / "console.png"

pytestmark = pytest.mark.timeout(120)
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: `make test` installs Debian's chromium; "
            "or set SCHEDULER_CHROMIUM to another Chromium"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    yield opened
    context.close()


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    server = Target()
    server.answer("/ok", 200, b"cleaned up 42 rows")
    yield server
    server.close()


@pytest.fixture
def collection(api: httpx.Client) -> str:
    """A fresh collection's ARM id, in a resource group of its own."""
    group, name = f"console-{secrets.token_hex(3)}", f"reports-{secrets.token_hex(2)}"
    collection_id = (
        f"/subscriptions/console-sub/resourceGroups/{group}"
        f"/providers/Microsoft.Scheduler/jobCollections/{name}"
    )
    body = {"location": "West Europe", "properties": {"sku": {"name": "Standard"}}}
    api.put(collection_id, json=body).raise_for_status()
    return collection_id


def put_job(api: httpx.Client, collection_id: str, name: str, properties: dict) -> dict:  # type: ignore[type-arg]
    response = api.put(f"{collection_id}/jobs/{name}", json={"properties": properties})
    assert response.status_code in (200, 201), response.text
    return response.json()  # type: ignore[no-any-return]


def weekly_job(uri: str, start: datetime) -> dict:  # type: ignore[type-arg]
    return {
        "startTime": start.isoformat().replace("+00:00", "Z"),
        "action": {"type": "Http", "request": {"uri": uri, "method": "POST"}},
        "recurrence": {
            "frequency": "Week",
            "schedule": {"weekDays": ["Monday", "Wednesday", "Friday"], "hours": [10, 22],
                         "minutes": [0]},
        },
    }  # fmt: skip


def sign_in(page: Page, service: Service, key: str | None = None) -> None:
    page.goto(f"{service.base_url}/console")
    page.get_by_label("Function key").fill(key or service.key)
    page.get_by_role("button", name="Sign in").click()


def open_collection(page: Page, collection_id: str) -> None:
    name = collection_id.rsplit("/", 1)[1]
    page.get_by_role("link", name=name, exact=True).click()
    expect(page.get_by_role("heading", name=f"Collection {name}")).to_be_visible()


def exact(instant: str) -> str:
    """An API time as the console prints it: to the second, in UTC."""
    return instant.replace("T", " ").split(".")[0].removesuffix("Z") + " UTC"


def soon() -> datetime:
    return (datetime.now(UTC) + timedelta(days=1)).replace(second=0, microsecond=0)


def test_the_console_asks_for_the_key_and_says_when_it_is_wrong(
    page: Page, service: Service
) -> None:
    page.goto(f"{service.base_url}/console")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    sign_in(page, service, key="not-the-key")
    expect(page.get_by_role("alert")).to_contain_text("refused (401)")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0

    page.get_by_label("Function key").fill(service.key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Job collections")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


def test_a_job_made_through_the_api_shows_its_next_run_and_its_schedule_in_words(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    job = put_job(api, collection, "twice-daily", weekly_job(target.url("/ok"), soon()))
    next_run = job["properties"]["status"]["nextExecutionTime"]

    sign_in(page, service)
    open_collection(page, collection)
    row = page.get_by_role("row").filter(has_text="twice-daily")
    expect(row).to_contain_text("Mondays, Wednesdays and Fridays at 10:00 and 22:00 UTC")
    expect(row).to_contain_text(exact(next_run))
    expect(row).to_contain_text("enabled")
    expect(row).to_contain_text("never")  # no run yet
    expect(page.get_by_role("img", name="twice-daily: no runs")).to_be_visible()  # 30 h away


def test_a_collection_shows_each_job_in_words_with_its_last_run_and_the_next_24_hours(
    page: Page, service: Service, api: httpx.Client, target: Target, tmp_path: Path
) -> None:
    group = f"console-demo-{secrets.token_hex(3)}"
    collection = (
        f"/subscriptions/console-sub/resourceGroups/{group}"
        "/providers/Microsoft.Scheduler/jobCollections/operations"
    )
    body = {"location": "North Europe", "properties": {"sku": {"name": "Standard"}}}
    api.put(collection, json=body).raise_for_status()
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    call = {"type": "Http", "request": {"uri": target.url("/ok"), "method": "POST"}}
    jobs = {
        "hourly-sync": {"frequency": "Hour", "schedule": {"minutes": [15, 45]}},
        "nightly-cleanup": {"frequency": "Day", "schedule": {"hours": [2], "minutes": [30]}},
        "month-end-report": {"frequency": "Month", "schedule": {"monthDays": [-1], "hours": [6],
                                                                "minutes": [0]}},
    }  # fmt: skip
    for name, recurrence in jobs.items():
        put_job(api, collection, name, {"startTime": start.isoformat(), "action": call,
                                        "recurrence": recurrence})  # fmt: skip
    api.post(f"{collection}/jobs/nightly-cleanup/run").raise_for_status()
    put_job(api, collection, "paused-export", weekly_job(target.url("/ok"), start) | {"state": "Disabled"})

    sign_in(page, service)
    open_collection(page, collection)
    rows = page.get_by_role("row")
    expect(rows.filter(has_text="hourly-sync")).to_contain_text("Every hour at :15 and :45")
    expect(rows.filter(has_text="nightly-cleanup")).to_contain_text("Every day at 02:30 UTC")
    expect(rows.filter(has_text="month-end-report")).to_contain_text("last day")
    expect(rows.filter(has_text="paused-export").locator(".badge")).to_have_text("disabled")
    expect(rows.filter(has_text="nightly-cleanup")).to_contain_text("Completed")  # run now ran
    expect(page.get_by_role("img", name="hourly-sync: 48 runs")).to_be_visible()
    expect(page.locator(".timeline .row")).to_have_count(3)  # the disabled job has none

    shot = tmp_path / "console.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("UPDATE_SCREENSHOTS"):
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        SCREENSHOT.write_bytes(shot.read_bytes())


def test_run_now_adds_a_history_entry_to_the_job_page(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    put_job(api, collection, "cleanup", weekly_job(target.url("/ok"), soon()))
    sign_in(page, service)
    open_collection(page, collection)
    page.get_by_role("link", name="cleanup", exact=True).click()
    expect(page.get_by_role("heading", name="Job cleanup")).to_be_visible()
    expect(page.get_by_text("No history yet.")).to_be_visible()

    page.get_by_role("button", name="Run cleanup now").click()
    history = page.get_by_role("row").filter(has_text="Completed")
    expect(history).to_have_count(1, timeout=WAIT_MS)  # the page refreshes itself
    expect(history).to_contain_text("'200 OK' Body: cleaned up 42 rows")
    expect(page.get_by_text("1 runs, 0 failed, 0 faulted")).to_be_visible()

    page.get_by_label("Status").select_option("Failed")
    expect(page.get_by_text("No history yet.")).to_be_visible()


def test_disabling_a_job_shows_in_the_list_and_in_the_api(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    put_job(api, collection, "nightly", weekly_job(target.url("/ok"), soon()))
    sign_in(page, service)
    open_collection(page, collection)
    row = page.get_by_role("row").filter(has_text="nightly")
    row.get_by_role("button", name="Disable nightly").click()
    expect(row.locator(".badge")).to_have_text("disabled")
    expect(row).to_contain_text("none")  # no next run while disabled
    assert api.get(f"{collection}/jobs/nightly").json()["properties"]["state"] == "disabled"

    row.get_by_role("button", name="Enable nightly").click()
    expect(row.locator(".badge")).to_have_text("enabled")


def test_disabling_a_collection_shows_on_its_page(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    put_job(api, collection, "hourly", weekly_job(target.url("/ok"), soon()))
    sign_in(page, service)
    open_collection(page, collection)
    name = collection.rsplit("/", 1)[1]
    page.get_by_role("button", name=f"Disable collection {name}").click()
    expect(page.locator(".facts .badge")).to_have_text("Disabled")
    expect(page.get_by_role("row").filter(has_text="hourly").locator(".badge")).to_have_text(
        "disabled"
    )
    assert api.get(collection).json()["properties"]["state"] == "Disabled"


def test_delete_asks_first(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    put_job(api, collection, "doomed", weekly_job(target.url("/ok"), soon()))
    sign_in(page, service)
    open_collection(page, collection)
    page.get_by_role("button", name="Delete doomed").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delete job doomed?")
    dialog.get_by_role("button", name="Cancel").click()
    assert api.get(f"{collection}/jobs/doomed").status_code == 200

    page.get_by_role("button", name="Delete doomed").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete job doomed").click()
    expect(page.get_by_role("row").filter(has_text="doomed")).to_have_count(0)
    assert api.get(f"{collection}/jobs/doomed").status_code == 404


def test_the_job_page_never_shows_a_secret(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    properties = weekly_job(target.url("/ok?sig=s3cr3t-sig&day=1"), soon())
    properties["action"]["request"] |= {
        "authentication": {"type": "Basic", "username": "ops", "password": "pa55-w0rd"},
        "headers": {"X-Api-Key": "k3y-value", "Accept": "text/plain"},
    }
    put_job(api, collection, "guarded", properties)
    sign_in(page, service)
    open_collection(page, collection)
    page.get_by_role("link", name="guarded", exact=True).click()
    expect(page.locator("pre.definition")).to_contain_text('"username": "ops"')
    text = page.locator("body").inner_text()
    for secret in ("s3cr3t-sig", "pa55-w0rd", "k3y-value"):
        assert secret not in text
    expect(page.locator("pre.definition")).to_contain_text("day=1")


def test_the_keyboard_alone_signs_in_and_opens_a_job(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    put_job(api, collection, "by-keys", weekly_job(target.url("/ok"), soon()))
    page.goto(f"{service.base_url}/console")
    page.keyboard.type(service.key)  # the key field has the focus from the start
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Job collections")).to_be_visible()

    group, name = collection.split("/")[4], collection.rsplit("/", 1)[1]
    page.goto(f"{service.base_url}/console#/collections/console-sub/{group}/{name}")
    expect(page.get_by_role("heading", name=f"Collection {name}")).to_be_visible()
    for _ in range(30):  # the skip link, the header's links and buttons, then the page's own
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "by-keys":
            break
    else:
        pytest.fail("Tab never reached the link to the job")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Job by-keys")).to_be_visible()


def test_a_phone_sized_screen_shows_each_job_as_a_labelled_card(
    browser: Browser, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    put_job(api, collection, "pocket", weekly_job(target.url("/ok"), soon()))
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    try:
        sign_in(page, service)
        open_collection(page, collection)
        card = page.get_by_role("row").filter(has_text="pocket")
        expect(card).to_be_visible()
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], f"the page scrolls sideways: {widths}"
        label = card.locator("td[data-label='Next run']")
        assert "Next run" in label.evaluate("cell => getComputedStyle(cell, '::before').content")
    finally:
        context.close()
