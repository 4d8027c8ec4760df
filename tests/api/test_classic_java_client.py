"""The classic API as the Java SDK of 2015 calls it (`azure-svc-mgmt-scheduler`, API 2014-04-01;
docs/classic-api.md): the three calls it makes that the legacy Python client does not make,
sent with the headers and bodies its models write, and their answers checked against the shape
the real service gave that client. A collection is read with the version header alone; a job's
change of state carries its reason; every job of a collection is switched at once.

The replays run on the host where nothing runs, so that a job keeps the state a call gave it.
The switch's rules (final jobs, quota, a race with another writer) are driven in-process.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest

from shared.api.classic import operations as classic_operations
from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import JobId
from shared.domain.job_definition import JobState
from shared.domain.problems import Refused
from shared.storage.interface import Preconditions
from tests.api.test_classic_api import classic_request
from tests.conftest import Service
from tests.pipeline import START, Pipeline
from tests.targets import Target

NS = "{http://schemas.microsoft.com/windowsazure}"
# Every call of the Java client's scheduler operations carries this version and no other.
JAVA_VERSION = "2013-03-01"
JSON_BODY = {"Content-Type": "application/json; charset=utf-8"}
API_VERSION = {"api-version": "2014-04-01"}
CLOUD_SERVICE = (
    '<CloudService xmlns="http://schemas.microsoft.com/windowsazure"><Label>cs</Label>'
    "<Description>d</Description><GeoRegion>West US</GeoRegion></CloudService>"
)
COLLECTION = (  # JobCollectionCreateParameters: the plan, and the label in base64
    '<Resource xmlns="http://schemas.microsoft.com/windowsazure"><SchemaVersion>1.1</SchemaVersion>'
    "<IntrinsicSettings><Plan>Standard</Plan></IntrinsicSettings><Label>am9icw==</Label></Resource>"
)
# The collection's read and its jobs, spelled as the Java client builds them.
SCHEDULER = "/cloudservices/cs/resources/scheduler/~/JobCollections/jc"
JOBS = f"{SCHEDULER}/jobs"
# JobCreateParameters with an action only, as the Java client's own test made its job.
JAVA_ACTION = {"type": "http", "request": {"method": "Get", "uri": "http://www.microsoft.com"}}


@dataclass(frozen=True)
class JavaClient:
    http: httpx.Client
    subscription: str
    service: Service

    def create_job(self, **fields: Any) -> str:
        body = {"action": JAVA_ACTION} | fields
        created = self.http.post(JOBS, params=API_VERSION, headers=JSON_BODY, content=json.dumps(body))
        assert created.status_code == 201, created.text
        return str(created.json()["id"])

    def console_job(self, job: str) -> dict[str, Any]:
        """The job as the console shows it."""
        path = f"/console/api/collections/{self.subscription}/cs/jc/jobs/{job}"
        answer = httpx.get(self.service.base_url + path, headers={"x-functions-key": self.service.key}, timeout=10)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())


@pytest.fixture
def java(replay_host: Service) -> Iterator[JavaClient]:
    """A cloud service `cs` with a Standard collection `jc`, made as the Java client makes them."""
    subscription = str(uuid.uuid4())
    headers = {"x-functions-key": replay_host.key, "x-ms-version": JAVA_VERSION}
    with httpx.Client(base_url=f"{replay_host.base_url}/{subscription}", headers=headers, timeout=10) as http:
        assert http.put("/CloudServices/cs", content=CLOUD_SERVICE).status_code == 202
        assert http.put("/cloudservices/cs/resources/scheduler/JobCollections/jc", content=COLLECTION).status_code == 202
        yield JavaClient(http, subscription, replay_host)


def test_the_java_client_reads_a_collection_with_the_version_header_alone(java: JavaClient) -> None:
    read = java.http.get(SCHEDULER)  # JobCollectionOperations.get: x-ms-version, no api-version
    assert read.status_code == 200, read.text
    assert read.headers["content-type"] == "application/xml; charset=utf-8"
    resource = ElementTree.fromstring(read.content)
    assert resource.tag == f"{NS}Resource"
    # What the real service answered the Java client: these children, in this order.
    assert [child.tag.removeprefix(NS) for child in resource] == [
        "CloudServiceSettings", "ETag", "IntrinsicSettings", "Name", "OperationStatus",
        "PromotionCode", "SchemaVersion", "State", "SubState", "Type",
    ]  # fmt: skip
    assert resource.findtext(f"{NS}CloudServiceSettings/{NS}GeoRegion") == "West US"
    assert resource.findtext(f"{NS}IntrinsicSettings/{NS}Plan") == "Standard"
    assert (resource.findtext(f"{NS}Name"), resource.findtext(f"{NS}State"), resource.findtext(f"{NS}Type")) == (
        "jc", "Started", "jobcollections",
    )  # fmt: skip
    assert resource.findtext(f"{NS}OperationStatus/{NS}Result") == "Succeeded"
    # An api-version, when one is sent, is still checked.
    wrong = java.http.get(SCHEDULER, params={"api-version": "2016-03-01"})
    assert wrong.status_code == 400
    assert ElementTree.fromstring(wrong.content).findtext(f"{NS}Code") == "InvalidApiVersionParameter"


def test_the_java_clients_change_of_a_jobs_state_keeps_its_reason(java: JavaClient) -> None:
    job = java.create_job()
    # JobUpdateStateParameters: the state, and its updateStateReason sent as stateDetails.
    body = {"state": "disabled", "stateDetails": "just testing"}
    changed = java.http.patch(f"{JOBS}/{job}", params=API_VERSION, headers=JSON_BODY, content=json.dumps(body))
    assert changed.status_code == 200, changed.text
    assert changed.headers["content-type"] == "application/json; charset=utf-8"
    # As the real service answered: the job, disabled, with no status (it never ran), and
    # without the reason, which the client's Job model has no place for.
    assert changed.json() == {"id": job, "action": JAVA_ACTION, "state": "disabled"}
    assert java.console_job(job)["stateReason"] == "just testing"
    assert java.http.get(f"{JOBS}/{job}", params=API_VERSION).json() == changed.json()

    # A change of the job that leaves its state keeps the reason; a change of state without
    # one leaves none, as the reason explained a state the job is no longer in.
    recurring = {"recurrence": {"frequency": "hour", "interval": 1}}
    assert java.http.patch(f"{JOBS}/{job}", params=API_VERSION, headers=JSON_BODY, content=json.dumps(recurring)).status_code == 200
    assert java.console_job(job)["stateReason"] == "just testing"
    enabled = java.http.patch(f"{JOBS}/{job}", params=API_VERSION, headers=JSON_BODY, content=json.dumps({"state": "enabled"}))
    assert enabled.json()["state"] == "enabled"
    assert java.console_job(job)["stateReason"] is None


def test_the_java_client_switches_every_job_of_a_collection_at_once(java: JavaClient) -> None:
    first, second = java.create_job(), java.create_job()
    off = java.create_job(state="disabled")
    # JobCollectionJobsUpdateStateParameters: the state alone; no api-version on this call.
    switched = java.http.patch(JOBS, headers=JSON_BODY, content=json.dumps({"state": "disabled"}))
    assert switched.status_code == 200, switched.text
    assert switched.headers["content-type"] == "application/json; charset=utf-8"
    answer = switched.json()
    assert sorted(job["id"] for job in answer) == sorted([first, second, off])
    # The jobs as they now are, each as the real service answered the Java client.
    assert all(job == {"id": job["id"], "action": JAVA_ACTION, "state": "disabled"} for job in answer)
    polled = ElementTree.fromstring(java.http.get(f"/operations/{switched.headers['x-ms-request-id']}").content)
    assert polled.findtext(f"{NS}Status") == "Succeeded"
    listed = java.http.get(JOBS, params=API_VERSION | {"$filter": "state eq disabled"}).json()
    assert sorted(job["id"] for job in listed) == sorted([first, second, off])

    enabled = java.http.patch(JOBS, headers=JSON_BODY, content=json.dumps({"state": "enabled", "stateDetails": "back"}))
    assert enabled.status_code == 200, enabled.text
    assert [job["state"] for job in enabled.json()] == ["enabled"] * 3
    # An enabled job shows its status (counts from zero): the Java model reads it if present.
    assert all(job.keys() == {"id", "action", "state", "status"} for job in enabled.json())
    assert all(job["status"]["executionCount"] == 0 for job in enabled.json())
    assert java.console_job(off)["stateReason"] == "back"


# --- the switch's rules, in-process -----------------------------------------------------------


def switch(pipeline: Pipeline, body: Any) -> list[dict[str, Any]]:
    answer = classic_operations.switch_jobs(classic_request(pipeline, "PATCH", "", body), pipeline.services)
    assert answer.status == 200
    assert isinstance(answer.body, list)
    return answer.body


def every_minute(target: Target, path: str, **fields: Any) -> dict[str, Any]:
    action = {"type": "Http", "request": {"uri": target.url(path), "method": "GET"}}
    return {"startTime": (START + timedelta(hours=1)).isoformat(), "action": action,
            "recurrence": {"frequency": "Minute", "interval": 1}} | fields  # fmt: skip


def test_a_switch_leaves_completed_jobs_as_they_are(storage: str, target: Target) -> None:
    pipeline = Pipeline(storage)
    target.answer("/once", 200)
    done = pipeline.put_job("done", {"startTime": START.isoformat(), "action": {"type": "Http", "request": {"uri": target.url("/once"), "method": "GET"}}})
    pipeline.advance(timedelta(minutes=2))
    assert pipeline.job(done).document.state is JobState.COMPLETED
    running = pipeline.put_job("running", every_minute(target, "/running"))
    answer = {job["id"]: job["state"] for job in switch(pipeline, {"state": "disabled"})}
    assert answer == {"done": "completed", "running": "disabled"}
    assert pipeline.job(done).document.state is JobState.COMPLETED
    assert pipeline.job(running).document.state is JobState.DISABLED


def test_enabling_is_refused_whole_when_a_job_runs_more_often_than_the_quota_allows(storage: str, target: Target) -> None:
    """As one job's change is refused; nothing is written. The quota cannot be lowered below a
    job through the API, so the lower quota is written straight to storage (as a collection
    saved before that rule would hold it)."""
    pipeline = Pipeline(storage)
    too_often = pipeline.put_job("too-often", every_minute(target, "/often", state="disabled"))
    hourly = pipeline.put_job("hourly", every_minute(target, "/hourly", state="disabled", recurrence={"frequency": "Hour", "interval": 1}))
    hourly_quota = {"location": "westeurope", "properties": {"sku": {"name": "Standard"}, "quota": {"maxRecurrence": {"frequency": "Hour", "interval": 1}}}}
    pipeline.store.collections.save_collection(pipeline.collection, CollectionDocument.created(CollectionBody.model_validate(hourly_quota)), Preconditions())
    with pytest.raises(Refused) as refused:
        switch(pipeline, {"state": "enabled"})
    assert "too-often" in str(refused.value)
    assert pipeline.job(too_often).document.state is JobState.DISABLED
    assert pipeline.job(hourly).document.state is JobState.DISABLED
    switch(pipeline, {"state": "disabled"})  # disabling never adds a run: never refused


def test_a_job_changed_during_a_switch_is_switched_as_it_now_is(storage: str, target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another client's change of one job lands between the switch's read and its write: that
    change holds (its client got 200 and the job as it wrote it), the switch reads the job again
    and switches it too, and the answer shows the job with both changes."""
    pipeline = Pipeline(storage)
    raced = pipeline.put_job("raced", every_minute(target, "/raced"))
    calm = pipeline.put_job("calm", every_minute(target, "/calm"))
    write_back, concurrent = pipeline.store.executor.replace_jobs, []

    def change_one_first(jobs: Any) -> None:
        if not concurrent:
            patch = {"action": {"request": {"uri": target.url("/raced-again")}}}
            concurrent.append(classic_operations.patch_job(classic_request(pipeline, "PATCH", "raced", patch), pipeline.services))
        write_back(jobs)

    monkeypatch.setattr(pipeline.store.executor, "replace_jobs", change_one_first)
    answer = {job["id"]: job for job in switch(pipeline, {"state": "disabled", "stateDetails": "maintenance"})}
    [seen] = concurrent
    assert (seen.status, seen.body["state"]) == (200, "enabled")  # type: ignore[index]
    assert answer["raced"]["state"] == "disabled"
    assert answer["raced"]["action"]["request"]["uri"] == target.url("/raced-again")
    for job in (raced, calm):
        document = pipeline.job(job).document
        assert (document.state, document.state_reason) == (JobState.DISABLED, "maintenance")
    assert pipeline.job(JobId(pipeline.collection, "raced")).document.properties.action.request.uri == target.url("/raced-again")
