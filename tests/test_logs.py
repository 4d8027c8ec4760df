"""What the app logs, as Application Insights would receive it: real executions in-process on
Azurite against a real HTTP target, and API calls through the same `serve` functions the
Functions host calls. One line per outcome at its level, one access line per call, and never a
target's URL or a function key."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import azure.functions as func
import pytest

from shared.api.arm import ApiRequest, serve
from shared.api.classic.serving import serve_classic
from shared.api.job_operations import put_job
from shared.domain.wire import iso
from shared.logs import QUIETED_LOGGERS, one_line
from shared.services import Services
from tests.pipeline import START, Pipeline
from tests.targets import Received, Target

SECRET_QUERY = "?sig=secret123&code=abc"
BUSY = "Http Action - Response from host '127.0.0.1': '503 Service Unavailable' Body: busy"
OK = "Http Action - Response from host '127.0.0.1': '200 OK' Body: done"


@pytest.fixture(autouse=True)
def third_party_levels_restored() -> Iterator[None]:
    """Leave the libraries' loggers as the test found them (building services quiets them)."""
    levels = {name: logging.getLogger(name).level for name in QUIETED_LOGGERS}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def one_off(target: Target, path: str, retries: int) -> dict[str, Any]:
    request = {"uri": target.url(path) + SECRET_QUERY, "method": "POST", "body": "hello"}
    policy = {"retryType": "Fixed", "retryInterval": "PT20S", "retryCount": retries}
    return {"startTime": START.isoformat(), "action": {"type": "Http", "request": request, "retryPolicy": policy}}


def executor_lines(caplog: pytest.LogCaptureFixture, job_name: str) -> list[tuple[int, str]]:
    return [
        (record.levelno, record.getMessage())
        for record in caplog.records
        if record.name == "scheduler.executor" and f"/{job_name}:" in record.getMessage()
    ]


def assert_nothing_leaked(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    for record in caplog.records:
        said = record.getMessage()
        assert not any(secret in said for secret in secrets), f"{record.name} logged {said!r}"


def test_a_retry_then_a_success_tell_their_story_by_name_without_the_url(
    pipeline: Pipeline, target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[Received] = []

    def busy_once(received: Received) -> tuple[int, bytes, dict[str, str]]:
        calls.append(received)
        return (503, b"busy", {}) if len(calls) == 1 else (200, b"done", {})

    target.respond("/story", busy_once)
    job = pipeline.put_job("story", one_off(target, "/story", retries=1))
    with caplog.at_level(logging.INFO):
        pipeline.advance(timedelta(minutes=2))
    assert len(calls) == 2
    first, second = executor_lines(caplog, "story")
    name, occurrence = f"{pipeline.collection.name}/story", iso(START)
    assert first[0] == logging.WARNING
    assert re.fullmatch(
        rf"{name}: failed \(occurrence {occurrence}, retry 0\) in \d+ ms; "
        rf"retry 1 at {iso(START + timedelta(seconds=20))}, in 20 s: {re.escape(BUSY)}",
        first[1],
    ), first[1]
    assert second[0] == logging.INFO
    assert re.fullmatch(
        rf"{name}: completed \(occurrence {occurrence}, retry 1\) in \d+ ms; job completed: {re.escape(OK)}",
        second[1],
    ), second[1]
    # The try numbers are history's retryCount.
    assert [entry["retryCount"] for entry in pipeline.history(job)] == [0, 1]
    executor = [record.getMessage() for record in caplog.records if record.name == "scheduler.executor"]
    assert not any(job.arm_id in line or "/subscriptions/" in line for line in executor)
    assert_nothing_leaked(caplog, "secret123", "code=abc", f":{target.port}/")


def test_an_occurrence_that_fails_for_good_is_an_error_and_the_job_faults(
    pipeline: Pipeline, target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    target.answer("/broken", 503, b"busy")
    pipeline.put_job("broken", one_off(target, "/broken", retries=1))
    with caplog.at_level(logging.INFO):
        pipeline.advance(timedelta(minutes=2))
    assert len(target.received("/broken")) == 2
    [(retried, _), (faulted, line)] = executor_lines(caplog, "broken")
    assert (retried, faulted) == (logging.WARNING, logging.ERROR)
    assert re.fullmatch(
        rf"{pipeline.collection.name}/broken: failed \(occurrence {iso(START)}, retry 1\) in \d+ ms; "
        rf"occurrence failed for good, job faulted: {re.escape(BUSY)}",
        line,
    ), line
    assert_nothing_leaked(caplog, "secret123", "code=abc", f":{target.port}/")


# --- the API's access lines -------------------------------------------------------------------


def http_request(method: str, path: str, route: dict[str, str], *, body: Any = None,
                 headers: dict[str, str] | None = None, query: str = "api-version=2016-03-01") -> func.HttpRequest:  # fmt: skip
    params = dict(pair.split("=", 1) for pair in query.split("&")) | {"code": "function-key-123"}
    return func.HttpRequest(
        method,
        f"http://127.0.0.1:7071{path}?{query}&code=function-key-123",
        headers={"content-type": "application/json"} | (headers or {}),
        params=params,
        route_params=route,
        body=json.dumps(body).encode() if body is not None else b"",
    )


def api_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "scheduler.api"]


def test_an_api_call_gives_one_access_line_without_its_query(
    pipeline: Pipeline, target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    collection = pipeline.collection
    path = f"{collection.arm_id}/jobs/by-api"
    route = {"subscriptionId": collection.subscription, "resourceGroupName": collection.resource_group,
             "jobCollectionName": collection.name, "jobName": "by-api"}  # fmt: skip
    body = {"properties": one_off(target, "/by-api", retries=0)}
    with caplog.at_level(logging.INFO):
        response = serve(http_request("PUT", path, route, body=body), put_job, lambda: pipeline.services)
    assert response.status_code == 201
    [access] = api_lines(caplog)
    assert access.levelno == logging.INFO
    assert re.fullmatch(rf"PUT {re.escape(path)} 201 \d+ ms", access.getMessage()), access.getMessage()
    assert_nothing_leaked(caplog, "function-key-123", "code=", "api-version", "secret123")


def test_a_name_a_client_sent_cannot_forge_a_log_line(
    pipeline: Pipeline, target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    collection = pipeline.collection
    path = f"{collection.arm_id}/jobs/forger"
    route = {"subscriptionId": collection.subscription, "resourceGroupName": collection.resource_group,
             "jobCollectionName": collection.name, "jobName": "forger"}  # fmt: skip
    forged = "x\nERROR scheduler.executor: jc/payroll: faulted\u2028\x1b[31m"
    body = {"properties": {**one_off(target, "/forger", retries=0), forged: 1}}
    with caplog.at_level(logging.INFO):
        response = serve(http_request("PUT", path, route, body=body), put_job, lambda: pipeline.services)
    assert response.status_code == 201
    [warning] = [record for record in api_lines(caplog) if record.levelno == logging.WARNING]
    said = warning.getMessage()
    assert "\n" not in said and "\u2028" not in said and "\x1b" not in said, said
    assert "x\\nERROR scheduler.executor: jc/payroll: faulted\\u2028\\x1b[31m" in said, said


@pytest.mark.parametrize(
    ("text", "logged"),
    [
        ("plain name", "plain name"),
        ("a\r\nb", "a\\r\\nb"),
        ("bell\x07", "bell\\x07"),
        ("c1\x85", "c1\\x85"),
        ("Zürich", "Zürich"),
    ],
    ids=["plain", "crlf", "bell", "next-line", "non-ascii-kept"],
)
def test_one_line_escapes_only_what_breaks_a_line_or_drives_a_terminal(text: str, logged: str) -> None:
    assert one_line(text) == logged


def failing(request: ApiRequest, services: Services) -> Any:
    raise RuntimeError("a fault of the service's own")


def test_an_unexpected_fault_is_an_error_with_its_traceback_then_the_access_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/jc"
    route = {"subscriptionId": "s", "resourceGroupName": "rg", "jobCollectionName": "jc"}
    with caplog.at_level(logging.INFO):
        response = serve(http_request("GET", path, route), failing, lambda: None)  # type: ignore[arg-type, return-value]
    assert response.status_code == 500
    fault, access = api_lines(caplog)
    assert fault.levelno == logging.ERROR
    assert fault.exc_info is not None and fault.exc_info[0] is RuntimeError
    assert fault.getMessage().endswith(f"failed: GET {path}")
    assert re.fullmatch(rf"GET {re.escape(path)} 500 \d+ ms", access.getMessage())
    assert_nothing_leaked(caplog, "function-key-123", "code=")


def test_a_classic_call_gives_the_same_access_line_and_logs_its_faults(caplog: pytest.LogCaptureFixture) -> None:
    path = "/s/cloudservices/cs/resources/scheduler/~/JobCollections/jc/jobs/j"
    route = {"subscriptionId": "s", "cloudServiceName": "cs", "jobCollectionName": "jc", "jobName": "j"}
    request = http_request("GET", path, route, headers={"x-ms-version": "2014-10-01"}, query="api-version=2014-04-01")
    with caplog.at_level(logging.INFO):
        response = serve_classic(request, failing, lambda: None)  # type: ignore[arg-type, return-value]
    assert response.status_code == 500
    fault, access = api_lines(caplog)
    assert fault.levelno == logging.ERROR
    assert fault.exc_info is not None and fault.exc_info[0] is RuntimeError
    assert re.fullmatch(rf"GET {re.escape(path)} 500 \d+ ms", access.getMessage())
    assert_nothing_leaked(caplog, "function-key-123", "code=")


def test_building_the_services_quiets_the_libraries_that_log_urls(storage: str) -> None:
    for name in QUIETED_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    Pipeline(storage)
    for name in ("httpx", "httpcore", "azure", "urllib3"):
        assert logging.getLogger(name).level == logging.WARNING, name
