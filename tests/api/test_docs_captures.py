"""The Fiddler captures on Microsoft's page about outbound authentication (2016), replayed.

The page (scheduler-outbound-authentication.md, in Azure's documentation repositories, its
translations alike) shows one job PUT for each kind of authentication, sent by Fiddler to the
live service with api-version 2016-01-01 on 16 March 2016, and the answers. The answers of the
Basic and ActiveDirectoryOAuth PUTs are the service's own: their compact JSON is exactly as long
as their Content-Length (701 and 885 bytes). The ClientCertificate answer was edited for the
page (5 bytes short, a thumbprint with a G in it), and its pfx is a placeholder: here a
certificate of the same subject and expiry is sent, and the answer is compared but for the
thumbprint. The requests here send `user1` where the page's Basic request shows `user` and its
answer `user1`: the page was edited on one side.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

import tests.api.test_in_process as in_process
from shared.services import Services
from tests.api.test_in_process import call, in_memory_services
from tests.factories import made_pfx

SUBSCRIPTION = "1d908808-e491-4fe5-b97e-29886e18efd4"
JOB_ID = (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/CS-SoutheastAsia-scheduler/providers/"
          "Microsoft.Scheduler/jobCollections/southeastasiajc/jobs/httpjob")  # fmt: skip


def sent(authentication: dict[str, str]) -> dict[str, Any]:
    return {"properties": {
        "startTime": "2015-05-14T14:10:00Z",
        "action": {"request": {"uri": "https://mywebserviceendpoint.com", "method": "GET",
                               "headers": {"x-ms-version": "2013-03-01"}, "authentication": authentication},
                   "type": "http"},
        "recurrence": {"frequency": "minute", "endTime": "2016-04-10T08:00:00Z", "interval": 1},
        "state": "enabled",
    }}  # fmt: skip


def answered(authentication: dict[str, str], status: dict[str, Any]) -> dict[str, Any]:
    return {"id": JOB_ID, "type": "Microsoft.Scheduler/jobCollections/jobs", "name": "southeastasiajc/httpjob",
            "properties": {
                "startTime": "2015-05-14T14:10:00Z",
                "action": {"request": {"uri": "https://mywebserviceendpoint.com", "method": "GET",
                                       "headers": {"x-ms-version": "2013-03-01"}, "authentication": authentication},
                           "type": "http"},
                "recurrence": {"frequency": "minute", "endTime": "2016-04-10T08:00:00Z", "interval": 1},
                "state": "enabled", "status": status}}  # fmt: skip


def never_run(next_execution: str) -> dict[str, Any]:
    return {"nextExecutionTime": next_execution, "executionCount": 0, "failureCount": 0, "faultedCount": 0}


OAUTH = {"tenant": "microsoft.onmicrosoft.com", "audience": "https://management.core.windows.net/",
         "clientId": "dc23e764-9be6-4a33-9b9a-c46e36f0c137"}  # fmt: skip


@pytest.fixture
def as_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(in_process, "API_VERSION", "2016-01-01")
    monkeypatch.setitem(in_process.PARAMETERS, "subscriptionId", SUBSCRIPTION)
    monkeypatch.setitem(in_process.PARAMETERS, "resourceGroupName", "CS-SoutheastAsia-scheduler")
    monkeypatch.setitem(in_process.PARAMETERS, "jobCollectionName", "southeastasiajc")
    monkeypatch.setitem(in_process.PARAMETERS, "jobName", "httpjob")


def service_at(moment: datetime) -> Services:
    """The services at the capture's moment, the collection there and the job already saved
    once (each capture answers 200: the page's PUTs replaced one job)."""
    services = in_memory_services(now=moment)
    collection = {"location": "Southeast Asia", "properties": {"sku": {"name": "Standard"}}}
    assert call(services, "put_job_collection", collection)[0] == 201
    assert call(services, "put_job", sent({"type": "basic", "username": "u", "password": "p"}))[0] == 201
    return services


@pytest.mark.usefixtures("as_captured")
def test_the_basic_capture_is_answered_as_captured() -> None:
    services = service_at(datetime(2016, 3, 16, 19, 5, 6, tzinfo=UTC))
    status, answer = call(services, "put_job", sent({"type": "basic", "username": "user1", "password": "password"}))
    assert status == 200
    assert answer == answered({"username": "user1", "type": "Basic"}, never_run("2016-03-16T19:06:00Z"))


@pytest.mark.usefixtures("as_captured")
def test_the_oauth_capture_is_answered_as_captured_but_for_the_counts_of_its_earlier_runs() -> None:
    services = service_at(datetime(2016, 3, 16, 19, 10, 2, tzinfo=UTC))
    authentication = OAUTH | {"secret": "G6u071r8Gjw4V4KSibnb+VK4+tX399hkHaj7LOyHuj5=", "type": "ActiveDirectoryOAuth"}
    status, answer = call(services, "put_job", sent(authentication))
    assert status == 200
    # The captured job had run five times (the page's host does not exist): counts this
    # replay has no history for.
    assert answer == answered(OAUTH | {"type": "ActiveDirectoryOAuth"}, never_run("2016-03-16T19:11:00Z"))


@pytest.mark.usefixtures("as_captured")
def test_the_client_certificate_capture_is_answered_as_captured_but_for_the_thumbprint() -> None:
    services = service_at(datetime(2016, 3, 16, 19, 4, 23, tzinfo=UTC))
    pfx, thumbprint = made_pfx("password", subject="Scheduler Mgmt", expires=datetime(2021, 1, 1, 7, tzinfo=UTC))
    status, answer = call(services, "put_job", sent({"type": "clientcertificate", "password": "password", "pfx": pfx}))
    assert status == 200
    authentication = answer["properties"]["action"]["request"]["authentication"]
    assert authentication.pop("certificateThumbprint") == thumbprint  # the page's was edited
    captured = {"certificateExpiration": "2021-01-01T07:00:00Z", "certificateSubjectName": "CN=Scheduler Mgmt",
                "type": "ClientCertificate"}  # fmt: skip
    assert answer == answered(captured, never_run("2016-03-16T19:05:00Z"))


def test_each_version_spells_the_http_action_type_its_own_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """2016-01-01 as its captures do (`http`), 2016-03-01 as its recordings do (`Http`), for a
    job, a list of jobs and an errorAction; other action types as 2016-03-01 spells them."""
    services = in_memory_services()
    assert call(services, "put_job_collection", {"location": "West US", "properties": {"sku": {"name": "Standard"}}})[0] == 201
    job = copy.deepcopy(sent({"type": "basic", "username": "u", "password": "p"}))
    job["properties"]["action"]["errorAction"] = {"type": "HTTP", "request": {"uri": "https://example.org/", "method": "POST"}}
    job["properties"].pop("recurrence")
    assert call(services, "put_job", job)[0] == 201
    queue = {"properties": {"action": {"type": "storagequeue", "queueMessage": {
        "storageAccount": "account", "queueName": "jobs", "sasToken": "?sig=s", "message": "m"}}}}  # fmt: skip
    monkeypatch.setitem(in_process.PARAMETERS, "jobName", "queuejob")
    assert call(services, "put_job", queue)[0] == 201
    monkeypatch.setitem(in_process.PARAMETERS, "jobName", "Job1")

    def action_types(version: str) -> list[tuple[str, str | None]]:
        monkeypatch.setattr(in_process, "API_VERSION", version)
        status, listed = call(services, "list_jobs")
        assert status == 200
        actions = [each["properties"]["action"] for each in listed["value"]]
        found = [(action["type"], (action.get("errorAction") or {}).get("type")) for action in actions]
        status, read = call(services, "get_job")
        assert status == 200
        assert found[0] == (read["properties"]["action"]["type"], read["properties"]["action"]["errorAction"]["type"])
        return found

    assert action_types("2016-01-01") == [("http", "http"), ("StorageQueue", None)]
    assert action_types("2016-03-01") == [("Http", "Http"), ("StorageQueue", None)]
