"""The activity log: every change and refused attempt, with its caller, read back by time range,
resource and caller, a page at a time; never a secret; 90 days kept."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from devhost.identity import mint, object_id_of
from shared.api.activity import _client_address
from shared.domain.access import ADMINISTRATOR, Caller, Grant, Role, writes
from shared.domain.activity import KEPT_FOR, Attempt, event
from shared.domain.wire import iso
from shared.settings import Settings
from shared.storage.activity_log import ActivityLog
from shared.storage.clients import table_service
from tests.conftest import API_VERSION, Service, identity_folder_of

PASSWORD = "s3cret-in-the-body"


def as_(service: Service, name: str, role: Role) -> httpx.Client:
    token = mint(identity_folder_of(service.log), name, [role.value], now=datetime.now(UTC))
    return httpx.Client(base_url=service.base_url, params={"api-version": API_VERSION},
                        headers={"Authorization": f"Bearer {token}"}, timeout=15)  # fmt: skip


class Story:
    """One subscription's history of changes, made once for the module's tests."""

    def __init__(self, service: Service) -> None:
        self.subscription = f"audit-{uuid.uuid4().hex[:8]}"
        self.group = f"/subscriptions/{self.subscription}/resourceGroups/team/providers/Microsoft.Scheduler"
        self.collection = f"{self.group}/jobCollections/nightly"
        self.job = f"{self.collection}/jobs/report"
        self.ann = f"ann-{uuid.uuid4().hex[:4]}"  # a contributor
        self.otto = f"otto-{uuid.uuid4().hex[:4]}"  # an operator
        self.rita = f"rita-{uuid.uuid4().hex[:4]}"  # a reader
        self.request_ids: dict[str, str] = {}
        self.started = datetime.now(UTC) - timedelta(seconds=1)
        with as_(service, self.ann, Role.CONTRIBUTOR) as ann, as_(service, self.otto, Role.OPERATOR) as otto, \
                as_(service, self.rita, Role.READER) as rita:  # fmt: skip
            self._made(ann.put(self.collection, json={"location": "westeurope", "properties": {"sku": {"name": "Standard"}}}), "collection")
            job = {"properties": {
                "startTime": iso(datetime.now(UTC) + timedelta(days=3)),
                "action": {"type": "Http", "request": {"uri": "https://example.org/hook", "method": "POST",
                           "authentication": {"type": "Basic", "username": "svc", "password": PASSWORD}}},
                "recurrence": {"frequency": "Day", "interval": 1}}}  # fmt: skip
            self._made(ann.put(self.job, json=job), "job")
            self._made(otto.post(f"{self.job}/run"), "run")
            self._made(otto.post(f"{self.collection}/disable"), "disable")
            refused = rita.delete(self.job)
            assert refused.status_code == 403
            self.request_ids["refused"] = refused.headers["x-ms-request-id"]
            template = {"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                        "contentVersion": "1.0.0.0", "resources": [{
                            "type": "Microsoft.Scheduler/jobCollections", "apiVersion": "2016-03-01",
                            "name": "imported", "location": "westeurope",
                            "properties": {"sku": {"name": "Standard"}}}]}  # fmt: skip
            self._made(ann.post(f"{self.group}/importTemplate", json={"template": template}), "import")
            self._made(ann.delete(self.job), "delete")
            # A read is not an event.
            assert rita.get(self.collection).status_code == 200
        self.ended = datetime.now(UTC) + timedelta(seconds=1)

    def _made(self, answer: httpx.Response, what: str) -> None:
        assert answer.status_code < 300, (what, answer.text)
        self.request_ids[what] = answer.headers["x-ms-request-id"]

    @property
    def log_path(self) -> str:
        return f"/subscriptions/{self.subscription}/providers/Microsoft.Scheduler/activityLog"


@pytest.fixture(scope="module")
def story(service: Service) -> Story:
    return Story(service)


@pytest.fixture
def reader(service: Service) -> Iterator[httpx.Client]:
    with as_(service, "auditor", Role.READER) as client:
        yield client


def read_all(client: httpx.Client, path: str, **query: Any) -> list[dict[str, Any]]:
    answer = client.get(path, params=query)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["value"])


def test_each_kind_of_change_and_the_refused_attempt_is_recorded_with_its_caller(story: Story, reader: httpx.Client) -> None:
    events = read_all(reader, story.log_path)
    by_id = {each["correlationId"]: each for each in events}
    expected = {
        "collection": ("Microsoft.Scheduler/jobCollections/write", story.ann, "Succeeded", story.collection),
        "job": ("Microsoft.Scheduler/jobCollections/jobs/write", story.ann, "Succeeded", story.job),
        "run": ("Microsoft.Scheduler/jobCollections/jobs/run/action", story.otto, "Succeeded", story.job),
        "disable": ("Microsoft.Scheduler/jobCollections/disable/action", story.otto, "Succeeded", story.collection),
        "refused": ("Microsoft.Scheduler/jobCollections/jobs/delete", story.rita, "Failed", story.job),
        "import": ("Microsoft.Scheduler/importTemplate/action", story.ann, "Succeeded", story.group),
        "delete": ("Microsoft.Scheduler/jobCollections/jobs/delete", story.ann, "Succeeded", story.job),
    }  # fmt: skip
    found = {what: (by_id[request_id]["operationName"]["value"], by_id[request_id]["caller"],
                    by_id[request_id]["status"]["value"], by_id[request_id]["resourceId"])
             for what, request_id in story.request_ids.items()}  # fmt: skip
    assert found == expected
    assert len(events) == len(expected)  # the reads left nothing
    refused = by_id[story.request_ids["refused"]]
    assert (refused["subStatus"]["value"], refused["level"], refused["callerObjectId"]) == ("Forbidden", "Error", object_id_of(story.rita))
    assert {each["httpRequest"]["clientIpAddress"] for each in events} == {"127.0.0.1"}
    assert [each["eventTimestamp"] for each in events] == sorted((each["eventTimestamp"] for each in events), reverse=True)
    assert {each["category"]["value"] for each in events} == {"Administrative"}


def test_no_secret_reaches_the_log(story: Story, reader: httpx.Client) -> None:
    answer = reader.get(story.log_path)
    assert PASSWORD not in answer.text and "hunter" not in answer.text
    assert "Bearer" not in answer.text


def test_filters_by_caller_resource_and_time(story: Story, reader: httpx.Client) -> None:
    by_rita = read_all(reader, story.log_path, **{"$filter": f"caller eq '{story.rita}'"})
    assert [each["correlationId"] for each in by_rita] == [story.request_ids["refused"]]
    by_object_id = read_all(reader, story.log_path, **{"$filter": f"caller eq '{object_id_of(story.otto)}'"})
    assert {each["correlationId"] for each in by_object_id} == {story.request_ids["run"], story.request_ids["disable"]}
    on_job = read_all(reader, story.log_path, **{"$filter": f"resourceId eq '{story.job}'"})
    assert {each["correlationId"] for each in on_job} == {story.request_ids[w] for w in ("job", "run", "refused", "delete")}
    # A collection's resource takes in its jobs' events too.
    on_collection = read_all(reader, story.log_path, **{"$filter": f"resourceUri eq '{story.collection}'"})
    assert len(on_collection) == 6
    failed = read_all(reader, story.log_path, **{"$filter": "status eq 'Failed'"})
    assert [each["correlationId"] for each in failed] == [story.request_ids["refused"]]
    window = f"eventTimestamp ge '{iso(story.started)}' and eventTimestamp le '{iso(story.ended)}'"
    assert len(read_all(reader, story.log_path, **{"$filter": f"{window} and caller eq '{story.ann}'"})) == 4
    before = f"eventTimestamp ge '{iso(story.started - timedelta(hours=2))}' and eventTimestamp le '{iso(story.started - timedelta(hours=1))}'"
    assert read_all(reader, story.log_path, **{"$filter": before}) == []


def test_pages_follow_next_links_newest_first_without_repeats(story: Story, reader: httpx.Client) -> None:
    everything = read_all(reader, story.log_path)
    seen: list[dict[str, Any]] = []
    answer = reader.get(story.log_path, params={"$top": "2"})
    pages = 0
    while True:
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert len(body["value"]) <= 2, answer.request.url
        seen += body["value"]
        pages += 1
        if not body["nextLink"]:
            break
        # As given: the link carries its query (a client's own params would replace it).
        answer = httpx.get(body["nextLink"], headers=dict(reader.headers), timeout=15)
    assert pages == 4
    assert [each["eventDataId"] for each in seen] == [each["eventDataId"] for each in everything]


@pytest.mark.parametrize("bad", ["caller ne 'x'", "eventTimestamp ge 'yesterday'", "whatever", "caller eq 'x' or caller eq 'y'",
                                 "eventTimestamp ge '2026-01-02T00:00:00Z' and eventTimestamp le '2026-01-01T00:00:00Z'"])
def test_a_filter_it_cannot_read_is_a_400_naming_it(story: Story, reader: httpx.Client, bad: str) -> None:
    answer = reader.get(story.log_path, params={"$filter": bad})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["details"][0]["target"] == "$filter"


def test_another_subscriptions_events_are_not_shown(story: Story, reader: httpx.Client) -> None:
    assert read_all(reader, f"/subscriptions/other-{story.subscription}/providers/Microsoft.Scheduler/activityLog") == []


# --- kept 90 days (the table directly, on a fixed clock) ---


def _event_at(at: datetime, scope: str) -> dict[str, Any]:
    attempt = Attempt(ADMINISTRATOR, writes("jobCollections/write"), scope, "PUT", 200, str(uuid.uuid4()), "10.0.0.1")
    return event(attempt, at, str(uuid.uuid4()))


def test_the_clean_up_drops_days_older_than_ninety_and_reads_stop_there(storage: str) -> None:
    tables = table_service(Settings.from_environment({"AzureWebJobsStorage": storage}), None)
    log = ActivityLog.in_service(tables, f"activity{uuid.uuid4().hex[:8]}")
    now = datetime(2026, 6, 1, 12, tzinfo=UTC)
    scope = "/subscriptions/kept"
    for days in (1, 89, 91, 95):
        log.add(_event_at(now - timedelta(days=days), scope))
    log.remove_before(now - KEPT_FOR)
    left = [found["eventTimestamp"] for _, found in log.events(now - timedelta(days=200), now, lambda e: True)]
    assert left == [iso(now - timedelta(days=1)), iso(now - timedelta(days=89))]


def test_an_events_caller_is_named_as_azure_names_one() -> None:
    at = datetime(2026, 6, 1, tzinfo=UTC)
    person = Caller("oid-1", "alice", "app-1", (Grant(Role.READER),))
    app = Caller("oid-2", "", "app-2")
    names = [event(Attempt(caller, writes("x"), "/subscriptions/s", "PUT", 403, "c", "1.2.3.4:5678"), at, "e")["caller"]
             for caller in (person, app, ADMINISTRATOR, None)]  # fmt: skip
    assert names == ["alice", "app-2", "function key", "unauthenticated"]


@pytest.mark.parametrize(
    ("forwarded", "address"),
    [
        ("203.0.113.7:51234", "203.0.113.7"),
        ("10.9.9.9, 203.0.113.7:51234", "203.0.113.7"),  # the client's own entry comes first
        ("forged, also-forged,[2001:db8::7]:443", "2001:db8::7"),
        ("2001:db8::7", "2001:db8::7"),
        ("", ""),
    ],
)
def test_the_client_address_is_the_one_the_platforms_front_end_appended(forwarded: str, address: str) -> None:
    assert _client_address(forwarded) == address


# --- what is not kept: attempts that name nobody ---


def _admin_reads(service: Service, subscription: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=service.base_url, params={"api-version": API_VERSION},
                      headers={"x-functions-key": service.key}, timeout=15) as admin:  # fmt: skip
        return read_all(admin, f"/subscriptions/{subscription}/providers/Microsoft.Scheduler/activityLog")


def test_attempts_without_valid_credentials_leave_no_event_so_strangers_cannot_fill_the_log(service: Service) -> None:
    subscription = f"flood-{uuid.uuid4().hex[:8]}"
    job = f"/subscriptions/{subscription}/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/c/jobs/j"
    expired = mint(identity_folder_of(service.log), "mallory", ["Scheduler.Contributor"],
                   now=datetime.now(UTC) - timedelta(hours=3))  # fmt: skip
    strangers = [{}, {"Authorization": f"Bearer {expired}"}, {"Authorization": "Bearer not.a.token"},
                 {"x-functions-key": "guessed"}]  # fmt: skip
    with httpx.Client(base_url=service.base_url, params={"api-version": API_VERSION}, timeout=15) as anyone:
        for round_ in range(5):
            for headers in strangers:
                for method in ("PUT", "PATCH", "DELETE"):
                    answer = anyone.request(method, job, headers=headers, json={"properties": {}})
                    assert answer.status_code == 401, (round_, method, headers, answer.text)
                assert anyone.post(f"{job}/run", headers=headers).status_code == 401
    # A signed-in caller beyond their role is still kept: they are known, and can be revoked.
    with as_(service, "rita-flood", Role.READER) as rita:
        refused = rita.delete(job)
    assert refused.status_code == 403
    events = _admin_reads(service, subscription)
    assert [(each["caller"], each["subStatus"]["value"]) for each in events] == [("rita-flood", "Forbidden")]


def test_a_jobs_change_of_state_by_an_operator_and_role_assignments_are_kept(service: Service, api: httpx.Client) -> None:
    subscription = f"audit-more-{uuid.uuid4().hex[:8]}"
    collection = f"/subscriptions/{subscription}/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/c"
    assert api.put(collection, json={"location": "westeurope", "properties": {"sku": {"name": "Standard"}}}).status_code == 201
    job = {"properties": {"startTime": iso(datetime.now(UTC) + timedelta(days=3)),
                          "action": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}},
                          "recurrence": {"frequency": "Day", "interval": 1}}}  # fmt: skip
    assert api.put(f"{collection}/jobs/j", json=job).status_code == 201
    with as_(service, "otto-state", Role.OPERATOR) as otto:
        disabled = otto.patch(f"{collection}/jobs/j", json={"properties": {"state": "Disabled"}})
    assert disabled.status_code == 200, disabled.text
    assignment = f"/subscriptions/{subscription}/providers/Microsoft.Scheduler/roleAssignments/{uuid.uuid4()}"
    body = {"properties": {"principalId": object_id_of("dora"), "roleName": "Scheduler.Reader",
                           "scope": f"/subscriptions/{subscription}"}}  # fmt: skip
    with as_(service, "ann-assigns", Role.CONTRIBUTOR) as ann:
        given, taken = ann.put(assignment, json=body), ann.delete(assignment)
    assert (given.status_code, taken.status_code) == (201, 200)
    kept = {each["correlationId"]: (each["caller"], each["operationName"]["value"], each["resourceId"])
            for each in _admin_reads(service, subscription)}  # fmt: skip
    assert kept[disabled.headers["x-ms-request-id"]] == ("otto-state", "Microsoft.Scheduler/jobCollections/jobs/write", f"{collection}/jobs/j")
    assert kept[given.headers["x-ms-request-id"]] == ("ann-assigns", "Microsoft.Scheduler/roleAssignments/write", f"/subscriptions/{subscription}")
    assert kept[taken.headers["x-ms-request-id"]] == ("ann-assigns", "Microsoft.Scheduler/roleAssignments/delete", f"/subscriptions/{subscription}")


def test_a_change_through_the_classic_api_is_kept_with_its_caller(service: Service) -> None:
    subscription = f"audit-classic-{uuid.uuid4().hex[:8]}"
    token = mint(identity_folder_of(service.log), "cleo-classic", ["Scheduler.Contributor"], now=datetime.now(UTC))
    cloud_service = ('<CloudService xmlns:i="http://www.w3.org/2001/XMLSchema-instance" '
                     'xmlns="http://schemas.microsoft.com/windowsazure"><Label>l</Label>'
                     "<Description>d</Description><GeoRegion>West Europe</GeoRegion></CloudService>")  # fmt: skip
    made = httpx.put(f"{service.base_url}/{subscription}/cloudservices/audited", content=cloud_service,
                     headers={"Authorization": f"Bearer {token}", "x-ms-version": "2014-10-01"}, timeout=15)  # fmt: skip
    assert made.status_code == 202, made.text
    [kept] = _admin_reads(service, subscription)
    assert (kept["caller"], kept["operationName"]["value"], kept["status"]["value"]) == (
        "cleo-classic", "Microsoft.Scheduler/cloudServices/write", "Succeeded")
