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
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from devhost.identity import mint, object_id_of
from tests.conftest import API_VERSION, Service, identity_folder_of
from tests.console.test_console_browser import AXE, CHROMIUM, CHROMIUM_ARGS, WAIT_MS, axe_problems

pytestmark = pytest.mark.timeout(120)
expect.set_options(timeout=WAIT_MS)
WRITE_BUTTONS = ["New collection", "Import template", "New job", "Run now", "Edit", "Disable", "Enable",
                 "Delete", "Export template", "Export resource group", "Role assignments", "Add assignment",
                 "Remove"]  # fmt: skip


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


# --- role assignments, managed in the console ---


def assignments(service: Service, subscription: str) -> list[dict[str, object]]:
    answer = httpx.get(f"{service.base_url}/subscriptions/{subscription}/providers/Microsoft.Scheduler/roleAssignments",
                       params={"api-version": API_VERSION}, headers={"x-functions-key": service.key}, timeout=10)  # fmt: skip
    answer.raise_for_status()
    return [each["properties"] for each in answer.json()["value"]]


def test_a_contributor_gives_a_role_at_a_resource_group_and_takes_it_away(page: Page, service: Service, api: httpx.Client) -> None:
    assert AXE.exists(), "axe-core is missing: `npm ci` installs it (package.json)"
    subscription, collection, _ = make_job(api)
    cora = f"cora-{secrets.token_hex(2)}"
    sign_in_with(page, service, token(service, cora, "Scheduler.Contributor"))
    page.goto(f"{service.base_url}/console#/collections/{subscription}/team/nightly")
    page.get_by_role("link", name="Role assignments").click()
    expect(page.get_by_role("heading", name=f"Role assignments of subscription {subscription}")).to_be_visible()
    expect(page.get_by_text("No role assignments in this subscription.")).to_be_visible()

    # A name, and a scope outside the subscription: the API's refusals, shown as it says them,
    # on the fields they name, and nothing kept.
    page.get_by_label("Principal object id").fill("dora")
    page.get_by_role("button", name="Add assignment").click()
    expect(page.locator("#assignment-error")).to_contain_text("properties.principalId: must be the principal's object id")
    expect(page.get_by_label("Principal object id")).to_have_attribute("aria-invalid", "true")
    dora = object_id_of("dora")
    page.get_by_label("Principal object id").fill(dora)
    page.get_by_label("Role", exact=True).select_option("Scheduler.Operator")
    page.get_by_label("Scope (optional)").fill("/subscriptions/someone-else")
    page.get_by_role("button", name="Add assignment").click()
    expect(page.locator("#assignment-error")).to_contain_text("properties.scope")
    expect(page.locator("#assignment-error")).to_contain_text(f"must be /subscriptions/{subscription} or one of its resource groups")
    expect(page.get_by_label("Scope (optional)")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Principal object id")).not_to_have_attribute("aria-invalid", "true")
    assert assignments(service, subscription) == []
    assert axe_problems(page) == []

    group = f"/subscriptions/{subscription}/resourceGroups/team"
    page.get_by_label("Scope (optional)").fill(group)
    page.get_by_role("button", name="Add assignment").click()
    row = page.get_by_role("table", name="Role assignments").get_by_role("row").filter(has_text=dora)
    expect(row).to_contain_text("Scheduler.Operator")
    expect(row).to_contain_text(group)
    expect(page.get_by_role("status")).to_contain_text(f"Scheduler.Operator given to {dora} at {group}.")
    assert assignments(service, subscription) == [{"principalId": dora, "roleName": "Scheduler.Operator", "scope": group}]
    assert axe_problems(page) == []
    # The assignment works: dora, whose token has no app role, may now run the job there.
    as_dora = {"Authorization": f"Bearer {mint(identity_folder_of(service.log), 'dora', [], now=datetime.now(UTC))}"}
    ran = httpx.post(f"{service.base_url}{collection}/jobs/report/run", params={"api-version": API_VERSION}, headers=as_dora, timeout=10)
    assert ran.status_code not in (401, 403), ran.text

    page.get_by_role("button", name=f"Remove Scheduler.Operator of {dora} at {group}").click()
    expect(page.get_by_text("No role assignments in this subscription.")).to_be_visible()
    assert assignments(service, subscription) == []
    operations = {(event["caller"], event["operationName"]["value"]) for event in activity(service, subscription)}  # type: ignore[index]
    assert {(cora, "Microsoft.Scheduler/roleAssignments/write"), (cora, "Microsoft.Scheduler/roleAssignments/delete")} <= operations


@pytest.mark.parametrize("role", ["Scheduler.Reader", "Scheduler.Operator"])
def test_a_reader_or_operator_does_not_see_role_assignments_and_the_api_refuses_them(
    page: Page, service: Service, api: httpx.Client, role: str
) -> None:
    subscription, _, _ = make_job(api)
    before = activity(service, subscription)
    who = f"rolf-{secrets.token_hex(2)}"
    credential = token(service, who, role)
    sign_in_with(page, service, credential)
    page.goto(f"{service.base_url}/console#/collections/{subscription}/team/nightly")
    expect(page.get_by_role("heading", name="Collection nightly")).to_be_visible()
    expect(page.get_by_role("link", name="Activity log")).to_be_visible()
    expect(page.get_by_role("link", name="Role assignments")).to_have_count(0)

    # An address typed in shows no list and no form.
    page.goto(f"{service.base_url}/console#/roles/{subscription}")
    expect(page.get_by_role("heading", name="Role assignments", exact=True)).to_be_visible()
    expect(page.get_by_text(f"Only a Scheduler.Contributor of subscription {subscription} manages")).to_be_visible()
    expect(page.get_by_label("Principal object id")).to_have_count(0)
    no_write_buttons(page)

    body = {"properties": {"principalId": object_id_of(who), "roleName": "Scheduler.Contributor", "scope": f"/subscriptions/{subscription}"}}
    refused = httpx.put(f"{service.base_url}/subscriptions/{subscription}/providers/Microsoft.Scheduler/roleAssignments/{secrets.token_hex(16)}",
                        params={"api-version": API_VERSION}, json=body, headers={"Authorization": f"Bearer {credential}"}, timeout=10)  # fmt: skip
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "AuthorizationFailed")
    assert assignments(service, subscription) == []
    after = activity(service, subscription)
    # The one event: the API's refusal above. The console wrote nothing.
    assert [event["eventDataId"] for event in after[1:]] == [event["eventDataId"] for event in before]
    assert (after[0]["caller"], after[0]["subStatus"]["value"]) == (who, "Forbidden")  # type: ignore[index]


# --- signing out of the platform's session ---


def test_signed_in_through_the_platform_sign_out_ends_the_platforms_session(browser: Browser, service: Service) -> None:
    # The platform's session cookie, as the local host can play it: every request the browser
    # makes carries a good token without the page knowing it, as a cookie would.
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {token(service, 'pia', 'Scheduler.Reader')}"})
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        logged_out: list[str] = []

        def platform_logout(route: Route) -> None:
            logged_out.append(route.request.url)
            route.fulfill(status=200, content_type="text/html", body="<!doctype html><title>Signed out</title><p>Signed out</p>")

        page.route("**/.auth/logout**", platform_logout)
        page.goto(f"{service.base_url}/console")
        expect(page.locator("#who")).to_have_text("pia · Scheduler.Reader")
        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_title("Signed out")
        [address] = logged_out
        parsed = urlsplit(address)
        assert (parsed.path, parse_qs(parsed.query)) == ("/.auth/logout", {"post_logout_redirect_uri": ["/console"]})
    finally:
        context.close()


def test_signed_in_with_a_token_sign_out_only_forgets_it(page: Page, service: Service) -> None:
    left: list[str] = []
    page.route("**/.auth/**", lambda route: (left.append(route.request.url), route.abort()))
    sign_in_with(page, service, token(service, "tom", "Scheduler.Reader"))
    expect(page.locator("#who")).to_have_text("tom · Scheduler.Reader")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert left == []
    assert page.evaluate("sessionStorage.length") == 0
