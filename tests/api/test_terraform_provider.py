"""What Terraform's azurerm provider (1.x, `azurerm_scheduler_job_collection` and
`azurerm_scheduler_job`) sent and read back, from its acceptance tests run against the live service.

The provider built its bodies with the Go SDK for 2016-03-01, which writes what a resource's
schema holds, defaults included: `headers: {}`, `retryPolicy: {retryType: None}` without a retry
block, `interval: 1` without one, a day of a monthly occurrence under `Occurrence`, times as
RFC 3339 with an offset. Its acceptance tests then read each resource back and compared fields;
those comparisons, which passed against the live service, are the expectations here. A storage
queue action there carried the account's key as its `sasToken`, which the service took.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from shared.services import Services
from tests.api.test_in_process import call, in_memory_services

GET_EXAMPLE = {"type": "Https", "request": {"uri": "https://example.com", "method": "get", "headers": {}}}
NO_RETRY = {"retryType": "None"}
START = "2019-07-07T07:07:07-07:00"  # the provider's "complete" test
ACCOUNT_KEY = base64.b64encode(bytes(range(64))).decode()  # what `primary_access_key` looks like


@pytest.fixture
def services() -> Services:
    built = in_memory_services()
    status, _ = call(built, "put_job_collection", {
        "location": "westeurope", "tags": {},
        "properties": {"sku": {"name": "standard"}, "state": "Enabled"},
    })  # fmt: skip
    assert status == 201
    return built


def at(document: Any, path: str) -> Any:
    for step in path.split("."):
        document = document[int(step)] if step.isdigit() else document[step]
    return document


JOBS = {
    "web_basic": ({"action": {**GET_EXAMPLE, "retryPolicy": NO_RETRY}, "startTime": START},
                  {"action.request.uri": "https://example.com", "action.request.method": "get"}),
    "web_put": ({"action": {"type": "Http", "request": {"uri": "http://example.com", "method": "put",
                 "headers": {"Content-Type": "text"}, "body": "this is some text"}, "retryPolicy": NO_RETRY},
                 "startTime": START},
                {"action.request.method": "put", "action.request.body": "this is some text",
                 "action.request.headers.Content-Type": "text"}),
    "web_authBasic": ({"action": {"type": "Https", "request": {**GET_EXAMPLE["request"], "authentication": {
                        "type": "Basic", "username": "login", "password": "apassword"}}, "retryPolicy": NO_RETRY},
                       "startTime": START},
                      # The Go SDK picks the authentication's type by its exact spelling.
                      {"action.request.authentication.type": "Basic",
                       "action.request.authentication.username": "login"}),
    "web_retry": ({"action": {**GET_EXAMPLE, "retryPolicy": {"retryType": "Fixed", "retryInterval": "00:05:00",
                   "retryCount": 10}}, "startTime": START},
                  {"action.retryPolicy.retryInterval": "00:05:00", "action.retryPolicy.retryCount": 10}),
    "web_recurring": ({"action": {**GET_EXAMPLE, "retryPolicy": NO_RETRY}, "startTime": START,
                       "recurrence": {"frequency": "minute", "interval": 5, "count": 10}},
                      {"recurrence.frequency": "minute", "recurrence.interval": 5, "recurrence.count": 10}),
    "web_recurringDaily": ({"action": {**GET_EXAMPLE, "retryPolicy": NO_RETRY}, "startTime": START,
                            "recurrence": {"frequency": "day", "interval": 1, "count": 100,
                                           "schedule": {"minutes": [45, 0, 30, 15], "hours": [12, 0]}}},
                           {"recurrence.frequency": "day", "recurrence.count": 100}),
    # The provider's own comment: "the constants are title cased but the API returns all lowercase".
    "web_recurringWeekly": ({"action": {**GET_EXAMPLE, "retryPolicy": NO_RETRY}, "startTime": START,
                             "recurrence": {"frequency": "week", "interval": 1, "count": 100,
                                            "schedule": {"weekDays": ["Sunday", "Saturday"]}}},
                            {"recurrence.frequency": "week", "recurrence.schedule.weekDays": ["sunday", "saturday"]}),
    "web_recurringMonthly": ({"action": {**GET_EXAMPLE, "retryPolicy": NO_RETRY}, "startTime": START,
                              "recurrence": {"frequency": "month", "interval": 1, "count": 100,
                                             "schedule": {"monthDays": [-11, -1, 1, 11]}}},
                             {"recurrence.frequency": "month", "recurrence.schedule.monthDays": [-11, -1, 1, 11]}),
    "web_recurringMonthlyOccurrences": (
        {"action": {**GET_EXAMPLE, "retryPolicy": NO_RETRY}, "startTime": START,
         "recurrence": {"frequency": "month", "interval": 1, "count": 100, "schedule": {"monthlyOccurrences": [
             {"day": "sunday", "Occurrence": 1}, {"day": "sunday", "Occurrence": 3},
             {"day": "sunday", "Occurrence": -1}]}}},
        {"recurrence.schedule.monthlyOccurrences.0.day": "sunday",
         "recurrence.schedule.monthlyOccurrences.0.occurrence": 1,
         "recurrence.schedule.monthlyOccurrences.2.occurrence": -1}),
    "web_errorAction": ({"action": {**GET_EXAMPLE, "retryPolicy": NO_RETRY, "errorAction": GET_EXAMPLE},
                         "startTime": START},
                        {"action.errorAction.request.uri": "https://example.com",
                         "action.errorAction.request.method": "get"}),
    "web_complete": ({"action": {"type": "Http", "request": {"uri": "http://example.com", "method": "put",
                      "headers": {"Content-Type": "text"}, "body": "this is some text"},
                      "retryPolicy": {"retryType": "Fixed", "retryInterval": "00:05:00", "retryCount": 10}},
                      "recurrence": {"frequency": "month", "interval": 1, "count": 100,
                                     "schedule": {"monthDays": [-11, -1, 1, 11]}},
                      "startTime": START},
                     {"startTime": "2019-07-07T14:07:07Z", "recurrence.count": 100,
                      "action.retryPolicy.retryInterval": "00:05:00"}),
    "storageQueue": ({"action": {"type": "StorageQueue", "queueMessage": {
                        "storageAccount": "acctest12345", "queueName": "acctest-12345-job",
                        "sasToken": ACCOUNT_KEY, "message": "storage message"}, "retryPolicy": NO_RETRY},
                      "startTime": START},
                     {"action.queueMessage.message": "storage message",
                      "action.queueMessage.queueName": "acctest-12345-job"}),
}  # fmt: skip


@pytest.mark.parametrize("name", list(JOBS))
def test_a_job_the_provider_wrote_reads_back_as_its_acceptance_test_expected(
    services: Services, name: str
) -> None:
    sent, expected = JOBS[name]
    status, _ = call(services, "put_job", {"properties": sent})
    assert status == 201
    status, read = call(services, "get_job")
    assert status == 200
    assert {path: at(read["properties"], path) for path in expected} == expected


def test_a_collection_updated_to_disabled_with_a_quota_reads_back_as_expected(services: Services) -> None:
    status, _ = call(services, "put_job_collection", {
        "location": "westeurope", "tags": {},
        "properties": {"sku": {"name": "Standard"}, "state": "disabled",
                       "quota": {"maxJobCount": 10, "maxRecurrence": {"frequency": "Hour", "interval": 10}}},
    })  # fmt: skip
    assert status == 201  # as the live service answered a collection's update (SDK recordings)
    status, read = call(services, "get_job_collection")
    assert status == 200
    assert read["properties"]["state"] == "Disabled"  # compared with the Go SDK's constant
    assert read["properties"]["quota"] == {
        "maxJobCount": 10, "maxRecurrence": {"frequency": "hour", "interval": 10}
    }
