"""The API's handlers called in the test's own process, as function_app.py calls them, on the
services in memory (tests/in_memory.py): no host and no Azurite, so `make test-fast` runs them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func
import pytest

from shared.api.access import arm_guard
from shared.api.arm import serve
from shared.api.routes import ROUTES
from shared.services import Services
from tests.in_memory import build_in_memory, memory_settings

KEY = "in-process-key"
API_VERSION = "2016-03-01"
PARAMETERS = {
    "subscriptionId": "sub-in-process", "resourceGroupName": "group",
    "jobCollectionName": "jc", "jobName": "Job1",
}  # fmt: skip
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def in_memory_services(now: datetime = NOW) -> Services:
    """The services in memory, their clock stopped at `now`, the function key KEY."""
    settings = memory_settings(
        lookahead=timedelta(minutes=1), outbound_allowlist="", function_key=KEY
    )
    built, _ = build_in_memory(settings, clock=lambda: now)
    return built


@pytest.fixture
def services() -> Services:
    return in_memory_services()


def call(services: Services, name: str, body: Any = None, key: str = KEY) -> tuple[int, Any]:
    """One route, by name, as the Functions host would hand it its request."""
    [route] = [route for route in ROUTES if route.name == name]
    path = route.template.format(**PARAMETERS)
    request = func.HttpRequest(
        route.method, f"http://localhost/api/{path}",
        headers={"x-functions-key": key, "content-type": "application/json"},
        params={"api-version": API_VERSION}, route_params=dict(PARAMETERS),
        body=b"" if body is None else json.dumps(body).encode(),
    )  # fmt: skip
    response = serve(request, route.operation, lambda: services, guard=arm_guard(route.name))
    text = response.get_body()
    return response.status_code, json.loads(text) if text else None


JOB = {
    "properties": {
        "startTime": (NOW + timedelta(hours=1)).isoformat(),
        "action": {"type": "Http", "request": {"uri": "https://example.com/", "method": "GET"}},
        "recurrence": {"frequency": "Hour", "interval": 1},
    }
}


def test_a_collection_and_a_job_are_created_and_read_back(services: Services) -> None:
    status, _ = call(
        services,
        "put_job_collection",
        {"location": "westeurope", "properties": {"sku": {"name": "Standard"}}},
    )
    assert status in (200, 201)
    status, created = call(services, "put_job", JOB)
    assert status == 201
    assert created["name"] == "jc/Job1"
    status, read = call(services, "get_job")
    assert status == 200
    assert read["properties"]["recurrence"] == {"frequency": "hour", "interval": 1}
    assert read["properties"]["status"]["nextExecutionTime"].startswith("2026-11-28T13:00:00")
    [collection] = services.storage.collections.collections("sub-in-process")
    assert [job.id.name for job in services.storage.jobs.jobs(collection.id)] == ["Job1"]


def test_a_bad_job_is_refused_in_arms_words_and_stores_nothing(services: Services) -> None:
    call(
        services,
        "put_job_collection",
        {"location": "westeurope", "properties": {"sku": {"name": "Standard"}}},
    )
    bad = {"properties": {**JOB["properties"], "recurrence": {"frequency": "Fortnight"}}}
    status, refused = call(services, "put_job", bad)
    assert status == 400
    assert "frequency" in json.dumps(refused["error"])
    assert call(services, "get_job")[0] == 404


def test_a_wrong_key_is_refused(services: Services) -> None:
    status, _ = call(services, "get_job", key="not-the-key")
    assert status == 401
