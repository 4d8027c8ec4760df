"""Jobs over HTTP, against the local host on Azurite (docs/behaviour.md#resources, #jobs, #extensions)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import JobState
from shared.storage.interface import Preconditions
from shared.storage.table_store import table_storage_from_connection_string
from tests.conftest import Service
from tests.factories import made_pfx

SUBSCRIPTION = "5b7c0000-1111-2222-3333-444444444444"
SECRET_VALUES = ("hunter2", "oauth-secret-value", "sv=2020&sig=abc", "c2FzLWtleQ==", "pfx-password")


def collection_path(name: str) -> str:
    return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/jobs-rg/providers/Microsoft.Scheduler/jobCollections/{name}"


def job_path(collection: str, job: str) -> str:
    return f"{collection_path(collection)}/jobs/{job}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def in_a_day() -> str:
    return (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def http_job(**properties: Any) -> dict[str, Any]:
    """A valid HTTP job body; keyword arguments replace top-level properties."""
    body = {
        "startTime": in_a_day(),
        "action": {"type": "Http", "request": {"uri": "https://example.org/ping", "method": "POST", "body": "hi"}},
        "recurrence": {"frequency": "Hour", "interval": 2},
    }
    return {"properties": body | properties}


def new_collection(api: httpx.Client, sku: str = "Standard", quota: dict[str, Any] | None = None) -> str:
    name = unique("jc")
    properties: dict[str, Any] = {"sku": {"name": sku}}
    if quota:
        properties["quota"] = quota
    response = api.put(collection_path(name), json={"location": "West Europe", "properties": properties})
    assert response.status_code == 201, response.text
    return name


def put_job(api: httpx.Client, collection: str, body: dict[str, Any], name: str | None = None) -> httpx.Response:
    return api.put(job_path(collection, name or unique("job")), json=body)


@pytest.fixture
def collection(api: httpx.Client) -> str:
    return new_collection(api)


# --- create, read, defaults -------------------------------------------------------------------


def test_create_then_get_with_defaults_and_status(api: httpx.Client, collection: str) -> None:
    body = http_job()
    start = body["properties"]["startTime"]
    created = put_job(api, collection, body, name="Nightly-Cleanup")
    assert created.status_code == 201, created.text
    job = created.json()
    assert job["id"] == job_path(collection, "Nightly-Cleanup")
    assert job["type"] == "Microsoft.Scheduler/jobCollections/jobs"
    assert job["name"] == f"{collection}/Nightly-Cleanup"
    properties = job["properties"]
    assert properties["state"] == "enabled"
    assert properties["startTime"] == start
    assert properties["recurrence"] == {"frequency": "hour", "interval": 2}
    assert "retryPolicy" not in properties["action"]  # echoed only if sent; its defaults still apply
    assert properties["status"] == {
        "executionCount": 0, "failureCount": 0, "faultedCount": 0, "nextExecutionTime": start,
    }
    fetched = api.get(job_path(collection, "nightly-cleanup"))
    assert fetched.status_code == 200
    assert fetched.json() == job
    assert fetched.headers["ETag"] == created.headers["ETag"]


def test_a_start_time_with_a_fraction_of_a_second_is_the_first_run(api: httpx.Client, collection: str) -> None:
    start = (datetime.now(UTC) + timedelta(minutes=5)).replace(microsecond=250_000)  # a script's "now + 5 min"
    body = http_job(startTime=start.isoformat(), recurrence={"frequency": "Day"})
    properties = put_job(api, collection, body).json()["properties"]
    assert datetime.fromisoformat(properties["status"]["nextExecutionTime"]) == start


def test_enum_values_and_names_in_any_case(api: httpx.Client, collection: str) -> None:
    body = {"Properties": {"ACTION": {"type": "http", "REQUEST": {"URI": "http://example.org/", "method": "get"}},
                           "recurrence": {"frequency": "week", "schedule": {"weekdays": ["monday"]}},
                           "state": "disabled"}}  # fmt: skip
    job = put_job(api, collection, body).json()["properties"]
    assert job["action"]["type"] == "Http"
    assert job["recurrence"]["frequency"] == "week"
    assert job["recurrence"]["schedule"]["weekDays"] == ["monday"]
    assert job["state"] == "disabled"
    assert "status" not in job  # disabled and never run: no status at all


def test_enum_values_are_answered_in_the_spelling_of_the_real_service(api: httpx.Client, collection: str) -> None:
    action = {"type": "SERVICEBUSQUEUE", "serviceBusQueueMessage": {
        "queueName": "q1", "namespace": "my-namespace", "message": "m", "transportType": "NETMESSAGING",
        "authentication": {"sasKeyName": "RootManageSharedAccessKey", "sasKey": "c2FzLWtleQ==", "type": "SHAREDACCESSKEY"}},
        "retryPolicy": {"retryType": "FIXED", "retryInterval": "PT1M", "retryCount": 2},
        "errorAction": {"type": "http", "request": {"uri": "http://example.org/", "method": "GET",
                                                    "authentication": {"type": "basic", "username": "u", "password": "p"}},
                        "retryPolicy": {"retryType": "NONE"}}}  # fmt: skip
    recurrence = {"frequency": "MONTH", "schedule": {"monthlyOccurrences": [{"day": "SUNDAY", "occurrence": 1}]}}
    properties = put_job(api, collection, http_job(action=action, recurrence=recurrence, state="ENABLED")).json()["properties"]
    assert properties["state"] == "enabled"
    assert properties["recurrence"] == {"frequency": "month", "interval": 1,
                                        "schedule": {"monthlyOccurrences": [{"day": "sunday", "occurrence": 1}]}}  # fmt: skip
    answered = properties["action"]
    assert answered["type"] == "ServiceBusQueue"
    assert answered["serviceBusQueueMessage"]["transportType"] == "netMessaging"
    assert answered["serviceBusQueueMessage"]["authentication"]["type"] == "sharedAccessKey"
    assert answered["retryPolicy"] == {"retryType": "fixed", "retryInterval": "PT1M", "retryCount": 2}
    assert answered["errorAction"]["type"] == "Http"
    assert answered["errorAction"]["request"]["authentication"]["type"] == "Basic"
    assert answered["errorAction"]["retryPolicy"] == {"retryType": "none"}
    for transport, spelled in (("amqp", "amqp"), ("NotSpecified", "notSpecified")):
        message = action["serviceBusQueueMessage"] | {"transportType": transport}
        sent = put_job(api, collection, http_job(action=action | {"serviceBusQueueMessage": message}))
        assert sent.json()["properties"]["action"]["serviceBusQueueMessage"]["transportType"] == spelled


def test_a_missing_job_is_404_naming_it(api: httpx.Client, collection: str) -> None:
    missing = api.get(job_path(collection, "Nowhere-Job"))
    assert missing.status_code == 404
    assert missing.json() == {"error": {"code": "NotFound", "message": "Job 'Nowhere-Job' cannot be found."}}
    patched = api.patch(job_path(collection, "Nowhere-Job"), json={"properties": {"state": "Disabled"}})
    assert (patched.status_code, patched.json()["error"]["code"]) == (404, "NotFound")


def test_status_sent_by_a_client_is_ignored(api: httpx.Client, collection: str) -> None:
    body = http_job(status={"executionCount": 99, "nextExecutionTime": "2001-01-01T00:00:00Z"})
    status = put_job(api, collection, body).json()["properties"]["status"]
    assert status["executionCount"] == 0
    assert status["nextExecutionTime"] != "2001-01-01T00:00:00Z"


def test_a_job_needs_an_existing_collection(api: httpx.Client) -> None:
    collection = unique("nowhere")
    response = put_job(api, collection, http_job())
    assert response.status_code == 404
    assert response.json() == {"error": {
        "code": "ResourceNotFound",
        "message": f"The Resource 'Microsoft.Scheduler/jobcollections/{collection}' under resource group 'jobs-rg' was not found.",
    }}  # fmt: skip


def test_the_sdk_spelling_of_occurrence_is_accepted(api: httpx.Client) -> None:
    collection = new_collection(api)
    body = http_job(recurrence={"frequency": "Month", "schedule": {"monthlyOccurrences": [{"day": "Friday", "Occurrence": -1}]}})
    response = put_job(api, collection, body)
    assert response.status_code == 201, response.text
    assert response.json()["properties"]["recurrence"]["schedule"]["monthlyOccurrences"] == [{"day": "friday", "occurrence": -1}]


# --- secrets ----------------------------------------------------------------------------------


def every_secret_kind() -> dict[str, Any]:
    pfx, _ = made_pfx("pfx-password")
    return {
        "type": "Https",
        "request": {"uri": "https://example.org/", "method": "GET",
                    "authentication": {"type": "ClientCertificate", "pfx": pfx, "password": "pfx-password"}},
        "errorAction": {
            "type": "StorageQueue",
            "queueMessage": {"storageAccount": "acct", "queueName": "jobs", "sasToken": "sv=2020&sig=abc", "message": "m"},
        },
    }  # fmt: skip


@pytest.mark.parametrize(
    "action",
    [
        {"type": "Http", "request": {"uri": "http://example.org/", "method": "GET",
                                     "authentication": {"type": "Basic", "username": "u", "password": "hunter2"}}},
        {"type": "Http", "request": {"uri": "http://example.org/", "method": "GET",
                                     "authentication": {"type": "ActiveDirectoryOAuth", "tenant": "t.onmicrosoft.com",
                                                        "audience": "https://management.core.windows.net/",
                                                        "clientId": "c", "secret": "oauth-secret-value"}}},
        {"type": "ServiceBusQueue", "serviceBusQueueMessage": {
            "queueName": "q1", "namespace": "my-namespace", "message": "m", "transportType": "netMessaging",
            "authentication": {"sasKeyName": "RootManageSharedAccessKey", "sasKey": "c2FzLWtleQ==", "type": "sharedAccessKey"}}},
        pytest.param(None, id="client_certificate_and_storage_queue"),
    ],
    ids=["basic", "oauth", "service_bus", "client_certificate_and_storage_queue"],
)
def test_secrets_are_kept_but_never_returned(api: httpx.Client, collection: str, action: dict[str, Any] | None) -> None:
    name = unique("secret")
    created = put_job(api, collection, http_job(action=action or every_secret_kind()), name=name)
    assert created.status_code == 201, created.text
    answers = [created.text, api.get(job_path(collection, name)).text,
               api.get(f"{collection_path(collection)}/jobs").text,
               api.patch(job_path(collection, name), json={"properties": {"state": "Disabled"}}).text]  # fmt: skip
    for answer in answers:
        for secret in SECRET_VALUES:
            assert secret not in answer
        assert '"pfx"' not in answer


def test_client_certificate_shows_its_facts(api: httpx.Client, collection: str) -> None:
    pfx, thumbprint = made_pfx("pw")
    action = {"type": "Https", "request": {"uri": "https://example.org/", "method": "GET",
                                            "authentication": {"type": "ClientCertificate", "pfx": pfx, "password": "pw"}}}  # fmt: skip
    authentication = put_job(api, collection, http_job(action=action)).json()["properties"]["action"]["request"]["authentication"]
    assert authentication["certificateThumbprint"] == thumbprint
    assert authentication["certificateSubjectName"] == "CN=scheduler-client"
    assert authentication["certificateExpiration"].endswith("Z")
    assert "certificateExpirationDate" not in authentication


def test_a_pfx_that_does_not_open_with_its_password_is_400(api: httpx.Client, collection: str) -> None:
    pfx, _ = made_pfx("right")
    action = {"type": "Https", "request": {"uri": "https://example.org/", "method": "GET",
                                            "authentication": {"type": "ClientCertificate", "pfx": pfx, "password": "wrong"}}}  # fmt: skip
    response = put_job(api, collection, http_job(action=action))
    assert response.status_code == 400
    assert "properties.action.request.authentication.pfx: does not open as a PKCS#12 (pfx) file" in response.json()["error"]["message"]


# --- validation ---------------------------------------------------------------------------------

INVALID = [
    ({"action": {"type": "Http"}}, "properties.action.request: is required for action type Http"),
    ({"action": {"type": "Http", "request": {"uri": "ftp://x/", "method": "GET"}}},
     "properties.action.request.uri: must be an absolute http or https URL"),
    ({"action": {"type": "Https", "request": {"uri": "http://x.org/", "method": "GET"}}},
     "properties.action.request.uri: must be an absolute https URL"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/" + "a" * 2048, "method": "GET"}}},
     "properties.action.request.uri: is 2061 characters; at most 2048 are allowed"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET", "headers": {f"h{i}": "v" for i in range(51)}}}},
     "properties.action.request.headers: has 51 headers; at most 50 are allowed"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET", "headers": {"big": "v" * 4094}}}},
     "properties.action.request.headers: are 4097 characters together; at most 4096 are allowed"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "POST", "body": "b" * 8193}}},
     "properties.action.request.body: is 8193 characters; at most 8192 are allowed"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET", "authentication": {"type": "Basic", "username": "u"}}}},
     "properties.action.request.authentication.password: is required for Basic authentication"),
    ({"action": {"type": "StorageQueue", "request": {"uri": "http://x.org/", "method": "GET"}}},
     "properties.action.request: does not go with action type StorageQueue; it needs queueMessage"),
    ({"action": {"type": "ServiceBusTopic", "serviceBusTopicMessage": {"namespace": "my-namespace", "message": "m"}}},
     "properties.action.serviceBusTopicMessage.topicPath: is required"),
    ({"action": {"type": "ServiceBusTopic", "serviceBusTopicMessage": {
        "namespace": "evil.example/x", "topicPath": "t", "message": "m",
        "authentication": {"sasKeyName": "k", "sasKey": "s", "type": "SharedAccessKey"}}}},
     "properties.action.serviceBusTopicMessage.namespace: must be 6 to 50 letters, digits and hyphens"),
    ({"action": {"type": "ServiceBusQueue", "serviceBusQueueMessage": {
        "namespace": "my-namespace", "queueName": "q1/../$cbs", "message": "m",
        "authentication": {"sasKeyName": "k", "sasKey": "s", "type": "SharedAccessKey"}}}},
     "properties.action.serviceBusQueueMessage.queueName: must be at most 260 letters"),
    ({"action": {"type": "ServiceBusQueue", "serviceBusQueueMessage": {
        "namespace": "my-namespace", "queueName": "q1", "message": "m",
        "authentication": {"sasKeyName": "k", "sasKey": "s", "type": "SharedAccessKey"},
        "brokeredMessageProperties": {"sessionId": "a", "partitionKey": "b"}}}},
     "properties.action.serviceBusQueueMessage.brokeredMessageProperties.partitionKey: must equal sessionId"),
    ({"action": {"type": "ServiceBusQueue", "serviceBusQueueMessage": {
        "namespace": "my-namespace", "queueName": "q1", "message": "m",
        "authentication": {"sasKeyName": "k", "sasKey": "s", "type": "SharedAccessKey"},
        "brokeredMessageProperties": {"messageId": "m" * 129}}}},
     "properties.action.serviceBusQueueMessage.brokeredMessageProperties.messageId: is 129 characters; at most 128"),
    ({"action": {"type": "StorageQueue", "queueMessage": {
        "storageAccount": "evil.example.com#", "queueName": "jobs", "sasToken": "sv=1&sig=x", "message": "m"}}},
     "properties.action.queueMessage.storageAccount: must be 3 to 24 letters and digits"),
    ({"action": {"type": "StorageQueue", "queueMessage": {
        "storageAccount": "myStorageAccount", "queueName": "My_Queue", "sasToken": "sv=1&sig=x", "message": "m"}}},
     "properties.action.queueMessage.queueName: must be 3 to 63 lower-case letters"),
    ({"action": {"type": "StorageQueue", "queueMessage": {
        "storageAccount": "contoso", "queueName": "jobs", "sasToken": "sv=1&sig=x", "message": "bell \u0007"}}},
     "properties.action.queueMessage.message: holds U+0007, which the queue message's XML cannot carry"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"}, "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT10S"}}},
     "properties.action.retryPolicy.retryInterval: 10 seconds is too short: the least allowed is 15 seconds"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"}, "retryPolicy": {"retryType": "Fixed", "retryCount": 21}}},
     "properties.action.retryPolicy.retryCount: 21 is too many: the most allowed is 20"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"}, "retryPolicy": {"retryType": "Fixed", "retryInterval": "soon"}}},
     "properties.action.retryPolicy.retryInterval: 'soon' is not an ISO 8601 duration such as 'PT30S' "
     "or a TimeSpan such as '00:00:30'"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"}, "retryPolicy": {"retryType": "Fixed", "retryInterval": "00:00:10"}}},
     "properties.action.retryPolicy.retryInterval: 10 seconds is too short: the least allowed is 15 seconds"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"}, "retryPolicy": {"retryType": "Fixed", "retryInterval": "25:00:00"}}},
     "properties.action.retryPolicy.retryInterval: '25:00:00' is not a TimeSpan"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"}, "retryPolicy": {"retryType": "Fixed", "retryInterval": "P99999999Y"}}},
     "properties.action.retryPolicy.retryInterval: 'P99999999Y' is longer than any duration allowed"),
    ({"startTime": "0001-01-01T00:00:00Z", "recurrence": {"frequency": "Minute", "timeZone": "Pacific/Kiritimati"}},
     "properties.startTime: 0001-01-01T00:00:00+00:00 is before 1900"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"}, "errorAction": {"type": "Http"}}},
     "properties.action.errorAction.request: is required for action type Http"),
    ({"recurrence": {"frequency": "Day", "schedule": {"weekDays": ["Monday"]}}},
     "properties.recurrence.schedule.weekDays: is allowed only with frequency week, not day"),
    ({"recurrence": {"frequency": "Hour", "interval": 1001}},
     "properties.recurrence.interval: 1001 is too long for frequency hour"),
    ({"startTime": "2099-01-01T00:00:00Z"}, "properties.startTime: 2099-01-01T00:00:00+00:00 is more than 18 months away"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET", "headers": {"str": 5}}}},
     "properties.action.request.headers.str: must be a string, not 5"),
    ({"state": "Completed"}, "properties.state: only enabled or disabled can be set; completed is set by the service"),
    ({"action": {"type": "Http", "request": {"uri": "http://x.org/", "method": "POST", "headers": {f"h{i}": "v" * 300 for i in range(48)}, "body": "b" * 8000}}},
     "properties: the job definition is"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), INVALID, ids=[m.split(":")[0] + f"-{n}" for n, (_, m) in enumerate(INVALID)])
def test_invalid_jobs_are_400_and_nothing_is_stored(api: httpx.Client, collection: str, change: dict[str, Any], message: str) -> None:
    name = unique("bad")
    response = put_job(api, collection, http_job(**change), name=name)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "BadRequest"
    assert message in response.json()["error"]["message"]
    assert api.get(job_path(collection, name)).status_code == 404


def test_free_collections_need_retry_intervals_of_an_hour(api: httpx.Client) -> None:
    collection = new_collection(api, sku="Free")
    action = {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"},
              "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT30M"}}  # fmt: skip
    response = put_job(api, collection, http_job(action=action))
    assert response.status_code == 400
    assert "30 minutes is too short in a Free job collection: the least allowed is 1 hour" in response.text
    as_timespan = put_job(api, collection, http_job(action=action | {"retryPolicy": {"retryType": "Fixed", "retryInterval": "00:30:00"}}))
    assert as_timespan.status_code == 400
    assert "30 minutes is too short in a Free job collection: the least allowed is 1 hour" in as_timespan.text
    hourly = put_job(api, collection, http_job(action=action | {"retryPolicy": {"retryType": "Fixed", "retryInterval": "01:00:00"}}))
    assert hourly.status_code == 201, hourly.text
    assert hourly.json()["properties"]["action"]["retryPolicy"] == {"retryType": "fixed", "retryInterval": "01:00:00"}
    default = put_job(api, collection, http_job())
    assert default.status_code == 201, default.text  # its default interval (1 hour) is not refused
    assert "retryPolicy" not in default.json()["properties"]["action"]


# --- retryPolicy and startTime echoed as sent ---------------------------------------------------


def retry_every(interval: str) -> dict[str, Any]:
    return {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"},
            "retryPolicy": {"retryType": "Fixed", "retryInterval": interval, "retryCount": 3}}  # fmt: skip


@pytest.mark.parametrize("interval", ["00:01:00", "PT1M", "1.02:03:04", "00:00:30.5", "PT30S", "P1D", "0:15"])
def test_a_retry_interval_reads_back_in_the_form_it_was_sent(api: httpx.Client, collection: str, interval: str) -> None:
    name = unique("retry")
    created = put_job(api, collection, http_job(action=retry_every(interval)), name=name)
    assert created.status_code == 201, created.text
    expected = {"retryType": "fixed", "retryInterval": interval, "retryCount": 3}
    assert created.json()["properties"]["action"]["retryPolicy"] == expected
    assert api.get(job_path(collection, name)).json()["properties"]["action"]["retryPolicy"] == expected


def test_a_retry_policy_is_echoed_only_with_what_was_sent(api: httpx.Client, collection: str) -> None:
    action = {"type": "Http", "request": {"uri": "http://x.org/", "method": "GET"}, "retryPolicy": {"retryCount": 2}}
    policy = put_job(api, collection, http_job(action=action)).json()["properties"]["action"]["retryPolicy"]
    assert policy == {"retryCount": 2}
    none = action | {"retryPolicy": {"retryType": "None"}}
    assert put_job(api, collection, http_job(action=none)).json()["properties"]["action"]["retryPolicy"] == {"retryType": "none"}


@pytest.mark.parametrize(
    ("sent", "answered"),
    [("{day}T03:04:05.1234567Z", "{day}T03:04:05.1234567Z"),
     ("{day}T05:04:05+02:00", "{day}T03:04:05Z"),
     ("{day}T03:04:05.1200000Z", "{day}T03:04:05.12Z"),
     ("{day}T03:04:05", "{day}T03:04:05Z")],
)  # fmt: skip
def test_start_time_reads_back_in_utc_to_the_100_ns(api: httpx.Client, collection: str, sent: str, answered: str) -> None:
    # A day ahead (a start may lie at most 18 months ahead), at the same time of day every run.
    day = (datetime.now(UTC) + timedelta(days=2)).date().isoformat()
    sent, answered = sent.format(day=day), answered.format(day=day)
    name = unique("start")
    created = put_job(api, collection, {"properties": {"startTime": sent, "action": retry_every("PT30S")}}, name=name)
    assert created.status_code == 201, created.text
    assert created.json()["properties"]["startTime"] == answered
    assert api.get(job_path(collection, name)).json()["properties"]["startTime"] == answered


def test_the_next_execution_time_shows_a_fraction_only_when_there_is_one(api: httpx.Client, collection: str) -> None:
    start = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    whole = put_job(api, collection, http_job(startTime=start.isoformat())).json()["properties"]
    assert whole["status"]["nextExecutionTime"] == start.strftime("%Y-%m-%dT%H:%M:%SZ")
    half = start.replace(microsecond=500_000)
    fraction = put_job(api, collection, http_job(startTime=half.isoformat())).json()["properties"]
    assert fraction["startTime"] == start.strftime("%Y-%m-%dT%H:%M:%S.5Z")
    assert fraction["status"]["nextExecutionTime"] == start.strftime("%Y-%m-%dT%H:%M:%S.5Z")


# --- quotas and final states ------------------------------------------------------------------


def test_free_collections_hold_five_jobs_and_a_deleted_job_frees_its_place(api: httpx.Client) -> None:
    collection = new_collection(api, sku="Free")
    names = [unique("j") for _ in range(5)]
    for name in names:
        assert put_job(api, collection, http_job(), name=name).status_code == 201
    sixth = put_job(api, collection, http_job())
    assert sixth.status_code == 409
    assert "already holds 5 jobs, its quota maxJobCount" in sixth.json()["error"]["message"]
    assert put_job(api, collection, http_job(), name=names[0]).status_code == 200  # replacing
    assert api.delete(job_path(collection, names[0])).status_code == 200
    assert put_job(api, collection, http_job()).status_code == 201
    assert put_job(api, collection, http_job()).status_code == 409


def test_a_collection_quota_overrides_the_job_count(api: httpx.Client) -> None:
    collection = new_collection(api, quota={"maxJobCount": 1})
    name = unique("only")
    assert put_job(api, collection, http_job(), name=name).status_code == 201
    assert put_job(api, collection, http_job()).status_code == 409
    assert put_job(api, collection, http_job(), name=name).status_code == 200  # replacing is fine


@pytest.mark.parametrize(
    ("sku", "recurrence", "status"),
    [
        ("Free", {"frequency": "Minute", "interval": 30}, 409),
        ("Free", {"frequency": "Day", "schedule": {"minutes": [0, 15, 30, 45]}}, 409),
        ("Free", {"frequency": "Hour"}, 201),
        ("Free", {"frequency": "Day", "schedule": {"hours": [5, 17]}}, 201),
        ("Standard", {"frequency": "Minute"}, 201),
    ],
)
def test_jobs_may_not_recur_more_often_than_the_quota(api: httpx.Client, sku: str, recurrence: dict[str, Any], status: int) -> None:
    response = put_job(api, new_collection(api, sku=sku), http_job(recurrence=recurrence))
    assert response.status_code == status, response.text
    if status == 409:
        assert "more often than the job collection's quota maxRecurrence allows (once every 1 hour)" in response.text


def test_completed_and_faulted_jobs_are_final(api: httpx.Client, collection: str, service: Service) -> None:
    name = unique("done")
    assert put_job(api, collection, http_job(), name=name).status_code == 201
    # The executor sets final states; here the store is written as it will write it.
    store = table_storage_from_connection_string(service.storage)
    job = JobId(CollectionId(SUBSCRIPTION, "jobs-rg", collection), name)
    slot = store.jobs.job_slot(job)
    assert slot.current is not None
    store.jobs.save_job(job, slot.current.document.with_state(JobState.COMPLETED), Preconditions(), slot)
    for attempt in (api.put(job_path(collection, name), json=http_job()),
                    api.patch(job_path(collection, name), json={"properties": {"state": "Enabled"}})):  # fmt: skip
        assert attempt.status_code == 409
        assert f"The job '{name}' is completed, a final state" in attempt.json()["error"]["message"]
    assert api.delete(job_path(collection, name)).status_code == 200


# --- patch, if-match, delete --------------------------------------------------------------------


def test_patch_merges_and_null_removes(api: httpx.Client, collection: str) -> None:
    name = unique("patched")
    action = {"type": "Http", "request": {"uri": "http://example.org/", "method": "GET",
                                          "authentication": {"type": "Basic", "username": "u", "password": "hunter2"}}}  # fmt: skip
    assert put_job(api, collection, http_job(action=action), name=name).status_code == 201
    patched = api.patch(job_path(collection, name), json={"properties": {"recurrence": {"interval": 3}}})
    assert patched.status_code == 200, patched.text
    properties = patched.json()["properties"]
    assert properties["recurrence"] == {"frequency": "hour", "interval": 3}
    assert properties["action"]["request"]["authentication"] == {"type": "Basic", "username": "u"}
    removed = api.patch(job_path(collection, name), json={"properties": {"action": {"request": {"authentication": None}}}})
    assert "authentication" not in removed.json()["properties"]["action"]["request"]
    invalid = api.patch(job_path(collection, name), json={"properties": {"recurrence": {"frequency": "Fortnight"}}})
    assert invalid.status_code == 400
    assert api.get(job_path(collection, name)).json()["properties"]["recurrence"]["interval"] == 3


def test_if_match_on_jobs(api: httpx.Client, collection: str) -> None:
    name = unique("etag")
    body = http_job()
    etag = put_job(api, collection, body, name=name).headers["ETag"]
    assert api.put(job_path(collection, name), json=body, headers={"If-Match": '"old"'}).status_code == 412
    # The same definition again changes nothing, so the etag stays; another one changes it.
    same = api.put(job_path(collection, name), json=body, headers={"If-Match": etag})
    assert same.status_code == 200 and same.headers["ETag"] == etag
    changed = http_job(recurrence={"frequency": "Hour", "interval": 3})
    assert api.put(job_path(collection, name), json=changed, headers={"If-Match": etag}).status_code == 200
    assert api.delete(job_path(collection, name), headers={"If-Match": etag}).status_code == 412


def test_delete_job_and_deleting_a_collection_deletes_its_jobs(api: httpx.Client) -> None:
    collection = new_collection(api)
    names = [unique("j") for _ in range(3)]
    for name in names:
        assert put_job(api, collection, http_job(), name=name).status_code == 201
    assert api.delete(job_path(collection, names[0])).status_code == 200
    assert api.delete(job_path(collection, names[0])).status_code == 204
    assert api.delete(collection_path(collection)).status_code == 200
    api.put(collection_path(collection), json={"location": "West Europe"})
    assert api.get(f"{collection_path(collection)}/jobs").json() == {"value": [], "nextLink": None}


# --- listing ------------------------------------------------------------------------------------


def test_next_link_is_built_on_the_configured_base_without_the_key_or_a_forged_host(api: httpx.Client, service: Service) -> None:
    collection = new_collection(api)
    for n in range(2):
        assert put_job(api, collection, http_job(), name=f"job-{n}").status_code == 201
    job = job_path(collection, "job-0")
    store = table_storage_from_connection_string(service.storage)
    job_id = JobId(CollectionId(SUBSCRIPTION, "jobs-rg", collection), "job-0")
    store.history.add(job_id, [(f"{n:020d}-s99", {"status": "Completed"}) for n in range(2)])
    with httpx.Client(base_url=service.base_url, timeout=5) as bare:  # the key in the query, not a header
        for path in (f"{collection_path(collection)}/jobs", f"{job}/history"):
            answer = bare.get(path, params={"api-version": "2016-03-01", "code": service.key, "$top": 1},
                              headers={"Host": "attacker.example"})  # fmt: skip
            assert answer.status_code == 200, answer.text
            link = answer.json()["nextLink"]
            # The local host's own address (the site's host name), as configured: not the Host header.
            assert link.startswith(f"{service.base_url}{path}?"), link
            assert "attacker" not in link and "code=" not in link and service.key not in link
            following = bare.get(link, headers={"x-functions-key": service.key})
            assert following.status_code == 200 and len(following.json()["value"]) == 1


def test_list_pages_with_top_skip_next_link_and_state_filter(api: httpx.Client) -> None:
    collection = new_collection(api, quota={"maxJobCount": 20})
    names = sorted(f"job-{n:02d}" for n in range(7))
    for n, name in enumerate(names):
        state = "Disabled" if n % 3 == 0 else "Enabled"
        assert put_job(api, collection, http_job(state=state), name=name).status_code == 201
    first = api.get(f"{collection_path(collection)}/jobs", params={"$top": 3}).json()
    assert [job["name"].split("/")[1] for job in first["value"]] == names[:3]
    second = httpx.get(first["nextLink"], headers={"x-functions-key": api.headers["x-functions-key"]}, timeout=5).json()
    assert [job["name"].split("/")[1] for job in second["value"]] == names[3:6]
    third = httpx.get(second["nextLink"], headers={"x-functions-key": api.headers["x-functions-key"]}, timeout=5).json()
    assert [job["name"].split("/")[1] for job in third["value"]] == names[6:]
    assert third["nextLink"] is None  # the last page says so
    disabled = api.get(f"{collection_path(collection)}/jobs", params={"$filter": "state eq 'disabled'"}).json()
    assert [job["name"].split("/")[1] for job in disabled["value"]] == [names[0], names[3], names[6]]
    url: str | None = str(api.get(f"{collection_path(collection)}/jobs", params={"$filter": "state eq 'disabled'", "$top": 1}).url)
    followed = []
    while url:
        one = httpx.get(url, headers={"x-functions-key": api.headers["x-functions-key"]}, timeout=5).json()
        followed += [job["name"].split("/")[1] for job in one["value"]]
        url = one["nextLink"]
    assert followed == [names[0], names[3], names[6]]  # filtered pages, each job once
    bad = api.get(f"{collection_path(collection)}/jobs", params={"$skiptoken": "not a token!"})
    assert bad.status_code == 400 and "$skiptoken" in bad.json()["error"]["message"]


@pytest.mark.parametrize(
    ("query", "message"),
    [({"$top": "0"}, "$top: 0 is out of range: 1..100"), ({"$top": "101"}, "$top: 101 is out of range"),
     ({"$skip": "-1"}, "$skip: -1 is out of range"), ({"$top": "ten"}, "$top: 'ten' is not a whole number"),
     ({"$filter": "name eq 'x'"}, "$filter: 'name eq 'x'' is not supported; use state eq '<one of enabled, disabled, completed, faulted>'")],
)  # fmt: skip
def test_bad_list_parameters_are_400(api: httpx.Client, collection: str, query: dict[str, str], message: str) -> None:
    response = api.get(f"{collection_path(collection)}/jobs", params=query)
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]


# --- enable, disable, run now -------------------------------------------------------------------


def test_disable_and_enable_every_job_of_a_collection(api: httpx.Client) -> None:
    collection = new_collection(api)
    names = [unique("j") for _ in range(3)]
    for name in names:
        put_job(api, collection, http_job(), name=name)
    assert api.post(f"{collection_path(collection)}/disable").status_code == 200
    for name in names:
        properties = api.get(job_path(collection, name)).json()["properties"]
        assert properties["state"] == "disabled"
        assert "status" not in properties  # disabled and never run
    assert api.get(collection_path(collection)).json()["properties"]["state"] == "Disabled"
    assert api.post(f"{collection_path(collection)}/enable").status_code == 200
    for name in names:
        properties = api.get(job_path(collection, name)).json()["properties"]
        assert properties["state"] == "enabled"
        assert properties["status"]["nextExecutionTime"] == properties["startTime"]
    assert api.get(collection_path(collection)).json()["properties"]["state"] == "Enabled"


# --- our extensions: occurrences --------------------------------------------------------------


def test_next_occurrences_of_a_saved_job(api: httpx.Client, collection: str) -> None:
    name = unique("occ")
    start = in_a_day()
    put_job(api, collection, http_job(startTime=start, recurrence={"frequency": "Day", "count": 3}), name=name)
    answer = api.get(f"{job_path(collection, name)}/nextOccurrences").json()["value"]
    first = datetime.fromisoformat(start)
    assert answer == [(first + timedelta(days=n)).isoformat().replace("+00:00", "Z") for n in range(3)]
    assert len(api.get(f"{job_path(collection, name)}/nextOccurrences", params={"count": 2}).json()["value"]) == 2
    assert api.get(f"{job_path(collection, name)}/nextOccurrences", params={"count": 101}).status_code == 400


def test_preview_checks_a_body_without_saving_it(api: httpx.Client, collection: str) -> None:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    next_monday = today + timedelta(days=7 - today.weekday())
    body = http_job(startTime=next_monday.isoformat(),
                    recurrence={"frequency": "Week", "schedule": {"weekDays": ["Wednesday"], "hours": [6]}})  # fmt: skip
    preview = api.post(f"{collection_path(collection)}/previewOccurrences", params={"count": 3}, json=body)
    assert preview.status_code == 200, preview.text
    wednesdays = [next_monday + timedelta(days=2 + 7 * n, hours=6) for n in range(3)]
    assert preview.json()["value"] == [moment.isoformat().replace("+00:00", "Z") for moment in wednesdays]
    assert preview.json()["schedule"].startswith("Wednesdays at 06:00 UTC")  # for a form's preview
    assert "timeZone" not in preview.json()  # a schedule in UTC
    invalid = api.post(f"{collection_path(collection)}/previewOccurrences", json=http_job(recurrence={"frequency": "Day", "interval": 0}))
    assert invalid.status_code == 400
    assert [detail["target"] for detail in invalid.json()["error"]["details"]] == ["properties.recurrence.interval"]
    assert api.get(f"{collection_path(collection)}/jobs").json() == {"value": [], "nextLink": None}
