"""Jobs that Azure PowerShell's Scheduler cmdlets created against the live service, answered alike.

From the cmdlets' own test recording `TestCreateHttpJob` (repository Azure/azure-powershell, path
src/ResourceManager/Scheduler/Commands.Scheduler.Test/SessionRecords/Microsoft.Azure.Commands.
Scheduler.Test.ScenarioTests.JobTests/TestCreateHttpJob.json, commit 3be1bc1f; made in February
2017): the three calls that the .NET SDK's recordings have nothing like. A header name's own
casing kept, Basic authentication over plain HTTP taken, and a URI's percent-escapes kept as
sent. Every other Scheduler call of the cmdlets' eight recordings (collections of each SKU,
quota updates, enable and disable, the 404s) was compared by hand and answered alike.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import tests.api.test_in_process as in_process
from tests.api.test_in_process import KEY, NOW, call
from tests.in_memory import build_in_memory, memory_settings

ESCAPED = "http://www.bing.com/workers?somekey=somevalue%2drandomvalue%2fconsistent%3d"
ERROR_ACTION_SENT = {
    "type": "Http",
    "request": {"authentication": {"username": "HttpErrorAction", "password": "p@ssword!", "type": "Basic"},
                "uri": ESCAPED, "method": "post", "body": "HelloError",
                "headers": {"ContEnt-TyPe": "application/json"}},
}  # fmt: skip
# job name -> (the properties sent, the properties answered but for status.nextExecutionTime)
RECORDED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "HttpJobWithHeadersAndBody": (
        {"action": {"type": "Http", "request": {"uri": "http://www.bing.com/", "method": "post", "body": "Hello",
                                                "headers": {"ConTent-tYPe": "application/json"}}}},
        {"action": {"request": {"uri": "http://www.bing.com/", "method": "post",
                                "headers": {"ConTent-tYPe": "application/json"}, "body": "Hello"}, "type": "Http"},
         "state": "enabled", "status": {"executionCount": 0, "failureCount": 0, "faultedCount": 0}},
    ),
    "HttpJobWithHttpClientCertificateAuthentication": (
        {"action": {"type": "Http", "request": {
            "authentication": {"username": "httpJob", "password": "p@ssword!", "type": "Basic"},
            "uri": "http://www.bing.com/", "method": "get"}}},
        {"action": {"request": {"uri": "http://www.bing.com/", "method": "get",
                                "authentication": {"username": "httpJob", "type": "Basic"}}, "type": "Http"},
         "state": "enabled", "status": {"executionCount": 0, "failureCount": 0, "faultedCount": 0}},
    ),
    "HttpJobWithEncodableUriCharacters": (
        {"action": {"type": "Http", "request": {"uri": ESCAPED, "method": "get"}, "errorAction": ERROR_ACTION_SENT}},
        {"action": {"request": {"uri": ESCAPED, "method": "get"}, "type": "Http", "errorAction": {
            "request": {"uri": ESCAPED, "method": "post", "headers": {"ContEnt-TyPe": "application/json"},
                        "body": "HelloError", "authentication": {"username": "HttpErrorAction", "type": "Basic"}},
            "type": "Http"}},
         "state": "enabled", "status": {"executionCount": 0, "failureCount": 0, "faultedCount": 0}},
    ),
}  # fmt: skip


@pytest.mark.parametrize("job", list(RECORDED))
def test_a_recorded_job_is_answered_as_the_live_service_answered_it(
    job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = memory_settings(lookahead=timedelta(minutes=1), outbound_allowlist="", function_key=KEY)
    services, _ = build_in_memory(settings, clock=lambda: NOW)
    monkeypatch.setitem(in_process.PARAMETERS, "jobName", job)
    status, _ = call(services, "put_job_collection", {
        "location": "West US",
        "properties": {"sku": {"name": "Standard"},
                       "quota": {"maxJobCount": 50, "maxRecurrence": {"frequency": "Minute", "interval": 1}}},
    })  # fmt: skip
    assert status == 201
    sent, answered = RECORDED[job]
    status, answer = call(services, "put_job", {"properties": sent})
    assert status == 201
    properties = answer["properties"]
    assert properties["status"].pop("nextExecutionTime")  # when it runs depends on the clock
    assert properties == answered
