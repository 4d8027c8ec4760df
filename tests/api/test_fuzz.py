"""Requests generated from the served OpenAPI document, against the running local host.

schemathesis generates requests for every operation of the document (its examples, coverage and
fuzzing phases; positive and negative cases), derandomized with the rest of the suite, and sends
them with the function key. The checks: never a 5xx (`not_a_server_error`); only documented
statuses, content types and response schemas (`status_code_conformance`,
`content_type_conformance`, `response_schema_conformance`: the document is built from the wire
models and route table, so it is precise enough for all three); and a 2xx answered only with the
key (`ignored_auth`, which sends such a request again without the key, and with a wrong one).
Left out: `positive_data_acceptance` (a valid request for a collection that does not exist is a
404), `negative_data_rejection` (like ARM, the service ignores query parameters it does not know),
`unsupported_method` (the Functions host answers an unrouted method 404, not 405).

The path patterns make valid names. Half of the cases whose names are all valid name a collection
and job that exist instead (`known`), so that the operations on them reach their success paths;
half of those that send a job (PUT and PATCH of a job, previewOccurrences) send a valid one
(`VALID_BODIES`), since the document cannot say which action and recurrence fields go together.
What a write changes on the known names is undone after it. The other valid cases get a
subscription of their own (`fuzz-...`), so that the collections they make never show up in
another test's subscription; they are deleted at the end. The last test prints how many requests
each operation got and what share of them succeeded, and fails if an operation was never reached
or rarely succeeded.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import pytest
import schemathesis
from hypothesis import settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    response_schema_conformance,
    status_code_conformance,
)

from shared.api import openapi
from shared.domain.ids import NAME_PATTERN, RESOURCE_GROUP_PATTERN, SUBSCRIPTION_PATTERN
from tests.conftest import API_VERSION, Service

EXAMPLES_PER_OPERATION = 50  # for the fuzzing phase; the coverage phase makes its own, many more
LEAST_SUCCESS_SHARE = 0.05  # of every operation's answers, 2xx
KNOWN = {"subscriptionId": "fuzz-known", "resourceGroupName": "fuzz-rg", "jobCollectionName": "fuzz-jc", "jobName": "fuzz-job",
         "roleAssignmentName": "00000000-0000-0000-0000-0000000000f0"}  # fmt: skip
RULES = {"subscriptionId": SUBSCRIPTION_PATTERN, "resourceGroupName": RESOURCE_GROUP_PATTERN, "jobCollectionName": NAME_PATTERN, "jobName": NAME_PATTERN,
         "roleAssignmentName": "[0-9A-Za-z-]{1,64}"}  # fmt: skip
WRITES = {"put_job_collection", "patch_job_collection", "delete_job_collection", "enable_job_collection", "disable_job_collection", "put_job", "patch_job", "delete_job",
          "put_role_assignment", "delete_role_assignment"}  # fmt: skip
KNOWN_ASSIGNMENT = {"properties": {"principalId": "00000000-0000-0000-0000-00000000f022", "roleName": "Scheduler.Reader", "scope": "/subscriptions/fuzz-known/resourceGroups/fuzz-rg"}}
KNOWN_COLLECTION = {
    "location": "West Europe",
    "properties": {"sku": {"name": "Standard"}, "state": "Enabled", "quota": {"maxJobCount": 50, "maxRecurrence": {"frequency": "Minute", "interval": 1}}},
}
TARGET = {"uri": "http://127.0.0.1:9/", "method": "GET"}  # the discard port: refused at once


def after(days: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def known_job() -> dict[str, Any]:
    """Starting in a year, so that it runs only when POST .../run makes it."""
    return {"properties": {"startTime": after(365), "state": "Enabled", "recurrence": {"frequency": "Day", "interval": 1},
                           "action": {"type": "Http", "request": TARGET, "retryPolicy": {"retryType": "None"}}}}  # fmt: skip


def valid_jobs() -> list[dict[str, Any]]:
    http = {"type": "Http", "request": TARGET}
    return [
        {"properties": {"startTime": after(1), "action": http, "recurrence": {"frequency": "Minute", "interval": 5}}},
        {"properties": {"startTime": after(2), "action": {**http, "type": "Https", "request": {**TARGET, "uri": "https://127.0.0.1:9/hook", "method": "POST", "headers": {"x-a": "1"}, "body": "{}"},
                                                          "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT30S", "retryCount": 2}},
                        "recurrence": {"frequency": "Week", "schedule": {"weekDays": ["Monday", "Friday"], "hours": [9], "minutes": [30]}}}},
        {"properties": {"startTime": after(3), "action": {**http, "errorAction": http}, "recurrence": {"frequency": "Month", "count": 10, "schedule": {"monthDays": [1, 15]}}}},
        {"properties": {"startTime": after(4), "action": http, "state": "Disabled"}},  # once
        {"properties": {"action": http, "recurrence": {"frequency": "Hour", "interval": 3, "endTime": after(30)}}},  # runs at once
    ]


def valid_job_patches() -> list[dict[str, Any]]:
    return [
        {"properties": {"state": "Disabled"}},
        {"properties": {"recurrence": {"frequency": "Hour", "interval": 2}}},
        {"properties": {"action": {"request": {"method": "POST", "body": "patched"}}}},
    ]


VALID_BODIES = {"put_job": valid_jobs, "preview_occurrences": valid_jobs, "patch_job": valid_job_patches,
                "put_role_assignment": lambda: [KNOWN_ASSIGNMENT]}  # fmt: skip


@dataclass
class Known:
    """The collection and job every case may name, and how to put them back as they were made."""

    api: httpx.Client

    @property
    def collection_path(self) -> str:
        return "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.Scheduler/jobCollections/{jobCollectionName}".format(**KNOWN)

    def restore(self) -> None:
        collection = self.api.put(self.collection_path, json=KNOWN_COLLECTION)
        assert collection.status_code == 201, collection.text
        job_path = f"{self.collection_path}/jobs/{KNOWN['jobName']}"
        job = self.api.put(job_path, json=known_job())
        if job.status_code == 409:  # completed or faulted, final states: only deleting helps
            self.api.delete(job_path)
            job = self.api.put(job_path, json=known_job())
        assert job.status_code in (200, 201), job.text
        assignment = self.api.put("/subscriptions/{subscriptionId}/providers/Microsoft.Scheduler/roleAssignments/{roleAssignmentName}".format(**KNOWN),
                                  json=KNOWN_ASSIGNMENT)  # fmt: skip
        assert assignment.status_code in (200, 201), assignment.text


@pytest.fixture(scope="module")
def known(service: Service) -> Iterator[Known]:
    with httpx.Client(base_url=service.base_url, headers={"x-functions-key": service.key}, params={"api-version": API_VERSION}, timeout=10) as api:
        made = Known(api)
        made.restore()
        yield made
        # Their jobs would otherwise run for the rest of the session.
        for path in [made.collection_path, *sorted(CREATED)]:
            api.delete(path)


STATUSES: defaultdict[str, Counter[int]] = defaultdict(Counter)  # the answers, by operationId
CREATED: set[str] = set()  # the paths of the collections made under other names than the known
SECONDS: Counter[str] = Counter()  # the time each operation took, restoring included
schema = schemathesis.openapi.from_dict(openapi.document())
# Derandomized as the loaded profile says (tests/conftest.py). An explicit @settings value that
# equals that profile's does not reach schemathesis, which compares with the profile named
# "default": the one conftest.py replaced.
schema.config.generation.update(deterministic=settings.default.derandomize)


@pytest.fixture(scope="module")
def served(service: Service, known: Known) -> Service:
    """The service, once the document it serves is known to be the one the cases come from.

    (schemathesis' own way to load the document from a fixture, `schemathesis.pytest.from_fixture`,
    fails on pytest 9: `'Function' object has no attribute '_nodeid'`.)
    """
    assert httpx.get(f"{service.base_url}/openapi.json", timeout=5).json() == json.loads(json.dumps(openapi.document()))
    return service


def named(case: schemathesis.Case, operation: str) -> None:
    """Gives the case the known names, or a subscription of its own, and to some cases that write
    a job on the known names, a valid job. Chosen by a hash of the case, so that hypothesis
    sees the same request each time it replays one."""
    names = case.path_parameters or {}  # as they go in the path: percent-encoded
    if not all(isinstance(value, str) and re.fullmatch(RULES[name], unquote(value)) for name, value in names.items()):
        return  # a negative case: its invalid names are the point
    generated = json.dumps([names, case.query, case.body], sort_keys=True, default=lambda value: type(value).__name__)
    choice = zlib.crc32(generated.encode())
    if choice % 2:
        case.path_parameters = {**names, "subscriptionId": ("fuzz-" + names["subscriptionId"])[:64]}
        return
    case.path_parameters = {name: KNOWN[name] for name in names}
    bodies = VALID_BODIES.get(operation)
    negative_body = case.meta is not None and case.meta.is_negative_at(ParameterLocation.BODY)
    if bodies is not None and not negative_body and case.media_type == "application/json" and choice // 2 % 2:
        choices = bodies()
        case.body = choices[choice // 4 % len(choices)]


@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION)
# A bound on a hang, not a speed check: one operation's cases took up to ~110 s on a loaded
# 2-core machine, so 120 s failed there for nothing.
@pytest.mark.timeout(300)
def test_generated_requests_never_get_a_5xx_and_get_documented_answers(case: schemathesis.Case, served: Service, known: Known) -> None:
    started = time.monotonic()
    operation = case.operation.definition.raw["operationId"]
    named(case, operation)
    response = case.call(base_url=served.base_url, headers={"x-functions-key": served.key}, timeout=10)
    STATUSES[operation][response.status_code] += 1
    if operation == "put_job_collection" and response.status_code == 201:
        CREATED.add(urlsplit(response.request.url).path)
    try:
        case.validate_response(
            response,
            checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance, ignored_auth],
        )
    finally:
        if operation in WRITES and response.status_code < 300 and case.path_parameters == {name: KNOWN[name] for name in case.path_parameters or {}}:
            known.restore()
        SECONDS[operation] += time.monotonic() - started


def test_the_generated_requests_reached_every_operation_and_its_success_path(capsys: pytest.CaptureFixture[str]) -> None:
    if not STATUSES:
        pytest.skip("the generated requests did not run in this session")
    lines = [f"generated requests: {sum(map(Counter.total, STATUSES.values()))} to {len(STATUSES)} operations in {SECONDS.total():.0f} s"]
    shares = {}
    for operation, counts in STATUSES.items():
        shares[operation] = sum(n for status, n in counts.items() if 200 <= status < 300) / counts.total()
        lines.append(f"  {operation}: {counts.total()} requests, {shares[operation]:.0%} 2xx, {SECONDS[operation]:.1f} s; {dict(sorted(counts.items()))}")
    with capsys.disabled():  # shown in every run, for the record
        print("\n" + "\n".join(lines))
    assert set(STATUSES) == {operation["operationId"] for item in openapi.document()["paths"].values() for operation in item.values()}
    assert {operation: share for operation, share in shares.items() if share < LEAST_SUCCESS_SHARE} == {}
