"""The web console in a real browser: headless Chromium driven by Playwright, against the local
host on Azurite (the session's `service`), with jobs made through the management API as a user's
scripts would make them.

`UPDATE_SCREENSHOTS=1` also writes the screenshot README shows, docs/images/console.png.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from azure.core.exceptions import ResourceExistsError
from azure.storage.queue import QueueClient
from playwright.sync_api import Browser, Page, expect, sync_playwright

from shared.domain.attempts import Claim
from shared.domain.ids import CollectionId, JobId
from shared.storage.interface import Stored
from shared.storage.table_store import table_storage_from_connection_string
from tests.api.test_templates import QUICKSTARTS
from tests.conftest import ROOT, SAS_KEY, SAS_KEY_NAME, Service
from tests.targets import Target

CHROMIUM = os.environ.get("SCHEDULER_CHROMIUM", "/usr/bin/chromium")
# Chromium's background services reach for Google's hosts, which this machine's closed network
# refuses; a fresh profile per launch keeps runs independent.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
WAIT_MS = 15_000
FOLLOWED_MS = 6_000  # an action's effect, which the page follows, shows before a refresh would
SCREENSHOT = ROOT / "docs" / "images" / "console.png"
FORM_SCREENSHOT = ROOT / "docs" / "images" / "console-job-form.png"
TROUBLE_SCREENSHOT = ROOT / "docs" / "images" / "console-trouble.png"
ATTENTION_SCREENSHOT = ROOT / "docs" / "images" / "console-attention.png"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"

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
    answer = page.goto(f"{service.base_url}/console")
    assert answer is not None
    policy = answer.headers["content-security-policy"]  # nothing from elsewhere, nothing inline
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
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

    expect(page.get_by_text("one run (point at it for its time)")).to_be_visible()  # the legend
    screenshot(page, SCREENSHOT, tmp_path)


def screenshot(page: Page, kept: Path, tmp_path: Path) -> None:
    """A full-page screenshot; with UPDATE_SCREENSHOTS=1 also the docs' copy at `kept`."""
    shot = tmp_path / kept.name
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("UPDATE_SCREENSHOTS"):
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(shot.read_bytes())


def test_run_now_adds_a_history_entry_to_the_job_page(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    put_job(api, collection, "cleanup", weekly_job(target.url("/ok"), soon()))
    sign_in(page, service)
    open_collection(page, collection)
    page.get_by_role("link", name="cleanup", exact=True).click()
    expect(page.get_by_role("heading", name="Job cleanup")).to_be_visible()
    expect(page.get_by_text("No history yet.")).to_be_visible()

    page.get_by_role("button", name="Run now: cleanup").click()
    expect(page.get_by_role("status")).to_contain_text("cleanup was started")  # at once
    history = page.get_by_role("row").filter(has_text="Completed")
    # Well within the 10 s of a regular refresh: the page follows the run it started.
    expect(history).to_have_count(1, timeout=FOLLOWED_MS)
    expect(history).to_contain_text("'200 OK' Body: cleaned up 42 rows")
    expect(page.get_by_role("status")).to_have_text("cleanup ran: Completed.")
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
        "headers": {"X-Api-Key": "k3y-value", "Accept": "text/plain",
                    "X-Note": "<img src=x onerror=window.pwned=1>"},
    }  # fmt: skip
    put_job(api, collection, "guarded", properties)
    sign_in(page, service)
    open_collection(page, collection)
    page.get_by_role("link", name="guarded", exact=True).click()
    expect(page.locator("pre.definition")).to_contain_text('"username": "ops"')
    text = page.locator("body").inner_text()
    for secret in ("s3cr3t-sig", "pa55-w0rd", "k3y-value"):
        assert secret not in text
    expect(page.locator("pre.definition")).to_contain_text("day=1")
    # What a job holds is shown as text, never parsed as HTML; its edit form likewise.
    expect(page.locator("pre.definition")).to_contain_text("<img src=x onerror=window.pwned=1>")
    page.get_by_role("link", name="Edit guarded").click()
    expect(page.get_by_label("Headers")).to_have_value(re.compile("X-Note: <img src=x"))
    assert page.locator("#view img").count() == 0
    assert page.evaluate("window.pwned") is None


def tab_to(page: Page, read: str, wanted: str) -> None:
    """Presses Tab until the focused element's `read` (JavaScript) is `wanted`."""
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate(read) == wanted:
            return
    pytest.fail(f"Tab never reached {wanted}")


def test_the_keyboard_alone_signs_in_opens_a_job_and_runs_it(
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
    # The skip link, the header's links and buttons, then the page's own.
    tab_to(page, "document.activeElement.textContent", "by-keys")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Job by-keys")).to_be_visible()
    tab_to(page, "document.activeElement.getAttribute('aria-label')", "Run now: by-keys")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("by-keys was started")


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
        page.get_by_role("link", name="New job").click()  # the form, its preview under it
        expect(page.get_by_role("region", name="Preview")).to_contain_text("Every hour")  # the schedule alone
        expect(page.locator("[aria-invalid]")).to_have_count(0)  # nothing is wrong before typing
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], f"the form scrolls sideways: {widths}"
    finally:
        context.close()


def collection_hash(collection_id: str) -> str:
    parts = collection_id.split("/")
    return f"#/collections/{parts[2]}/{parts[4]}/{parts[8]}"


def new_job_form(page: Page, service: Service, collection_id: str) -> None:
    page.goto(f"{service.base_url}/console{collection_hash(collection_id)}")
    page.get_by_role("link", name="New job").click()
    expect(page.get_by_role("heading", name="New job")).to_be_visible()


def fill_action(page: Page, kind: str, target: Target) -> None:
    """The main action's fields for an action of `kind`, as a user types them."""
    page.get_by_label("Type", exact=True).first.select_option(kind)
    if kind in ("Http", "Https"):
        page.get_by_label("Method").first.select_option("POST")
        scheme_url = target.url("/ok").replace("http:", "https:" if kind == "Https" else "http:")
        page.get_by_label("URI").first.fill(scheme_url)
        page.get_by_label("Headers").first.fill("X-Job: from-the-form")
        page.get_by_label("Authentication").first.select_option("Basic")
        page.get_by_label("User name").fill("ops")
        page.get_by_label("Password", exact=True).fill("pa55-w0rd")
    elif kind == "StorageQueue":
        page.get_by_label("Storage account").fill("devstoreaccount1")
        page.get_by_label("Queue", exact=True).fill("orders")
        page.get_by_label("SAS token").fill("sv=2020&sig=form-sig")
        page.get_by_label("Message", exact=True).first.fill("from the form")
    else:
        page.get_by_label("Namespace").fill("orders-ns")
        entity = "Topic" if kind == "ServiceBusTopic" else "Queue"
        page.get_by_label(entity, exact=True).fill("reports" if entity == "Topic" else "orders")
        page.get_by_label("Key name").fill(SAS_KEY_NAME)
        page.get_by_label("Key", exact=True).fill(SAS_KEY)
        page.get_by_label("Message", exact=True).first.fill("from the form")


def test_a_job_of_each_action_type_is_made_through_the_form(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    sign_in(page, service)
    start = soon().strftime("%Y-%m-%dT%H:%M:%S")  # the picker's wall time, in UTC (no time zone)
    kinds = ["Https", "Http", "StorageQueue", "ServiceBusQueue", "ServiceBusTopic"]
    for kind in kinds:
        new_job_form(page, service, collection)
        name = f"made-{kind.lower()}"
        page.get_by_label("Name", exact=True).fill(name)
        page.get_by_label("Start time (UTC)").fill(start)  # tomorrow: nothing runs meanwhile
        fill_action(page, kind, target)
        page.get_by_label("Retries").first.select_option("Fixed")
        page.get_by_label("Retry interval").first.fill("PT1M")
        page.get_by_label("Retry count").first.fill("2")
        page.get_by_role("button", name="Create job").click()
        expect(page.get_by_role("heading", name=f"Job {name}")).to_be_visible()
        expect(page.get_by_role("status")).to_have_text(f"Job {name} was created.")

    for kind in kinds:
        made = api.get(f"{collection}/jobs/made-{kind.lower()}").json()["properties"]
        assert made["action"]["type"] == kind
        policy = made["action"]["retryPolicy"]
        assert (policy["retryType"].lower(), policy["retryInterval"], policy["retryCount"]) == ("fixed", "PT1M", 2)
        assert (made["recurrence"]["frequency"].lower(), made["recurrence"]["interval"]) == ("hour", 1)
        assert made["startTime"] == f"{start}Z"  # the picked wall time, in UTC
    https = api.get(f"{collection}/jobs/made-https").json()["properties"]["action"]["request"]
    assert https["headers"] == {"X-Job": "from-the-form"}
    assert https["authentication"] == {"type": "Basic", "username": "ops"}  # the password is kept, unshown


def test_the_preview_follows_the_schedule_and_a_field_shows_its_error(
    page: Page, service: Service, collection: str, target: Target, tmp_path: Path
) -> None:
    sign_in(page, service)
    new_job_form(page, service, collection)
    page.get_by_label("Name", exact=True).fill("berlin-morning")
    page.get_by_label("URI").first.fill(target.url("/ok").replace("http:", "https:"))
    preview = page.get_by_role("region", name="Preview")
    expect(preview).to_contain_text("Every hour")

    page.get_by_label("Unit").select_option("Day")
    page.get_by_label("At hours").fill("6")
    page.get_by_label("At minutes").fill("30")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    expect(preview).to_contain_text("Every day at 06:30 Europe/Berlin")
    expect(preview.get_by_role("listitem")).to_have_count(5)
    # The first run is on saving (no start time), then the schedule's: local time and UTC.
    expect(preview.get_by_role("listitem").nth(1)).to_contain_text(re.compile(r" 06:30:\d\d Europe/Berlin"))
    expect(preview.get_by_role("listitem").nth(1)).to_contain_text(re.compile(r" 0[45]:30:\d\d UTC"))

    minutes = page.get_by_label("At minutes")
    minutes.fill("30, 75")
    error = page.locator("#f-recurrence-schedule-minutes-error")
    expect(error).to_contain_text("75")  # the API's own words, beside the field they name
    expect(minutes).to_have_attribute("aria-invalid", "true")
    expect(preview).to_contain_text("Fix what is marked")
    minutes.fill("30")
    expect(error).to_be_empty()
    expect(preview.get_by_role("listitem")).to_have_count(5)
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, FORM_SCREENSHOT, tmp_path)

    page.get_by_label("Start time (Europe/Berlin)").fill(soon().strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_role("button", name="Create job").click()
    expect(page.get_by_role("heading", name="Job berlin-morning")).to_be_visible()
    next_occurrence = page.locator("ol.occurrences time").nth(1)
    expect(next_occurrence).to_contain_text(" 06:30:00 Europe/Berlin")  # local time next to UTC
    expect(next_occurrence).to_contain_text(re.compile(r" 0[45]:30:00 UTC"))


def test_the_schedule_previews_before_the_action_is_right_and_save_marks_every_problem_at_once(
    page: Page, service: Service, collection: str
) -> None:
    sign_in(page, service)
    new_job_form(page, service, collection)
    preview = page.get_by_role("region", name="Preview")
    page.get_by_label("Unit").select_option("Day")
    page.get_by_label("At hours").fill("7")
    page.get_by_label("At minutes").fill("0")
    expect(preview).to_contain_text("Every day at 07:00 UTC")  # no URI yet: the schedule alone
    expect(preview.get_by_role("listitem")).to_have_count(5)

    uri = page.get_by_label("URI").first
    uri.fill("not a url")
    expect(page.locator("#f-action-request-uri-error")).to_have_text(
        "must be an absolute https URL, such as https://example.com/path")
    expect(preview.get_by_role("listitem")).to_have_count(5)  # still previewed

    page.get_by_label("Start time (UTC)").fill("2027-03-01T08:00:00")
    page.get_by_label("End time (UTC)").fill("2027-02-01T00:00:00")  # before the start
    end_error = page.locator("#f-recurrence-endTime-error")
    expect(end_error).to_contain_text("is not after the start time: the job would never run")
    expect(page.get_by_label("End time (UTC)")).to_have_attribute("aria-invalid", "true")

    page.get_by_role("button", name="Create job").click()  # no name, a bad URI, an end before the start
    expect(page.locator("#f-name-error")).to_contain_text("A job needs a name")
    expect(page.locator("#f-action-request-uri-error")).to_contain_text("must be an absolute https URL")
    expect(end_error).to_contain_text("is not after the start time")
    expect(page.locator(".editor [aria-invalid='true']")).to_have_count(3)
    expect(page.get_by_role("heading", name="New job")).to_be_visible()  # nothing was saved

    page.get_by_label("End time (UTC)").fill("2027-06-01T00:00:00")
    expect(end_error).to_be_empty()


def test_start_and_end_times_are_picked_on_the_jobs_own_clock(page: Page, service: Service, collection: str) -> None:
    sign_in(page, service)
    new_job_form(page, service, collection)
    page.get_by_label("Unit").select_option("Day")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_label("Start time (Europe/Berlin)").fill("2027-07-01T08:00:00")  # summer: UTC+2
    page.get_by_label("End time (Europe/Berlin)").fill("2027-12-31T18:30:00")  # winter: UTC+1
    definition = json.loads(page.get_by_label("Job properties (JSON)").input_value())
    assert definition["startTime"] == "2027-07-01T08:00:00+02:00"
    assert definition["recurrence"]["endTime"] == "2027-12-31T18:30:00+01:00"
    expect(page.get_by_role("region", name="Preview")).to_contain_text("2027-07-01 06:00:00 UTC")

    page.get_by_label("Time zone").fill("")  # the same instants, now on the UTC clock
    expect(page.get_by_label("Start time (UTC)")).to_have_value("2027-07-01T06:00")  # no seconds when 0
    expect(page.get_by_label("End time (UTC)")).to_have_value("2027-12-31T17:30")
    page.get_by_label("Time zone").fill("W. Europe Standard Time")  # the API's, not the browser's
    expect(page.get_by_label("Start time (UTC)")).to_be_visible()
    expect(page.locator("#f-startTime-help")).to_contain_text("this browser does not know the time zone W. Europe Standard Time")


def test_an_edit_saves_the_change_and_keeps_the_stored_secret(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    target.answer("/guarded", 200, b"let in")
    properties = weekly_job(target.url("/guarded"), soon())
    properties["action"]["request"]["authentication"] = {"type": "Basic", "username": "ops", "password": "pa55-w0rd"}
    put_job(api, collection, "guarded", properties)
    sign_in(page, service)
    page.goto(f"{service.base_url}/console{collection_hash(collection)}/jobs/guarded")
    page.get_by_role("link", name="Edit guarded").click()
    expect(page.get_by_role("heading", name="Edit job guarded")).to_be_visible()
    password = page.get_by_label("Password", exact=True)
    expect(password).to_have_value("")  # write-only: never shown
    expect(password).to_have_attribute("placeholder", "•••••• (kept)")
    page.get_by_label("At hours").fill("9")
    page.get_by_role("group", name="On days of the week").get_by_label("Wednesday").uncheck()
    expect(page.get_by_role("region", name="Preview")).to_contain_text("Mondays and Fridays at 09:00 UTC")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Job guarded was saved.")
    expect(page.locator(".facts")).to_contain_text("Mondays and Fridays at 09:00 UTC")

    saved = api.get(f"{collection}/jobs/guarded").json()["properties"]
    schedule = saved["recurrence"]["schedule"]
    assert ([day.lower() for day in schedule["weekDays"]], schedule["hours"], schedule["minutes"]) == (
        ["monday", "friday"], [9], [0],
    )  # fmt: skip
    api.post(f"{collection}/jobs/guarded/run").raise_for_status()
    (call,) = target.wait_for("/guarded")
    assert call.headers["authorization"] == "Basic b3BzOnBhNTUtdzByZA=="  # ops:pa55-w0rd, kept


def test_a_collection_is_made_and_edited_through_its_form(
    page: Page, service: Service, api: httpx.Client
) -> None:
    group, name = f"console-{secrets.token_hex(3)}", f"made-{secrets.token_hex(2)}"
    sign_in(page, service)
    page.get_by_role("link", name="New collection").click()
    page.get_by_label("Subscription").fill("console-sub")
    page.get_by_label("Resource group").fill(group)
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Location").fill("North Europe")
    page.get_by_label("Plan").select_option("Free")
    page.get_by_label("Most jobs").fill("0")
    page.get_by_role("button", name="Create collection").click()
    expect(page.locator("#f-properties-quota-maxJobCount-error")).not_to_be_empty()  # beside it
    page.get_by_label("Most jobs").fill("3")
    page.get_by_role("button", name="Create collection").click()
    expect(page.get_by_role("heading", name=f"Collection {name}")).to_be_visible()

    page.get_by_role("link", name=f"Edit collection {name}").click()
    page.get_by_label("Plan").select_option("Standard")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text(f"Collection {name} was saved.")
    expect(page.locator(".facts")).to_contain_text("Standard")
    path = f"/subscriptions/console-sub/resourceGroups/{group}/providers/Microsoft.Scheduler/jobCollections/{name}"
    assert api.get(path).json()["location"] == "North Europe"


def test_a_failing_job_is_marked_on_the_overview_and_on_its_collection(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target, *,
    tmp_path: Path,
) -> None:
    target.answer("/broken", 500, b"database is down")
    failing = weekly_job(target.url("/broken"), soon())
    failing["action"]["retryPolicy"] = {"retryType": "None"}
    put_job(api, collection, "nightly-import", failing)
    put_job(api, collection, "healthy", weekly_job(target.url("/ok"), soon()))
    api.post(f"{collection}/jobs/nightly-import/run").raise_for_status()
    target.wait_for("/broken")

    sign_in(page, service)
    name = collection.rsplit("/", 1)[1]
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=name, exact=True))
    expect(row).to_contain_text("1 last run failed")  # the overview refreshes until recorded
    expect(row.locator(".trouble.failing")).to_be_visible()
    open_collection(page, collection)
    expect(page.get_by_role("row").filter(has_text="nightly-import")).to_contain_text("Last run failed")
    expect(page.get_by_role("row").filter(has_text="healthy").locator(".trouble")).to_have_count(0)
    screenshot(page, TROUBLE_SCREENSHOT, tmp_path)


WIDTHS = {"desktop-1280": (1280, 900), "laptop-1024": (1024, 768), "phone-390": (390, 844)}


@pytest.mark.parametrize("screen", WIDTHS)
def test_a_collection_with_long_names_and_a_job_in_trouble_fits_the_screen(
    browser: Browser, service: Service, api: httpx.Client, collection: str, target: Target, *, screen: str,
    tmp_path: Path,
) -> None:
    target.answer("/fits-broken", 500, b"down")
    failing = weekly_job(target.url("/fits-broken/with-a-rather-long-path-that-has-no-spaces-at-all"), soon())
    failing["action"]["retryPolicy"] = {"retryType": "None"}
    put_job(api, collection, "failing-hourly-sync-of-customer-accounts", failing)
    put_job(api, collection, "cleanup-old-invoices-and-receipts", weekly_job(target.url("/ok"), soon()))
    api.post(f"{collection}/jobs/failing-hourly-sync-of-customer-accounts/run").raise_for_status()
    target.wait_for("/fits-broken/with-a-rather-long-path-that-has-no-spaces-at-all")
    width, height = WIDTHS[screen]
    context = browser.new_context(viewport={"width": width, "height": height}, is_mobile=width < 700)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    try:
        sign_in(page, service)
        open_collection(page, collection)
        failing_row = page.get_by_role("row").filter(has_text="failing-hourly-sync-of-customer-accounts")
        expect(failing_row).to_contain_text("Last run failed")
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], f"the page scrolls sideways at {screen}: {widths}"
        bar = page.locator(".bar").bounding_box()
        assert bar is not None and bar["width"] >= width - 1, f"the header bar stops short: {bar}"
        controls = failing_row.locator(".actions > *")
        expect(controls).to_have_count(4)  # Run now, Edit, Disable, Delete: each in reach, none clipped
        for control in controls.all():
            box = control.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (control.inner_text(), box)
        trouble = failing_row.locator(".trouble").bounding_box()
        assert trouble is not None and trouble["height"] < 30, f"the state wraps into a tall block: {trouble}"
        if width < 700:  # a card: the trouble mark runs along the card, clear of its first label
            first_cell = failing_row.locator("td").first
            assert first_cell.evaluate("cell => getComputedStyle(cell).boxShadow") == "none"
            assert "inset" in failing_row.evaluate("row => getComputedStyle(row).boxShadow")
        screenshot(page, ROOT / "docs" / "images" / f"console-{screen}.png", tmp_path)
    finally:
        context.close()


def test_poison_messages_and_claims_past_their_deadline_are_counted_on_the_overview_and_listed(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target, *,
    tmp_path: Path,
) -> None:
    put_job(api, collection, "stuck", weekly_job(target.url("/ok"), soon()))
    # The delivery calling its first try died five minutes ago, its message with it; and a
    # message the host gave up on waits on the poison queue.
    parts = collection.split("/")
    job = JobId(CollectionId(parts[2], parts[4], parts[8]), "stuck")
    store = table_storage_from_connection_string(service.storage)
    stored = store.jobs.existing_job(job)
    [entry] = stored.document.pending
    dead = Claim("dead-holder", datetime.now(UTC) - timedelta(minutes=5))
    store.executor.replace_jobs([Stored(job, stored.document.claimed(entry.attempt, dead), stored.etag)])
    poison = QueueClient.from_connection_string(service.storage, "executions-poison")
    with contextlib.suppress(ResourceExistsError):
        poison.create_queue()
    poison.send_message("not a message the app sends")
    try:
        sign_in(page, service)
        box = page.get_by_role("region", name="Needs a look")
        expect(box).to_contain_text(re.compile(r"\d+ poison messages?"))
        expect(box).to_contain_text(re.compile(r"\d+\+? claims? past (its|their) deadline"))
        box.get_by_role("link", name="See the poison messages and claims").click()
        expect(page.get_by_role("heading", name="Needs a look", exact=True)).to_be_visible()
        claims = page.get_by_role("table", name="Claims past their deadline")
        expect(claims.get_by_role("row").filter(has_text="stuck")).to_contain_text("5 min")
        expect(page.get_by_role("table", name="Poison messages")).to_contain_text("Unreadable")
        assert axe_problems(page) == []
        screenshot(page, ATTENTION_SCREENSHOT, tmp_path)
        claims.get_by_role("link", name=re.compile(r"\bstuck$")).click()
        expect(page.get_by_role("heading", name="Job stuck")).to_be_visible()
    finally:  # the session's other tests (and its /health) expect none of either
        poison.clear_messages()
        api.delete(f"{collection}/jobs/stuck").raise_for_status()


def test_a_deleted_job_gives_one_clear_not_found_page_and_refreshes_keep_the_controls(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    put_job(api, collection, "short-lived", weekly_job(target.url("/ok"), soon()))
    page.clock.install()  # the page's 10 s refresh, on the test's command
    sign_in(page, service)
    page.goto(f"{service.base_url}/console{collection_hash(collection)}/jobs/short-lived")
    run = page.get_by_role("button", name="Run now: short-lived")
    run.focus()
    kept = run.element_handle()
    before = page.locator("#updated").inner_text()
    page.clock.run_for(11_000)
    expect(page.locator("#updated")).not_to_have_text(before)  # refreshed in place
    assert kept.evaluate("button => button.isConnected && document.activeElement === button")

    api.delete(f"{collection}/jobs/short-lived").raise_for_status()
    for _ in range(2):  # two refreshes: still one message, not one more each time
        page.clock.run_for(11_000)
        expect(page.get_by_role("heading", name="Not found")).to_have_count(1)
    expect(page.get_by_text("The job 'short-lived' does not exist")).to_have_count(1)
    expect(page.locator("#trail")).not_to_contain_text("short-lived")
    page.get_by_role("link", name=f"Back to collection {collection.rsplit('/', 1)[1]}").click()
    expect(page.get_by_role("heading", name=f"Collection {collection.rsplit('/', 1)[1]}")).to_be_visible()

    page.goto(f"{service.base_url}/console#/collections/console-sub/nowhere/missing")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_text("The job collection 'missing' does not exist")).to_be_visible()


def axe_problems(page: Page) -> list[str]:
    """The serious and critical violations axe-core finds on the page as it stands."""
    page.evaluate(AXE.read_text())
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".filter((v) => ['serious', 'critical'].includes(v.impact))"
        ".map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`)"
    )
    return list(found)


def test_axe_finds_no_serious_problem_on_any_page(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    assert AXE.exists(), "axe-core is missing: `npm ci` installs it (package.json)"
    properties = weekly_job(target.url("/ok"), soon())
    properties["recurrence"]["timeZone"] = "Europe/Berlin"
    put_job(api, collection, "checked", properties)
    api.post(f"{collection}/jobs/checked/run").raise_for_status()
    target.wait_for("/ok")

    page.goto(f"{service.base_url}/")  # the service's root leads to the console
    expect(page).to_have_url(f"{service.base_url}/console")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    problems = {"sign in": axe_problems(page)}
    sign_in(page, service)
    pages = {
        "overview": ("#/", "Job collections"),
        "collection": (collection_hash(collection), "Collection"),
        "job": (f"{collection_hash(collection)}/jobs/checked", "Job checked"),
        "new job": (f"{collection_hash(collection)}/new-job", "New job"),
        "edit job": (f"{collection_hash(collection)}/jobs/checked/edit", "Edit job checked"),
        "new collection": ("#/new-collection", "New collection"),
        "edit collection": (f"{collection_hash(collection)}/edit", "Edit collection"),
        "not found": (f"{collection_hash(collection)}/jobs/gone", "Not found"),
        "import": ("#/import", "Import a template"),
    }
    for name, (address, heading) in pages.items():
        page.goto(f"{service.base_url}/console{address}")
        expect(page.get_by_role("heading", name=heading).first).to_be_visible()
        if name in ("new job", "edit job"):  # the preview's answer (or its problems) arrived
            expect(page.locator(".preview .help")).not_to_be_empty()
        problems[name] = axe_problems(page)
    assert {name: found for name, found in problems.items() if found} == {}


def test_export_saves_the_collection_and_its_group_as_template_files_without_secrets(
    page: Page, service: Service, api: httpx.Client, collection: str, target: Target
) -> None:
    properties = weekly_job(target.url("/ok"), soon())
    properties["action"]["request"]["authentication"] = {"type": "Basic", "username": "ops", "password": "pa55-w0rd"}
    put_job(api, collection, "guarded", properties)
    group, name = collection.split("/")[4], collection.rsplit("/", 1)[1]
    sign_in(page, service)
    open_collection(page, collection)
    with page.expect_download() as saving:
        page.get_by_role("button", name=f"Export template of collection {name}").click()
    saved = saving.value
    assert saved.suggested_filename == f"{name}.json"
    text = Path(saved.path()).read_text()
    assert "pa55-w0rd" not in text
    template = json.loads(text)
    (secret,) = template["parameters"].values()
    assert secret["type"] == "securestring" and "defaultValue" not in secret
    (exported,) = template["resources"]
    assert exported["name"] == name and exported["resources"][0]["name"] == "guarded"
    expect(page.get_by_role("status")).to_have_text(
        f"{name}.json was saved: its 1 secret is a parameter, give it again when importing."
    )

    with page.expect_download() as saving:
        page.get_by_role("button", name=f"Export resource group {group} as a template").click()
    assert saving.value.suggested_filename == f"{group}.json"
    assert json.loads(Path(saving.value.path()).read_text())["resources"][0]["name"] == name


def import_page(page: Page, service: Service, group: str) -> None:
    sign_in(page, service)
    expect(page.get_by_role("heading", name="Job collections")).to_be_visible()
    page.goto(f"{service.base_url}/console#/import/console-sub/{group}")
    expect(page.get_by_role("heading", name="Import a template")).to_be_visible()


def test_a_template_file_is_checked_with_what_if_then_applied_and_its_jobs_appear(
    page: Page, service: Service, api: httpx.Client, target: Target, tmp_path: Path
) -> None:
    group = f"console-import-{secrets.token_hex(3)}"
    job = {"type": "jobs", "name": "[parameters('jobName')]", "apiVersion": "2016-03-01",
           "dependsOn": ["[resourceId('Microsoft.Scheduler/jobCollections', 'imported')]"],
           "properties": weekly_job(target.url("/ok"), soon())}  # fmt: skip
    template = {
        "$schema": "https://schema.management.azure.com/schemas/2015-01-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {"jobName": {"type": "string"}},
        "resources": [
            {"type": "Microsoft.Web/sites", "name": "site", "apiVersion": "2022-03-01"},
            {"type": "Microsoft.Scheduler/jobCollections", "name": "imported", "apiVersion": "2016-03-01",
             "location": "West Europe", "properties": {"sku": {"name": "Standard"}}, "resources": [job]},
        ],
    }  # fmt: skip
    (tmp_path / "azuredeploy.json").write_text(json.dumps(template))
    (tmp_path / "azuredeploy.parameters.json").write_text(
        json.dumps({"contentVersion": "1.0.0.0", "parameters": {"jobName": {"value": "from-a-file"}}})
    )
    import_page(page, service, group)
    page.get_by_label("Template file").set_input_files(tmp_path / "azuredeploy.json")
    page.get_by_label("Parameters file (optional)").set_input_files(tmp_path / "azuredeploy.parameters.json")
    page.get_by_role("button", name="Check (what-if)").click()
    planned = page.get_by_role("region", name="What the import would do")
    expect(planned).to_contain_text("Incremental mode: 1 skipped, 2 created.")
    expect(planned.get_by_role("row").filter(has_text="imported/from-a-file")).to_contain_text("Created")
    expect(planned.get_by_role("row").filter(has_text="site")).to_contain_text("not a Microsoft.Scheduler resource")
    collection = f"/subscriptions/console-sub/resourceGroups/{group}/providers/Microsoft.Scheduler/jobCollections/imported"
    assert api.get(collection).status_code == 404  # what-if changed nothing
    assert axe_problems(page) == []

    page.keyboard.press("Tab")  # from the outcomes (which have the focus) to what applies them
    expect(page.get_by_role("button", name="Apply these changes")).to_be_focused()
    page.keyboard.press("Enter")
    applied = page.get_by_role("region", name="What the import did")
    expect(applied).to_contain_text("Incremental mode: 1 skipped, 2 created.")
    expect(page.get_by_role("status")).to_have_text("Imported: 1 skipped, 2 created.")
    applied.get_by_role("link", name="imported", exact=True).click()
    expect(page.get_by_role("heading", name="Collection imported")).to_be_visible()
    expect(page.get_by_role("row").filter(has_text="from-a-file")).to_contain_text("Mondays, Wednesdays and Fridays")

    # Complete mode: the job the template no longer names would be deleted, and the button says so.
    (tmp_path / "azuredeploy.parameters.json").write_text(
        json.dumps({"contentVersion": "1.0.0.0", "parameters": {"jobName": {"value": "renamed"}}})
    )
    page.goto(f"{service.base_url}/console#/import/console-sub/{group}")
    page.get_by_label("Template file").set_input_files(tmp_path / "azuredeploy.json")
    page.get_by_label("Parameters file (optional)").set_input_files(tmp_path / "azuredeploy.parameters.json")
    page.get_by_label("Complete:").check()
    page.get_by_role("button", name="Check (what-if)").click()
    expect(page.get_by_role("region", name="What the import would do")).to_contain_text(
        "Complete mode: 1 skipped, 1 unchanged, 1 created, 1 deleted."
    )
    expect(page.get_by_role("button", name="Apply, deleting 1 job")).to_be_visible()
    assert api.get(f"{collection}/jobs/from-a-file").status_code == 200


def test_a_template_without_a_parameters_file_is_filled_in_through_fields_drawn_from_it(
    page: Page, service: Service, api: httpx.Client
) -> None:
    group = f"console-webapp-{secrets.token_hex(3)}"
    import_page(page, service, group)
    page.get_by_label("Template file").set_input_files(QUICKSTARTS / "scheduler-webapp.json")
    expect(page.get_by_label("appSvcPlanName (string)")).to_be_visible()  # one field per parameter
    expect(page.locator("#import-parameter-fields .field")).to_have_count(8)
    expect(page.locator("#import-parameter-fields")).to_contain_text('default: "F1"')
    expect(page.get_by_label("sku (object)")).to_have_attribute("placeholder", "{...} (JSON)")
    for name, value in {"appSvcPlanName": "plan", "webAppName": "contoso-web",
                        "jobCollectionName": "webjobs", "jobName": "ping"}.items():  # fmt: skip
        page.get_by_label(f"{name} (string)").fill(value)
    page.get_by_text("Values only Azure knows").click()
    call = "reference(resourceId('Microsoft.Web/sites', parameters('webAppName')))"
    page.get_by_label(call, exact=True).fill('{"hostNames": ["contoso-web.azurewebsites.net"]}')
    page.get_by_label("Location (the template reads resourceGroup().location)").fill("West Europe")
    page.get_by_role("button", name="Check (what-if)").click()
    planned = page.get_by_role("region", name="What the import would do")
    expect(planned).to_contain_text("Incremental mode: 2 skipped, 2 created.")
    row = planned.get_by_role("row").filter(has_text="webjobs/ping")
    expect(row).to_contain_text("no startTime: it runs at once when imported")
    page.get_by_label("They start").select_option("NextWholeMinute")  # a start time for such jobs
    page.get_by_role("button", name="Check (what-if)").click()
    expect(row.locator("td[data-label='First run'] time")).to_have_attribute("datetime", re.compile(r"T1[02]:[03]0:00Z$"))
    expect(row).not_to_contain_text("no startTime")
    expect(row.locator("td[data-label='Outcome']")).to_have_text("Created")  # once, not "Created created"
    apply = page.get_by_role("button", name="Apply these changes")
    table_bottom = planned.locator("table").bounding_box()
    button_top = apply.bounding_box()
    assert table_bottom is not None and button_top is not None
    assert button_top["y"] - (table_bottom["y"] + table_bottom["height"]) >= 12  # room above the button
    apply.click()
    expect(page.get_by_role("status")).to_have_text("Imported: 2 skipped, 2 created.")
    job = api.get(f"/subscriptions/console-sub/resourceGroups/{group}/providers/Microsoft.Scheduler"
                  "/jobCollections/webjobs/jobs/ping").json()  # fmt: skip
    assert job["properties"]["action"]["request"]["uri"] == "http://contoso-web.azurewebsites.net"


def test_an_import_error_shows_its_message_beside_the_form(
    page: Page, service: Service, api: httpx.Client, tmp_path: Path
) -> None:
    group = f"console-import-{secrets.token_hex(3)}"
    uri = "[concat('https://', reference(resourceId('Microsoft.Web/sites', 'site')).hostNames[0])]"
    template = {
        "resources": [
            {"type": "Microsoft.Scheduler/jobCollections", "name": "needs-azure", "apiVersion": "2016-03-01",
             "location": "West Europe", "properties": {"sku": {"name": "Standard"}}, "resources": [
                 {"type": "jobs", "name": "ping", "apiVersion": "2016-03-01", "dependsOn": ["needs-azure"],
                  "properties": {"action": {"type": "Https", "request": {"uri": uri, "method": "GET"}},
                                 "recurrence": {"frequency": "Hour", "interval": 1}}}]},
        ],
    }  # fmt: skip
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "azuredeploy.json").write_text(json.dumps(template))
    import_page(page, service, group)
    page.get_by_label("Template file").set_input_files(tmp_path / "broken.json")
    page.get_by_role("button", name="Check (what-if)").click()
    problem = page.locator("#import-problem")
    expect(problem).to_contain_text("The template file (broken.json) is not JSON")
    expect(page.get_by_label("Template file")).to_have_attribute("aria-invalid", "true")

    page.get_by_label("Template file").set_input_files(tmp_path / "azuredeploy.json")
    page.get_by_label("Complete:").check()
    page.get_by_role("button", name="Check (what-if)").click()
    expect(problem).to_contain_text("resource 'needs-azure/ping'")
    expect(problem).to_contain_text("property 'properties.action.request.uri'")
    expect(problem).to_contain_text("reference(resourceId('Microsoft.Web/sites', 'site'))")
    expect(page.get_by_role("button", name=re.compile("Apply"))).to_have_count(0)
    assert axe_problems(page) == []
