"""A collection's quota may lower its SKU's limits, never raise them, and no change of SKU or
quota may leave the jobs it holds over its new limits (docs/behaviour.md#quotas); a client sets
only the states a client may set (docs/behaviour.md#collections). Through the local host, both
APIs; each refused change leaves the collection exactly as it was."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest

from shared.domain.collection import MaxRecurrence, Quota, SkuName, quota_problems
from shared.domain.schedule.recurrence import Frequency
from shared.storage.collection_codec import decode_collection
from tests.api.test_classic_api import NS, XML_CLOUD_SERVICE, XML_COLLECTION
from tests.conftest import Service

SUBSCRIPTION = "9a0c0000-7777-8888-9999-000000000018"


def collection_path(name: str, group: str = "caps-rg") -> str:
    return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}/providers/Microsoft.Scheduler/jobCollections/{name}"


def unique(prefix: str = "jc") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def body(sku: str, quota: dict[str, Any] | None = None, **properties: Any) -> dict[str, Any]:
    sent: dict[str, Any] = {"sku": {"name": sku}} | properties
    if quota is not None:
        sent["quota"] = quota
    return {"location": "West Europe", "properties": sent}


def created(api: httpx.Client, sku: str, quota: dict[str, Any] | None = None) -> str:
    name = unique()
    response = api.put(collection_path(name), json=body(sku, quota))
    assert response.status_code == 201, response.text
    return name


def add_jobs(api: httpx.Client, collection: str, count: int, frequency: str = "Hour", prefix: str = "job") -> list[str]:
    """`count` disabled jobs recurring once a `frequency`, named `{prefix}-0`, `{prefix}-1`, ..."""
    names = [f"{prefix}-{n}" for n in range(count)]
    for name in names:
        job = {"properties": {"action": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}},
                              "recurrence": {"frequency": frequency}, "state": "Disabled"}}  # fmt: skip
        response = api.put(f"{collection_path(collection)}/jobs/{name}", json=job)
        assert response.status_code == 201, response.text
    return names


def refused(response: httpx.Response, status: int, code: str, message: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["message"]) == (code, message)  # a 400 adds `details`, per field


def snapshot(api: httpx.Client, path: str) -> tuple[Any, str]:
    """A collection as read, body and ETag: unchanged only if nothing at all was written."""
    read = api.get(path)
    assert read.status_code == 200, read.text
    return read.json(), read.headers["ETag"]


# --- the rule on its own ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sku", "quota", "problems"),
    [
        (SkuName.FREE, Quota(max_job_count=5, max_recurrence=MaxRecurrence(frequency=Frequency.HOUR)), []),
        (SkuName.FREE, Quota(max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE, interval=60)), []),
        (SkuName.FREE, Quota(max_job_count=6), ["properties.quota.maxJobCount: 6 is too large for the Free SKU: the most allowed is 5"]),
        (SkuName.FREE, Quota(max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE, interval=59)),
         ["properties.quota.maxRecurrence: once every 59 minutes is too often for the Free SKU: the most often allowed is once every 1 hour"]),
        (SkuName.STANDARD, Quota(max_job_count=51), ["properties.quota.maxJobCount: 51 is too large for the Standard SKU: the most allowed is 50"]),
        (SkuName.P10_PREMIUM, Quota(max_job_count=51), ["properties.quota.maxJobCount: 51 is too large for the P10Premium SKU: the most allowed is 50"]),
        (SkuName.P20_PREMIUM, Quota(max_job_count=1000, max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE)), []),
        (SkuName.P20_PREMIUM, Quota(max_job_count=1001), ["properties.quota.maxJobCount: 1001 is too large for the P20Premium SKU: the most allowed is 1000"]),
        (SkuName.FREE, Quota(max_job_occurrence=10**9), []),  # no SKU limit for it
        (SkuName.STANDARD, Quota(max_recurrence=MaxRecurrence(frequency=Frequency.YEAR, interval=10**8)),
         ["properties.quota.maxRecurrence: once every 100000000 years is longer than any recurrence may be: the longest allowed is 18 months (548 days)"]),
    ],
    ids=["free-at-its-limits", "free-60-minutes", "free-6-jobs", "free-59-minutes", "standard-51-jobs", "p10-51-jobs",
         "p20-at-its-limits", "p20-1001-jobs", "max-job-occurrence-unchecked", "longer-than-a-recurrence"],
)  # fmt: skip
def test_a_quota_may_lower_its_skus_limits_never_raise_them(sku: SkuName, quota: Quota, problems: list[str]) -> None:
    assert [str(problem) for problem in quota_problems(sku, quota)] == problems


def test_a_collection_stored_above_its_skus_limits_is_held_to_them() -> None:
    """Collections saved before quotas were capped may say more than their SKU allows."""
    stored = {"properties": {"sku": {"name": "Free"}, "state": "Enabled",
                             "quota": {"maxJobCount": 100000, "maxRecurrence": {"frequency": "minute", "interval": 1}}}}  # fmt: skip
    assert decode_collection(stored).effective_quota == Quota(max_job_count=5, max_recurrence=MaxRecurrence(frequency=Frequency.HOUR))


# --- a quota above the SKU's limits: 400 --------------------------------------------------------


@pytest.mark.parametrize(
    ("sku", "quota", "message"),
    [
        ("Free", {"maxJobCount": 100000}, "properties.quota.maxJobCount: 100000 is too large for the Free SKU: the most allowed is 5"),
        ("free", {"maxRecurrence": {"frequency": "Minute", "interval": 1}},
         "properties.quota.maxRecurrence: once every 1 minute is too often for the Free SKU: the most often allowed is once every 1 hour"),
        ("Standard", {"maxJobCount": 51, "maxRecurrence": {"frequency": "Hour"}},
         "properties.quota.maxJobCount: 51 is too large for the Standard SKU: the most allowed is 50"),
        ("P20Premium", {"maxJobCount": 1001}, "properties.quota.maxJobCount: 1001 is too large for the P20Premium SKU: the most allowed is 1000"),
    ],
    ids=["free-jobs", "free-minutely", "standard-jobs", "p20-jobs"],
)  # fmt: skip
def test_a_put_with_a_quota_above_its_sku_is_400_and_creates_nothing(
    api: httpx.Client, sku: str, quota: dict[str, Any], message: str
) -> None:
    name = unique()
    refused(api.put(collection_path(name), json=body(sku, quota)), 400, "BadRequest", message)
    assert api.get(collection_path(name)).status_code == 404


def test_quotas_at_the_skus_limits_and_any_max_job_occurrence_are_taken(api: httpx.Client) -> None:
    for sku, quota in [("Free", {"maxJobCount": 5, "maxRecurrence": {"frequency": "hour", "interval": 1}}),
                       ("Standard", {"maxJobCount": 50, "maxRecurrence": {"frequency": "minute", "interval": 1}}),
                       ("P20Premium", {"maxJobCount": 1000}),
                       ("Free", {"maxJobOccurrence": 1000000})]:  # fmt: skip
        answer = api.put(collection_path(unique()), json=body(sku, quota))
        assert answer.status_code == 201, answer.text


def test_a_patch_raising_a_quota_above_its_sku_is_400_and_changes_nothing(api: httpx.Client) -> None:
    name = created(api, "Standard", {"maxJobCount": 10})
    before = snapshot(api, collection_path(name))
    refused(api.patch(collection_path(name), json={"properties": {"quota": {"maxJobCount": 51}}}), 400, "BadRequest",
            "properties.quota.maxJobCount: 51 is too large for the Standard SKU: the most allowed is 50")  # fmt: skip
    # The quota a PATCH sends is checked against the SKU it moves to.
    to_free = {"properties": {"sku": {"name": "Free"}, "quota": {"maxJobCount": 10}}}
    refused(api.patch(collection_path(name), json=to_free), 400, "BadRequest",
            "properties.quota.maxJobCount: 10 is too large for the Free SKU: the most allowed is 5")  # fmt: skip
    assert snapshot(api, collection_path(name)) == before


# --- a change that leaves the jobs over the new limits: 409 -------------------------------------


def test_moving_a_collection_with_too_many_jobs_to_a_smaller_sku_is_409(api: httpx.Client) -> None:
    name = created(api, "Standard")
    add_jobs(api, name, 6)
    before = snapshot(api, collection_path(name))
    message = ("Moving the job collection to Free would leave it over its limits: it holds 6 jobs, and maxJobCount "
               "would allow 5. Nothing was changed; delete or change those jobs first.")  # fmt: skip
    refused(api.patch(collection_path(name), json={"properties": {"sku": {"name": "Free"}}}), 409, "Conflict", message)
    refused(api.put(collection_path(name), json=body("Free")), 409, "Conflict", message)
    assert snapshot(api, collection_path(name)) == before
    assert len(api.get(f"{collection_path(name)}/jobs").json()["value"]) == 6


def test_moving_a_collection_with_jobs_that_run_too_often_is_409_naming_them(api: httpx.Client) -> None:
    name = created(api, "P10Premium")
    add_jobs(api, name, 2, frequency="Day", prefix="daily")
    add_jobs(api, name, 1, frequency="Minute", prefix="minutely")
    before = snapshot(api, collection_path(name))
    refused(api.patch(collection_path(name), json={"properties": {"sku": {"name": "Free"}}}), 409, "Conflict",
            "Moving the job collection to Free would leave it over its limits: 1 job (minutely-0) runs more often "
            "than maxRecurrence would allow (once every 1 hour). Nothing was changed; delete or change those jobs "
            "first.")  # fmt: skip
    assert snapshot(api, collection_path(name)) == before


def test_lowering_the_quota_below_what_the_collection_holds_is_409(api: httpx.Client) -> None:
    name = created(api, "Standard")
    add_jobs(api, name, 3, frequency="Minute")
    before = snapshot(api, collection_path(name))
    lower = {"properties": {"quota": {"maxJobCount": 2, "maxRecurrence": {"frequency": "Day", "interval": 1}}}}
    refused(api.patch(collection_path(name), json=lower), 409, "Conflict",
            "This change of the job collection's quota would leave it over its limits: it holds 3 jobs, and "
            "maxJobCount would allow 2; 3 jobs (job-0, job-1, job-2) run more often than maxRecurrence would allow "
            "(once every 1 day). Nothing was changed; delete or change those jobs first.")  # fmt: skip
    assert snapshot(api, collection_path(name)) == before


def test_a_change_the_jobs_fit_is_taken(api: httpx.Client) -> None:
    name = created(api, "Standard")
    add_jobs(api, name, 5)
    moved = api.patch(collection_path(name), json={"properties": {"sku": {"name": "Free"}}})
    assert moved.status_code == 200, moved.text
    assert moved.json()["properties"]["sku"] == {"name": "Free"}
    back = api.put(collection_path(name), json=body("P20Premium", {"maxJobCount": 5}))
    assert back.status_code == 201, back.text


# --- states a client may set ------------------------------------------------------------------


def test_a_client_may_not_set_a_collection_deleted(api: httpx.Client) -> None:
    message = ("properties.state: only Enabled, Disabled or Suspended can be set; Deleted is the service's own "
               "(DELETE removes a collection)")  # fmt: skip
    name = unique()
    refused(api.put(collection_path(name), json=body("Standard", state="Deleted")), 400, "BadRequest", message)
    assert api.get(collection_path(name)).status_code == 404
    existing = created(api, "Standard")
    before = snapshot(api, collection_path(existing))
    refused(api.patch(collection_path(existing), json={"properties": {"state": "deleted"}}), 400, "BadRequest", message)
    assert snapshot(api, collection_path(existing)) == before


def test_suspended_is_taken_as_the_real_service_took_it(api: httpx.Client) -> None:
    """The recordings create collections in state Suspended (Scenario_JobCollectionCreateUpdateDelete)."""
    answer = api.put(collection_path(unique()), json=body("Standard", {"maxJobCount": 20}, state="Suspended"))
    assert answer.status_code == 201, answer.text
    assert answer.json()["properties"]["state"] == "Suspended"


# --- the classic API ------------------------------------------------------------------------------


@pytest.fixture
def classic(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"{service.base_url}/{SUBSCRIPTION}",
        headers={"x-functions-key": service.key, "x-ms-version": "2014-10-01"},
        timeout=10.0,
    ) as client:
        yield client


def test_the_classic_api_holds_quotas_to_the_plan_and_refuses_a_plan_the_jobs_do_not_fit(
    classic: httpx.Client, api: httpx.Client
) -> None:
    group = unique("cs")
    assert classic.put(f"/cloudservices/{group}", content=XML_CLOUD_SERVICE.format(label="l", region="West Europe")).status_code == 202
    collection = f"/cloudservices/{group}/resources/scheduler/jobCollections/jc"
    above = classic.put(collection, content=XML_COLLECTION.format(plan="Free", quota="<Quota><MaxJobCount>100</MaxJobCount></Quota>"))
    assert above.status_code == 400, above.text
    error = ElementTree.fromstring(above.content)
    assert error.findtext(f"{NS}Code") == "BadRequest"
    assert error.findtext(f"{NS}Message") == "IntrinsicSettings.Quota.MaxJobCount: 100 is too large for the Free SKU: the most allowed is 5"
    assert classic.put(collection, content=XML_COLLECTION.format(plan="Standard", quota="")).status_code == 202
    jobs = f"/cloudservices/{group}/resources/scheduler/~/jobCollections/jc/jobs"
    for n in range(6):
        job = {"action": {"type": "http", "request": {"uri": "https://example.org/", "method": "GET"}},
               "recurrence": {"frequency": "hour"}, "state": "disabled"}  # fmt: skip
        assert classic.put(f"{jobs}/job-{n}", params={"api-version": "2014-04-01"}, json=job).status_code == 201
    arm_path = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}/providers/Microsoft.Scheduler/jobCollections/jc"
    before = snapshot(api, arm_path)
    to_free = classic.put(collection, content=XML_COLLECTION.format(plan="Free", quota=""))
    assert to_free.status_code == 409, to_free.text
    conflict = ElementTree.fromstring(to_free.content)
    assert conflict.findtext(f"{NS}Code") == "Conflict"
    assert conflict.findtext(f"{NS}Message") == (
        "Moving the job collection to Free would leave it over its limits: it holds 6 jobs, and maxJobCount would "
        "allow 5. Nothing was changed; delete or change those jobs first."
    )
    assert snapshot(api, arm_path) == before
