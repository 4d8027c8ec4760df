"""Exponential retries and overlapPolicy through the management API (docs/behaviour.md
#exponential-retries, #overlapping-occurrences): saved and read back as sent, refused with a 400
naming the field, described in the OpenAPI document, and read by the official SDK, which knows
neither."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from azure.core.pipeline.policies import HeadersPolicy
from azure.mgmt.scheduler import SchedulerManagementClient

from tests.api.test_jobs import (
    SUBSCRIPTION,
    collection_path,
    in_a_day,
    job_path,
    new_collection,
    unique,
)
from tests.conftest import Service

HTTP = {"type": "Http", "request": {"uri": "https://example.org/hook", "method": "POST"}}
EXPONENTIAL = {
    "retryType": "Exponential",
    "retryInterval": "PT30S",
    "maximumInterval": "PT1H",
    "retryCount": 8,
}


def job(retry_policy: dict[str, Any] | None = None, **properties: Any) -> dict[str, Any]:
    action = HTTP if retry_policy is None else HTTP | {"retryPolicy": retry_policy}
    recurrence = {"frequency": "Minute", "interval": 5}
    return {
        "properties": {"startTime": in_a_day(), "action": action, "recurrence": recurrence}
        | properties
    }


@pytest.fixture(scope="module")
def collection(service: Service) -> str:
    with httpx.Client(base_url=service.base_url, headers={"x-functions-key": service.key},
                      params={"api-version": "2016-03-01"}, timeout=10.0) as client:  # fmt: skip
        return new_collection(client)


def test_a_job_with_both_extensions_reads_back_as_sent(api: httpx.Client, collection: str) -> None:
    path = job_path(collection, unique("both"))
    created = api.put(path, json=job(EXPONENTIAL, overlapPolicy="skip"))
    assert created.status_code == 201, created.text
    properties = api.get(path).json()["properties"]
    assert properties["action"]["retryPolicy"] == EXPONENTIAL | {"retryType": "exponential"}
    assert properties["overlapPolicy"] == "Skip"
    assert created.json()["properties"] == properties


def test_a_job_without_them_reads_back_exactly_as_before(
    api: httpx.Client, collection: str
) -> None:
    path = job_path(collection, unique("plain"))
    sent = job({"retryType": "fixed", "retryInterval": "00:01:00", "retryCount": 2})
    assert api.put(path, json=sent).status_code == 201
    properties = api.get(path).json()["properties"]
    assert set(properties) == {"startTime", "action", "recurrence", "state", "status"}
    assert properties["action"]["retryPolicy"] == sent["properties"]["action"]["retryPolicy"]


def test_patch_sets_and_removes_the_overlap_policy(api: httpx.Client, collection: str) -> None:
    path = job_path(collection, unique("patched"))
    assert api.put(path, json=job()).status_code == 201
    patched = api.patch(path, json={"properties": {"overlapPolicy": "Allow"}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["properties"]["overlapPolicy"] == "Allow"
    removed = api.patch(path, json={"properties": {"overlapPolicy": None}})
    assert "overlapPolicy" not in removed.json()["properties"]


REFUSED = [
    ("unknown-overlap-policy", {"overlapPolicy": "Sometimes"}, "properties.overlapPolicy"),
    ("maximum-below-first-wait", {"retry_policy": EXPONENTIAL | {"maximumInterval": "PT20S"}},
     "properties.action.retryPolicy.maximumInterval: 20 seconds is shorter than the first wait (30 seconds)"),
    ("minimum-at-odds", {"retry_policy": EXPONENTIAL | {"minimumInterval": "PT1M"}},
     "properties.action.retryPolicy.minimumInterval: 1 minute differs from retryInterval (30 seconds)"),
    ("maximum-with-fixed", {"retry_policy": {"retryType": "fixed", "maximumInterval": "PT1H"}},
     "properties.action.retryPolicy.maximumInterval: goes only with retryType exponential"),
    ("maximum-not-a-duration", {"retry_policy": EXPONENTIAL | {"maximumInterval": "soon"}},
     "properties.action.retryPolicy.maximumInterval"),
    ("too-many-retries", {"retry_policy": EXPONENTIAL | {"retryCount": 21}},
     "properties.action.retryPolicy.retryCount: 21 is too many"),
    ("unknown-retry-type", {"retry_policy": {"retryType": "Linear"}}, "properties.action.retryPolicy.retryType"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "message"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED]
)
def test_what_breaks_a_rule_is_a_400_naming_the_field(api: httpx.Client, collection: str, body: dict[str, Any],
                                                      message: str) -> None:  # fmt: skip
    path = job_path(collection, unique("refused"))
    response = api.put(path, json=job(**body))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "BadRequest"
    assert message in response.json()["error"]["message"]
    assert api.get(path).status_code == 404


def test_a_free_collection_refuses_a_maximum_under_an_hour(api: httpx.Client) -> None:
    free = new_collection(api, sku="Free")
    body = job({"retryType": "exponential", "maximumInterval": "PT30M"})
    body["properties"]["recurrence"] = {"frequency": "Hour", "interval": 1}
    response = api.put(job_path(free, unique("free")), json=body)
    assert response.status_code == 400, response.text
    assert (
        "maximumInterval: 30 minutes is too short in a Free job collection: the least allowed is 1 hour"
        in response.text
    )


def test_preview_occurrences_checks_them_as_put_does(api: httpx.Client, collection: str) -> None:
    preview = api.post(f"{collection_path(collection)}/previewOccurrences", params={"count": 2},
                       json=job(EXPONENTIAL, overlapPolicy="Allow"))  # fmt: skip
    assert preview.status_code == 200, preview.text
    refused = api.post(f"{collection_path(collection)}/previewOccurrences",
                       json=job(EXPONENTIAL | {"maximumInterval": "PT1S"}))  # fmt: skip
    assert refused.status_code == 400
    assert "retryPolicy.maximumInterval" in refused.text


def test_the_openapi_document_describes_both(service: Service) -> None:
    schemas = httpx.get(f"{service.base_url}/openapi.json", timeout=10.0).json()["components"][
        "schemas"
    ]
    text = str(schemas)
    for name in (
        "maximumInterval",
        "minimumInterval",
        "overlapPolicy",
        "'exponential'",
        "'Wait'",
        "'Skip'",
        "'Allow'",
    ):
        assert name in text, name
    policy = next(
        schema for schema in schemas.values() if "maximumInterval" in schema.get("properties", {})
    )
    assert "longest wait" in str(policy["properties"]["maximumInterval"])


def test_the_official_sdk_reads_jobs_that_use_them(service: Service, api: httpx.Client) -> None:
    """azure-mgmt-scheduler knows neither: it reads the unknown retry type as text and drops the
    unknown properties, and reads the rest of the job as usual."""
    collection, name = new_collection(api), unique("sdk")  # its own: the SDK lists every job
    assert (
        api.put(
            job_path(collection, name), json=job(EXPONENTIAL, overlapPolicy="Allow")
        ).status_code
        == 201
    )
    with SchedulerManagementClient(credential=object(), subscription_id=SUBSCRIPTION, base_url=service.base_url,
                                   authentication_policy=HeadersPolicy({"x-functions-key": service.key}),
                                   retry_total=0) as client:  # fmt: skip
        read = client.jobs.get("jobs-rg", collection, name)
        listed = [each.name for each in client.jobs.list("jobs-rg", collection)]
    policy = read.properties.action.retry_policy
    assert policy.retry_type == "exponential"
    assert policy.retry_count == 8
    assert policy.retry_interval.total_seconds() == 30
    assert read.properties.recurrence.interval == 5
    assert read.properties.action.request.uri == HTTP["request"]["uri"]
    assert read.name in listed
