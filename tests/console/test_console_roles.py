"""The console for signed-in callers, in Chromium: who is signed in, only the buttons their role
may use, and each job's activity.

A Reader browses every page and writes nothing: no write button shows, and the activity log
has no event of theirs afterwards.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from devhost.identity import mint
from tests.conftest import API_VERSION, Service, identity_folder_of
from tests.console.test_console_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS

pytestmark = pytest.mark.timeout(120)
expect.set_options(timeout=WAIT_MS)
WRITE_BUTTONS = ["New collection", "Import template", "New job", "Run now", "Edit", "Disable", "Enable",
                 "Delete", "Export template", "Export resource group"]  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium; or set SCHEDULER_CHROMIUM")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    yield context.new_page()
    context.close()


def token(service: Service, name: str, role: str) -> str:
    return mint(identity_folder_of(service.log), name, [role], now=datetime.now(UTC))


def make_job(api: httpx.Client) -> tuple[str, str, str]:
    subscription = f"roles-{secrets.token_hex(3)}"
    collection = f"/subscriptions/{subscription}/resourceGroups/team/providers/Microsoft.Scheduler/jobCollections/nightly"
    api.put(collection, json={"location": "West Europe", "properties": {"sku": {"name": "Standard"}}}).raise_for_status()
    start = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    job = {"properties": {"startTime": start, "action": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}},
                          "recurrence": {"frequency": "Day", "interval": 1}}}  # fmt: skip
    api.put(f"{collection}/jobs/report", json=job).raise_for_status()
    return subscription, collection, f"{collection}/jobs/report"


def sign_in_with(page: Page, service: Service, credential: str) -> None:
    page.goto(f"{service.base_url}/console")
    page.get_by_label("Function key").fill(credential)
    page.get_by_role("button", name="Sign in").click()


def activity(service: Service, subscription: str) -> list[dict[str, object]]:
    answer = httpx.get(f"{service.base_url}/subscriptions/{subscription}/providers/Microsoft.Scheduler/activityLog",
                       params={"api-version": API_VERSION}, headers={"x-functions-key": service.key}, timeout=10)  # fmt: skip
    answer.raise_for_status()
    return list(answer.json()["value"])


def no_write_buttons(page: Page) -> None:
    for name in WRITE_BUTTONS:
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
        expect(page.get_by_role("link", name=name, exact=True)).to_have_count(0)


def test_a_reader_sees_who_is_signed_in_and_no_write_buttons_and_writes_nothing(
    page: Page, service: Service, api: httpx.Client
) -> None:
    subscription, _, job = make_job(api)
    before = activity(service, subscription)
    reader = f"rita-{secrets.token_hex(2)}"
    sign_in_with(page, service, token(service, reader, "Scheduler.Reader"))
    expect(page.locator("#who")).to_have_text(f"{reader} · Scheduler.Reader")
    expect(page.get_by_role("heading", name="Job collections")).to_be_visible()
    expect(page.get_by_role("link", name="nightly", exact=True).first).to_be_visible()
    no_write_buttons(page)

    page.goto(f"{service.base_url}/console#/collections/{subscription}/team/nightly")
    expect(page.get_by_role("heading", name="Collection nightly")).to_be_visible()
    no_write_buttons(page)

    page.goto(f"{service.base_url}/console#/collections/{subscription}/team/nightly/jobs/report")
    expect(page.get_by_role("heading", name="Job report")).to_be_visible()
    no_write_buttons(page)
    # The job's activity: the administrator's write that made it, by the function key.
    changes = page.get_by_role("table", name="Changes to this job, newest first")
    expect(changes).to_contain_text("jobs/write")
    expect(changes).to_contain_text("function key")

    page.goto(f"{service.base_url}/console#/activity/{subscription}")
    expect(page.get_by_role("heading", name=f"Activity log of subscription {subscription}")).to_be_visible()
    expect(page.get_by_role("table", name="Activity, newest first")).to_contain_text("nightly")

    # Nothing written: no event of the reader's, and the job as it was.
    after = activity(service, subscription)
    assert [event["eventDataId"] for event in after] == [event["eventDataId"] for event in before]
    assert api.get(job).json()["properties"]["state"].lower() == "enabled"


def test_an_operator_sees_run_and_state_buttons_but_not_edit_or_delete(
    page: Page, service: Service, api: httpx.Client
) -> None:
    subscription, _, _ = make_job(api)
    sign_in_with(page, service, token(service, "otto", "Scheduler.Operator"))
    page.goto(f"{service.base_url}/console#/collections/{subscription}/team/nightly/jobs/report")
    expect(page.get_by_role("heading", name="Job report")).to_be_visible()
    expect(page.locator("#who")).to_have_text("otto · Scheduler.Operator")
    expect(page.get_by_role("button", name="Run now: report")).to_be_visible()
    expect(page.get_by_role("button", name="Disable report")).to_be_visible()
    expect(page.get_by_role("button", name="Delete report")).to_have_count(0)
    expect(page.get_by_role("link", name="Edit report")).to_have_count(0)


def test_the_administrator_key_shows_every_button(page: Page, service: Service, api: httpx.Client) -> None:
    subscription, _, _ = make_job(api)
    sign_in_with(page, service, service.key)
    page.goto(f"{service.base_url}/console#/collections/{subscription}/team/nightly/jobs/report")
    expect(page.locator("#who")).to_have_text("function key · administrator")
    expect(page.get_by_role("button", name="Delete report")).to_be_visible()


def test_a_signed_in_caller_without_a_role_is_told_so(page: Page, service: Service) -> None:
    sign_in_with(page, service, token(service, "nobody", "Scheduler.Unknown"))
    expect(page.get_by_role("alert").first).to_contain_text("no role")
