"""The classic (Service Management) API (docs/classic-api.md): the unmodified legacy Python client
against the local host, the first concepts page's job as printed, one store seen through both APIs, and bad
input answered in the classic API's XML error format."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest
import requests
from azure.common import AzureHttpError, AzureMissingResourceHttpError
from azure.servicemanagement.schedulermanagementservice import SchedulerManagementService

from shared.api import job_operations
from shared.api.arm import ApiRequest
from shared.api.classic import operations as classic_operations
from shared.domain.ids import JobId
from shared.domain.wire import parse_iso
from tests.conftest import Service
from tests.pipeline import START, Pipeline
from tests.targets import Target

NS = "{http://schemas.microsoft.com/windowsazure}"
XML_CLOUD_SERVICE = (
    '<CloudService xmlns:i="http://www.w3.org/2001/XMLSchema-instance" '
    'xmlns="http://schemas.microsoft.com/windowsazure"><Label>{label}</Label>'
    "<Description>d</Description><GeoRegion>{region}</GeoRegion></CloudService>"
)
XML_COLLECTION = (
    '<Resource xmlns="http://schemas.microsoft.com/windowsazure"><IntrinsicSettings>'
    "<Plan>{plan}</Plan>{quota}</IntrinsicSettings></Resource>"
)
# The comprehensive job example of the first edition of the Scheduler concepts page, exactly as
# it is printed there (tabs, comments, trailing commas, the stray space in nextExecutionTime).
FIRST_EDITION_EXAMPLE = """
	{
		"startTime": "2012-08-04T00:00Z",               // optional
		"action":
		{
			"type": "http",
			"retryPolicy": { "retryType":"none" },
			"request":
			{
				"uri": "http://contoso.com/foo",        // required
				"method": "PUT",                        // required
				"body": "Posting from a timer",         // optional
				"headers":                              // optional

				{
					"Content-Type": "application/json"
				},
			},
		   "errorAction":
		   {
			   "type": "http",
			   "request":
			   {
				   "uri": "http://contoso.com/notifyError",
				   "method": "POST",
			   },
		   },
		},
		"recurrence":                                   // optional
		{
			"frequency": "week",                        // can be "year" "month" "day" "week" "minute"
			"interval": 1,                              // optional, how often to fire (default to 1)
			"schedule":                                 // optional (advanced scheduling specifics)
			{
				"weekDays": ["monday", "wednesday", "friday"],
				"hours": [10, 22]
			},
			"count": 10,                                 // optional (default to recur infinitely)
			"endTime": "2012-11-04",                     // optional (default to recur infinitely)
		},
		"state": "disabled",                           // enabled or disabled
		"status":                                       // controlled by Scheduler service
		{
			"lastExecutionTime": "2007-03-01T13:00:00Z",
			"nextExecutionTime": "2007-03-01T14:00:00Z ",
			"executionCount": 3,
											    "failureCount": 0,
												"faultedCount": 0
		},
	}
"""


def as_json(printed: str) -> Any:
    """The printed text without its `//` comments and trailing commas, which JSON does not allow."""
    without_comments = re.sub(r"\s//[^\n]*", "", printed)  # not the // of http://
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", without_comments))


@pytest.fixture
def subscription() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def legacy(service: Service, subscription: str) -> SchedulerManagementService:
    """The unmodified legacy client, pointed at the local host as docs/classic-api.md shows."""
    session = requests.Session()
    session.headers["x-functions-key"] = service.key
    client = SchedulerManagementService(
        subscription, host=service.base_url.removeprefix("http://"), request_session=session, timeout=10
    )
    client._httpclient.protocol = "http"  # the local host speaks plain HTTP
    return client


@pytest.fixture
def classic(service: Service, subscription: str) -> Iterator[httpx.Client]:
    """Plain HTTP to the classic routes of one fresh subscription."""
    with httpx.Client(
        base_url=f"{service.base_url}/{subscription}",
        headers={"x-functions-key": service.key, "x-ms-version": "2014-10-01"},
        timeout=10.0,
    ) as client:
        yield client


@pytest.fixture
def collection(classic: httpx.Client) -> str:
    """A cloud service `cs` holding a Standard job collection: the jobs route of that collection."""
    assert classic.put("/cloudservices/cs", content=XML_CLOUD_SERVICE.format(label="l", region="West Europe")).status_code == 202
    assert classic.put("/cloudservices/cs/resources/scheduler/jobCollections/jc",
                       content=XML_COLLECTION.format(plan="Standard", quota="")).status_code == 202  # fmt: skip
    return "/cloudservices/cs/resources/scheduler/~/jobCollections/jc"


def in_a_day() -> datetime:
    return datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)


def http_job(uri: str = "https://example.org/ping", **fields: Any) -> dict[str, Any]:
    action = {"type": "http", "request": {"uri": uri, "method": "GET"}}
    return {"startTime": in_a_day().isoformat(), "action": action} | fields


# --- the legacy client ----------------------------------------------------------------------


def test_the_legacy_client_through_every_operation(legacy: SchedulerManagementService) -> None:
    def succeeded(result: Any) -> None:
        assert re.fullmatch(r"[0-9a-f]{32}", result.request_id)
        assert legacy.wait_for_operation_status(result.request_id, timeout=5, sleep_interval=1).status == "Succeeded"

    succeeded(legacy.create_cloud_service("cs1", "label", "description", "West Europe"))
    service = legacy.get_cloud_service("cs1")
    assert (service.name, service.label, service.description, service.geo_region) == ("cs1", "label", "description", "West Europe")
    assert list(service.resources) == []
    assert legacy.check_job_collection_name("cs1", "jc1").result is True

    succeeded(legacy.create_job_collection("cs1", "jc1"))  # the client sends <plan>, lower case
    assert legacy.check_job_collection_name("cs1", "jc1").result is False
    collection = legacy.get_job_collection("cs1", "jc1")
    assert (collection.name, collection.type, collection.state, collection.schema_version) == ("jc1", "jobcollections", "Started", "1.1")
    assert collection.intrinsic_settings.plan == "Standard"
    assert collection.operation_status.result == "Succeeded"

    start = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)
    job = {
        "startTime": start,  # the client sends isoformat(): no offset, microseconds
        "action": {"type": "http", "request": {"uri": "http://bing.com/", "method": "GET", "headers": {"Content-Type": "text/plain"}}},
        "recurrence": {"frequency": "minute", "interval": 30, "count": 10},
        "state": "enabled",
    }
    succeeded(legacy.create_job("cs1", "jc1", "job_id", job))
    read = legacy.get_job("cs1", "jc1", "job_id")
    # As recorded: flat, `id` the job's name, lower-case enums, `Z` added, header name echoed
    # with a lower-case first letter, counts from zero.
    assert read == {
        "id": "job_id",
        "startTime": read["startTime"],
        "action": {"type": "http", "request": {"uri": "http://bing.com/", "method": "GET", "headers": {"content-Type": "text/plain"}}},
        "recurrence": {"frequency": "minute", "interval": 30, "count": 10},
        "state": "enabled",
        "status": {"nextExecutionTime": read["status"]["nextExecutionTime"], "executionCount": 0, "failureCount": 0, "faultedCount": 0},
    }
    assert read["startTime"].endswith("Z")
    assert parse_iso(read["startTime"]) == start.replace(tzinfo=UTC)
    assert read["status"]["nextExecutionTime"] == read["startTime"]
    assert legacy.get_all_jobs("cs1", "jc1") == [read]

    [listed] = [each for each in legacy.list_cloud_services() if each.name == "cs1"]
    [resource] = list(listed.resources)
    assert (resource.resource_provider_namespace, resource.name, resource.state) == ("Scheduler", "jc1", "Started")
    assert resource.intrinsic_settings.plan == "Standard"

    succeeded(legacy.delete_job("cs1", "jc1", "job_id"))
    assert legacy.get_all_jobs("cs1", "jc1") == []
    succeeded(legacy.delete_job_collection("cs1", "jc1"))
    assert list(legacy.get_cloud_service("cs1").resources) == []
    succeeded(legacy.delete_cloud_service("cs1"))
    with pytest.raises(AzureMissingResourceHttpError) as missing:
        legacy.get_cloud_service("cs1")
    assert "<Code>ResourceNotFound</Code>" in str(missing.value)
    with pytest.raises(AzureHttpError) as unknown:
        legacy.get_operation_status(uuid.uuid4().hex)
    assert unknown.value.status_code == 404


def test_deleting_a_cloud_service_deletes_its_collections_and_jobs(legacy: SchedulerManagementService, api: httpx.Client, subscription: str) -> None:
    # The legacy client's own tests cleaned up that way: by deleting only the cloud service.
    legacy.create_cloud_service("cs2", "label", "description", "West Europe")
    legacy.create_job_collection("cs2", "jc2")
    legacy.create_job("cs2", "jc2", "j", http_job())
    arm_collection = f"/subscriptions/{subscription}/resourceGroups/cs2/providers/Microsoft.Scheduler/jobCollections/jc2"
    assert api.get(f"{arm_collection}/jobs/j").status_code == 200
    legacy.delete_cloud_service("cs2")
    assert api.get(arm_collection).status_code == 404
    assert api.get(f"{arm_collection}/jobs/j").status_code == 404


# --- the first concepts page's example -----------------------------------------------------


def test_the_first_concepts_pages_example_is_accepted_stored_and_read_back(classic: httpx.Client, collection: str, api: httpx.Client, subscription: str) -> None:
    sent = as_json(FIRST_EDITION_EXAMPLE)
    saved = classic.put(f"{collection}/jobs/seed", params={"api-version": "2014-04-01"}, json=sent)
    assert saved.status_code == 201, saved.text
    job = saved.json()
    assert job == {
        "id": "seed",
        "startTime": "2012-08-04T00:00:00Z",
        "action": {
            "type": "http",
            "retryPolicy": {"retryType": "none"},
            "request": {"uri": "http://contoso.com/foo", "method": "PUT", "body": "Posting from a timer", "headers": {"content-Type": "application/json"}},
            "errorAction": {"type": "http", "request": {"uri": "http://contoso.com/notifyError", "method": "POST"}},
        },
        "recurrence": {"frequency": "week", "interval": 1, "schedule": {"weekDays": ["monday", "wednesday", "friday"], "hours": [10, 22]},
                       "count": 10, "endTime": "2012-11-04T00:00:00Z"},
        "state": "disabled",  # the status it sent is the service's to keep: none yet, never ran
    }  # fmt: skip
    assert classic.get(f"{collection}/jobs/seed", params={"api-version": "2014-04-01"}).json() == job
    arm = api.get(f"/subscriptions/{subscription}/resourceGroups/cs/providers/Microsoft.Scheduler/jobCollections/jc/jobs/seed").json()
    assert arm["properties"]["action"]["type"] == "Http"
    assert arm["properties"]["recurrence"] == job["recurrence"]


# --- one store, two views -------------------------------------------------------------------


def test_a_resource_group_with_collections_is_a_cloud_service(classic: httpx.Client, api: httpx.Client, subscription: str) -> None:
    arm_collection = f"/subscriptions/{subscription}/resourceGroups/Made-By-Arm/providers/Microsoft.Scheduler/jobCollections/jc"
    assert api.put(arm_collection, json={"location": "northeurope", "properties": {"sku": {"name": "Free"}}}).status_code == 201
    listed = ElementTree.fromstring(classic.get("/cloudservices").content)
    [service] = listed.findall(f"{NS}CloudService")
    # As the real service listed resource groups: Label is the name, and this description.
    assert service.findtext(f"{NS}Name") == "Made-By-Arm"
    assert service.findtext(f"{NS}Label") == "Made-By-Arm"
    assert service.findtext(f"{NS}Description") == "Resource group based cloud service."
    assert service.findtext(f"{NS}GeoRegion") == "North Europe"
    assert service.findtext(f"{NS}Resources/{NS}Resource/{NS}IntrinsicSettings/{NS}Plan") == "Free"

    jobs = "/cloudservices/made-by-arm/resources/scheduler/~/jobCollections/jc/jobs"
    created = classic.post(jobs, params={"api-version": "2014-04-01"}, json=http_job(recurrence={"frequency": "hour"}))
    assert created.status_code == 201, created.text
    made_up = created.json()["id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made_up)
    arm_job = api.get(f"{arm_collection}/jobs/{made_up}")
    assert arm_job.status_code == 200
    assert arm_job.json()["properties"]["recurrence"] == {"frequency": "hour", "interval": 1}


def test_a_classic_collection_is_an_arm_collection_in_the_cloud_services_group(classic: httpx.Client, api: httpx.Client, subscription: str) -> None:
    assert classic.put("/cloudservices/web", content=XML_CLOUD_SERVICE.format(label="Web", region="West US")).status_code == 202
    quota = "<Quota><MaxJobCount>3</MaxJobCount><MaxRecurrence><Frequency>Hour</Frequency><Interval>2</Interval></MaxRecurrence></Quota>"  # within Free's 5 and hourly
    created = classic.put("/cloudservices/web/resources/scheduler/jobCollections/nightly", content=XML_COLLECTION.format(plan="free", quota=quota))
    assert created.status_code == 202, created.text
    arm = api.get(f"/subscriptions/{subscription}/resourceGroups/web/providers/Microsoft.Scheduler/jobCollections/nightly").json()
    assert arm["location"] == "West US"
    assert arm["properties"]["sku"] == {"name": "Free"}
    assert arm["properties"]["quota"] == {"maxJobCount": 3, "maxRecurrence": {"frequency": "hour", "interval": 2}}
    read = ElementTree.fromstring(classic.get("/cloudservices/web/resources/scheduler/~/jobCollections/nightly", params={"api-version": "2014-04-01"}).content)
    assert read.findtext(f"{NS}IntrinsicSettings/{NS}Quota/{NS}MaxRecurrence/{NS}Frequency") == "Hour"
    assert read.findtext(f"{NS}CloudServiceSettings/{NS}GeoRegion") == "West US"
    # A PUT of an existing collection changes its plan (the .NET client's update).
    assert classic.put("/cloudservices/web/resources/scheduler/jobCollections/nightly", content=XML_COLLECTION.format(plan="Standard", quota="")).status_code == 202
    assert api.get(f"/subscriptions/{subscription}/resourceGroups/web/providers/Microsoft.Scheduler/jobCollections/nightly").json()["properties"]["sku"] == {"name": "Standard"}


def test_the_dotnet_clients_name_check_is_a_get(classic: httpx.Client, collection: str) -> None:
    checks = "/cloudservices/cs/resources/scheduler/JobCollections/"
    taken = ElementTree.fromstring(classic.get(checks, params={"op": "checknameavailability", "resourceName": "jc"}).content)
    assert taken.tag == f"{NS}ResourceNameAvailabilityResponse"
    assert taken.findtext(f"{NS}IsAvailable") == "false"
    free = ElementTree.fromstring(classic.post(checks, params={"op": "checknameavailability", "resourceName": "other"}).content)
    assert (free.tag, free.findtext(f"{NS}Result")) == (f"{NS}AvailabilityResponse", "true")


def test_jobs_beyond_the_legacy_client_patch_list_filter_and_history(classic: httpx.Client, collection: str) -> None:
    version = {"api-version": "2014-04-01"}
    for name in ("a", "b", "c"):
        assert classic.put(f"{collection}/jobs/{name}", params=version, json=http_job()).status_code == 201
    patched = classic.patch(f"{collection}/jobs/b", params=version, json={"state": "disabled", "id": "ignored"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["state"] == "disabled"
    assert patched.json()["action"] == {"type": "http", "request": {"uri": "https://example.org/ping", "method": "GET"}}
    disabled = classic.get(f"{collection}/jobs", params=version | {"$filter": "state eq disabled"}).json()
    assert [job["id"] for job in disabled] == ["b"]
    page = classic.get(f"{collection}/jobs", params=version | {"$top": "1", "$skip": "1"}).json()
    assert [job["id"] for job in page] == ["b"]
    assert classic.get(f"{collection}/jobs/a/history", params=version | {"$filter": "status eq failed"}).json() == []
    assert classic.delete(f"{collection}/jobs/a", params=version).status_code == 200
    assert classic.get(f"{collection}/jobs/a", params=version).status_code == 404


# --- execution ------------------------------------------------------------------------------


def classic_request(pipeline: Pipeline, method: str, job: str, body: Any = None, **query: str) -> ApiRequest:
    collection = pipeline.collection
    return ApiRequest(
        method=method, url=f"http://local/{collection.subscription}/...", query=query,
        # The route as both APIs name its parts, so that either's operations can read it.
        route={"subscriptionId": collection.subscription, "cloudServiceName": collection.resource_group,
               "resourceGroupName": collection.resource_group, "jobCollectionName": collection.name,
               "jobId": job, "jobName": job},
        headers={"content-type": "application/json"}, body=json.dumps(body).encode() if body is not None else b"",
    )  # fmt: skip


def test_a_classic_job_fires_retries_and_both_apis_read_its_history(storage: str, target: Target) -> None:
    pipeline = Pipeline(storage)
    target.answer("/classic-down", 503, b"busy")
    action = {
        "type": "http",
        "request": {"uri": target.url("/classic-down"), "method": "POST"},
        "retryPolicy": {"retryType": "fixed", "retryInterval": "PT20S", "retryCount": 1},
    }
    saved = classic_operations.put_job(
        classic_request(pipeline, "PUT", "fires", {"startTime": START.isoformat(), "action": action}), pipeline.services
    )
    assert saved.status == 201
    pipeline.advance(timedelta(minutes=1))
    pipeline.advance(timedelta(seconds=20))
    assert len(target.received("/classic-down")) == 2  # the run and its one retry

    classic_history = classic_operations.list_history(classic_request(pipeline, "GET", "fires"), pipeline.services).body
    assert [(entry["jobId"], entry["status"], entry["actionName"], entry["retryCount"]) for entry in classic_history] == [
        ("fires", "failed", "mainAction", 1), ("fires", "failed", "mainAction", 0),
    ]  # fmt: skip
    arm_history = job_operations.list_history(classic_request(pipeline, "GET", "fires"), pipeline.services).body["value"]
    assert [entry["properties"]["retryCount"] for entry in arm_history] == [1, 0]
    assert [entry["properties"]["message"] for entry in arm_history] == [entry["message"] for entry in classic_history]
    failed_only = classic_operations.list_history(
        classic_request(pipeline, "GET", "fires", **{"$filter": "status eq Failed", "$top": "1"}), pipeline.services
    ).body
    assert len(failed_only) == 1
    job = JobId(pipeline.collection, "fires")
    assert pipeline.job(job).document.status.failure_count == 2


# --- bad input ------------------------------------------------------------------------------

JOBS = "/cloudservices/cs/resources/scheduler/~/jobCollections/jc/jobs"
V = "?api-version=2014-04-01"
BOMB = '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]><CloudService><Label>&b;</Label></CloudService>'
BAD_INPUT = [
    ("no-version-header", "GET", "/cloudservices", {"x-ms-version": ""}, None, 400, "MissingOrIncorrectVersionHeader", "versioning header"),
    ("malformed-version-header", "GET", "/cloudservices", {"x-ms-version": "latest"}, None, 400, "MissingOrIncorrectVersionHeader", "versioning header"),
    ("not-xml", "PUT", "/cloudservices/new", {}, "{not xml", 400, "BadRequest", "not valid XML"),
    ("wrong-root", "PUT", "/cloudservices/new", {}, "<Resource/>", 400, "BadRequest", "<CloudService>"),
    ("entity-expansion", "PUT", "/cloudservices/new", {}, BOMB, 400, "BadRequest", "not valid XML"),
    ("no-region", "PUT", "/cloudservices/new", {}, "<CloudService><Label>x</Label></CloudService>", 400, "BadRequest", "GeoRegion: is required"),
    ("bad-cloud-service-name", "PUT", "/cloudservices/bad%20name!", {}, XML_CLOUD_SERVICE.format(label="l", region="West US"), 400, "BadRequest", "cloudServiceName"),
    ("cloud-service-exists", "PUT", "/cloudservices/cs", {}, XML_CLOUD_SERVICE.format(label="l", region="West US"), 409, "ConflictError", "already exists"),
    ("no-such-cloud-service", "PUT", "/cloudservices/nowhere/resources/scheduler/jobCollections/jc", {}, XML_COLLECTION.format(plan="Free", quota=""), 404, "ResourceNotFound", "cloud service 'nowhere'"),
    ("unknown-plan", "PUT", "/cloudservices/cs/resources/scheduler/jobCollections/jc", {}, XML_COLLECTION.format(plan="Gold", quota=""), 400, "BadRequest", "IntrinsicSettings.Plan: 'Gold' is not one of"),
    ("quota-not-a-number", "PUT", "/cloudservices/cs/resources/scheduler/jobCollections/jc", {}, XML_COLLECTION.format(plan="Free", quota="<Quota><MaxJobCount>many</MaxJobCount></Quota>"), 400, "BadRequest", "IntrinsicSettings.Quota.MaxJobCount"),
    ("no-such-collection", "DELETE", "/cloudservices/cs/resources/scheduler/jobCollections/none", {}, None, 404, "ResourceNotFound", "job collection 'none' does not exist in cloud service 'cs'"),
    ("arm-api-version", "GET", f"{JOBS}?api-version=2016-03-01", {}, None, 400, "InvalidApiVersionParameter", "'2016-03-01'"),
    ("bad-frequency", "PUT", f"{JOBS}/j{V}", {}, http_job(recurrence={"frequency": "fortnight"}), 400, "BadRequest", "recurrence.frequency"),
    ("final-state", "PUT", f"{JOBS}/j{V}", {}, http_job(state="completed"), 400, "BadRequest", "state: only enabled or disabled"),
    ("rule-broken", "PUT", f"{JOBS}/j{V}", {}, http_job(recurrence={"frequency": "minute", "interval": 5000}), 400, "BadRequest", "recurrence.interval"),
    ("not-json", "PUT", f"{JOBS}/j{V}", {"content-type": "application/json"}, "{", 400, "BadRequest", "not valid JSON"),
    ("array-body", "POST", f"{JOBS}{V}", {}, [1], 400, "BadRequest", "JSON object"),
    ("job-in-no-collection", "PUT", f"/cloudservices/cs/resources/scheduler/~/jobCollections/none/jobs/j{V}", {}, http_job(), 404, "ResourceNotFound", "job collection 'none'"),
    ("no-such-job", "GET", f"{JOBS}/missing{V}", {}, None, 404, "NotFound", "Job 'missing' cannot be found."),
    ("bad-top", "GET", f"{JOBS}{V}&$top=0", {}, None, 400, "BadRequest", "$top: 0 is out of range"),
    ("bad-state-filter", "GET", f"{JOBS}{V}&$filter=state%20eq%20sleeping", {}, None, 400, "BadRequest", "$filter"),
    ("collection-arm-api-version", "GET", "/cloudservices/cs/resources/scheduler/~/jobCollections/jc?api-version=2016-03-01", {}, None, 400, "InvalidApiVersionParameter", "'2016-03-01'"),
    ("switch-arm-api-version", "PATCH", f"{JOBS}?api-version=2016-03-01", {}, {"state": "enabled"}, 400, "InvalidApiVersionParameter", "'2016-03-01'"),
    ("switch-to-final-state", "PATCH", JOBS, {}, {"state": "completed"}, 400, "BadRequest", "state: only enabled or disabled"),
    ("switch-without-state", "PATCH", JOBS, {}, {"stateDetails": "why"}, 400, "BadRequest", "state: is required"),
    ("switch-array-body", "PATCH", JOBS, {}, [], 400, "BadRequest", "JSON object"),
    ("switch-in-no-collection", "PATCH", "/cloudservices/cs/resources/scheduler/~/jobCollections/none/jobs", {}, {"state": "enabled"}, 404, "ResourceNotFound", "job collection 'none'"),
    ("reason-not-text", "PUT", f"{JOBS}/j{V}", {}, http_job(stateDetails=5), 400, "BadRequest", "stateDetails: must be a string"),
    ("reason-too-long", "PUT", f"{JOBS}/j{V}", {}, http_job(stateDetails="x" * 1025), 400, "BadRequest", "stateDetails: string should have at most 1024 characters"),
    ("switch-reason-too-long", "PATCH", JOBS, {}, {"state": "enabled", "stateDetails": "x" * 1025}, 400, "BadRequest", "stateDetails: string should have at most 1024 characters"),
    ("unknown-operation", "GET", f"/operations/{'0' * 32}", {}, None, 404, "ResourceNotFound", "no operation"),
    # What answered 500, or cost seconds (issue 30).
    ("future-version-header", "GET", "/cloudservices", {"x-ms-version": "9999-99-99"}, None, 400, "MissingOrIncorrectVersionHeader", "versioning header"),
    ("version-after-the-last", "GET", "/cloudservices", {"x-ms-version": "2016-01-01"}, None, 400, "MissingOrIncorrectVersionHeader", "versioning header"),
    ("version-not-a-date", "GET", "/cloudservices", {"x-ms-version": "2014-02-30"}, None, 400, "MissingOrIncorrectVersionHeader", "versioning header"),
    ("unknown-xml-encoding", "PUT", "/cloudservices/new", {}, '<?xml version="1.0" encoding="x-nonexistent"?><CloudService><GeoRegion>West US</GeoRegion></CloudService>', 400, "BadRequest", "unknown encoding: x-nonexistent"),
    ("geo-region-over-a-table-property", "PUT", "/cloudservices/new", {}, XML_CLOUD_SERVICE.format(label="l", region="r" * 33_000), 400, "BadRequest", "GeoRegion: is longer than 100 characters"),
    ("xml-body-too-large", "PUT", "/cloudservices/new", {}, "<CloudService>" + "<a>" * 580_000 + "</a>" * 580_000 + "</CloudService>", 400, "BadRequest", "at most 65536 are allowed"),
    ("xml-nested-too-deep", "PUT", "/cloudservices/new", {}, "<CloudService>" + "<a>" * 16 + "</a>" * 16 + "</CloudService>", 400, "BadRequest", "nests elements more than 16 deep"),
    ("external-entity", "PUT", "/cloudservices/new", {}, '<?xml version="1.0"?><!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]><CloudService><Label>&x;</Label><GeoRegion>r</GeoRegion></CloudService>', 400, "BadRequest", "not valid XML"),
    ("any-dtd", "PUT", "/cloudservices/new", {}, '<?xml version="1.0"?><!DOCTYPE CloudService><CloudService><GeoRegion>r</GeoRegion></CloudService>', 400, "BadRequest", "not valid XML"),
    ("quota-in-arabic-indic-digits", "PUT", "/cloudservices/cs/resources/scheduler/jobCollections/jc", {}, XML_COLLECTION.format(plan="Free", quota="<Quota><MaxJobCount>\u0663</MaxJobCount></Quota>"), 400, "BadRequest", "IntrinsicSettings.Quota.MaxJobCount"),
    ("top-in-arabic-indic-digits", "GET", f"{JOBS}{V}&$top=\u0663", {}, None, 400, "BadRequest", "$top: '\u0663' is not a whole number"),
    ("timespan-max-value", "PUT", f"{JOBS}/j{V}", {}, http_job(action={"type": "http", "request": {"uri": "https://example.org/", "method": "GET"}, "retryPolicy": {"retryType": "fixed", "retryInterval": "10675199.02:48:05.4775807"}}), 400, "BadRequest", "action.retryPolicy.retryInterval: is longer than 18 months"),
    ("three-million-days", "PUT", f"{JOBS}/j{V}", {}, http_job(action={"type": "http", "request": {"uri": "https://example.org/", "method": "GET"}, "retryPolicy": {"retryType": "fixed", "retryInterval": "3000000.00:00:00"}}), 400, "BadRequest", "action.retryPolicy.retryInterval: is longer than 18 months"),
    ("never-occurs", "PUT", f"{JOBS}/j{V}", {}, http_job(recurrence={"frequency": "month", "schedule": {"monthDays": [31], "monthlyOccurrences": [{"day": "monday", "occurrence": 1}]}}), 400, "BadRequest", "recurrence.schedule: never occurs"),
    ("malformed-operation-id", "GET", "/operations/not-an-id", {}, None, 404, "ResourceNotFound", "no operation"),
]  # fmt: skip


@pytest.mark.parametrize("case", BAD_INPUT, ids=[case[0] for case in BAD_INPUT])
def test_bad_input_gets_the_classic_error_format(classic: httpx.Client, collection: str, case: tuple[Any, ...]) -> None:
    _, method, path, headers, body, status, code, words = case
    content = body if isinstance(body, str) or body is None else json.dumps(body)
    answer = classic.request(method, path, headers=headers, content=content)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/xml")
    assert re.fullmatch(r"[0-9a-f]{32}", answer.headers["x-ms-request-id"])
    error = ElementTree.fromstring(answer.content)
    assert error.tag == f"{NS}Error"
    assert error.findtext(f"{NS}Code") == code
    assert words in (error.findtext(f"{NS}Message") or "")


def test_job_routes_take_the_version_header_alone(classic: httpx.Client, collection: str) -> None:
    """As Azure PowerShell 0.8.10 (the .NET SchedulerClient 3.0.0.0) PUT a job in the captures of
    Microsoft's outbound-authentication page (2014): `x-ms-version: 2013-03-01`, no api-version,
    answered 201. The other job routes alike; a wrong api-version is still refused."""
    dotnet = {"x-ms-version": "2013-03-01", "content-type": "application/json; charset=utf-8"}
    job = {"action": {"type": "http", "request": {
        "uri": "https://example.org/jobs/test", "method": "GET", "headers": {"x-ms-version": "2013-03-01"},
        "authentication": {"username": "user1", "password": "password", "type": "basic"}}},
        "recurrence": {"frequency": "minute", "interval": 1}}  # fmt: skip
    created = classic.put(f"{collection}/jobs/testScheduler", headers=dotnet, content=json.dumps(job))
    assert created.status_code == 201, created.text
    assert created.json()["action"]["request"]["authentication"] == {"type": "Basic", "username": "user1"}  # as captured
    assert classic.get(f"{collection}/jobs/testScheduler", headers=dotnet).json()["id"] == "testScheduler"
    assert [each["id"] for each in classic.get(f"{collection}/jobs", headers=dotnet).json()] == ["testScheduler"]
    assert classic.patch(f"{collection}/jobs/testScheduler", headers=dotnet, json={"state": "disabled"}).json()["state"] == "disabled"
    assert classic.get(f"{collection}/jobs/testScheduler/history", headers=dotnet).json() == []
    assert classic.post(f"{collection}/jobs", headers=dotnet, content=json.dumps(job)).status_code == 201
    assert classic.delete(f"{collection}/jobs/testScheduler", headers=dotnet).status_code == 200
    refused = classic.get(f"{collection}/jobs?api-version=2013-03-01", headers=dotnet)
    assert refused.status_code == 400
    assert ElementTree.fromstring(refused.content).findtext(f"{NS}Code") == "InvalidApiVersionParameter"


def test_classic_job_bodies_ignore_and_name_unknown_properties(classic: httpx.Client, collection: str) -> None:
    saved = classic.put(f"{collection}/jobs/tolerant?api-version=2014-04-01", json=http_job(recurence={"frequency": "hour"}))
    assert saved.status_code == 201, saved.text
    assert saved.headers["Warning"] == '299 - "recurence was ignored"'
    switched = classic.patch(f"{collection}/jobs", json={"state": "disabled", "recurrence": {}})
    assert switched.status_code == 200, switched.text
    assert switched.headers["Warning"] == '299 - "recurrence was ignored"'


def test_the_classic_routes_need_the_function_key(service: Service, subscription: str) -> None:
    answer = httpx.get(f"{service.base_url}/{subscription}/cloudservices", headers={"x-ms-version": "2014-10-01"}, timeout=10)
    assert answer.status_code == 401

