"""The conventions of the classic (Service Management) API that every classic operation shares:
the `x-ms-version` header, `api-version` on the scheduler's own routes, XML errors, request ids
of 32 hex digits, and a record of each change for the clients that poll for its outcome.

Operations are the same kind of function as the ARM ones (`ApiRequest`, `Services` ->
`ApiResponse`); a response body that is an XML `Element` is sent as XML, any other as JSON.
Every change is carried out before it is answered, so each one its client polls for has
succeeded (a refused one was answered with its error at once).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import date
from xml.etree.ElementTree import Element

import azure.functions as func

from shared.api.arm import (
    ApiResponse,
    Guard,
    Operation,
    api_request,
    log_access,
    request_line,
    warning_headers,
)
from shared.api.classic import bodies
from shared.api.errors import (
    ArmError,
    BadRequest,
    CloudServiceNotFound,
    InvalidClassicApiVersion,
    JobCollectionNotFound,
    MissingVersionHeader,
    arm_error,
)
from shared.domain.ids import CloudServiceId, CollectionId
from shared.domain.problems import FieldError, InvalidRequest
from shared.logs import app_logger
from shared.services import Services
from shared.storage.errors import NotFound
from shared.telemetry import current as telemetry

# The scheduler's own version (the classic job and collection reads); x-ms-version is the
# Service Management API's: a real date from its 2012-03-01 edition to its last, 2015-04-01
# (.NET and Java sent 2013-03-01, Python 2014-10-01). A later date names no version there was.
CLASSIC_API_VERSIONS = ("2014-04-01",)
_MANAGEMENT_VERSION = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_OLDEST_MANAGEMENT_VERSION, _NEWEST_MANAGEMENT_VERSION = date(2012, 3, 1), date(2015, 4, 1)
log = app_logger("scheduler.api")


def serve_classic(
    request: func.HttpRequest,
    operation: Operation,
    services: Callable[[], Services],
    *,
    guard: Guard | None = None,
) -> func.HttpResponse:
    """Run one classic operation for one HTTP request; `guard` decides who may call it (as
    `shared.api.arm.serve`'s)."""
    started = time.perf_counter()
    request_id = uuid.uuid4().hex
    classic_request, running, refusal = None, None, None
    try:
        classic_request = api_request(request)
        if guard is not None:
            running = services()
            classic_request = guard.admit(classic_request, running)
        _check_versions(classic_request.headers, classic_request.query)
        running = running or services()
        response = operation(classic_request, running)
        if classic_request.method != "GET" and response.status < 300:
            subscription = classic_request.route["subscriptionId"]
            running.scheduling.record_operation(subscription, request_id)
    except Exception as failure:
        error = classic_error(failure)
        if error is None:
            log.exception("request %s failed: %s", request_id, request_line(request))
            error = ArmError(f"Request {request_id} failed.")
        response = ApiResponse(error.status, bodies.error(error.code, error.message), error.headers)
        refusal = failure
    if guard is not None and running is not None and classic_request is not None:
        guard.record(running, classic_request, response.status, request_id, refusal)
    ignored = classic_request.ignored if classic_request else []
    answer = _http_response(request_id, response, warning_headers(ignored, request_id))
    log_access(request, response.status, started)
    telemetry().served(operation, response.status, started)
    return answer


def classic_error(failure: Exception) -> ArmError | None:
    """The error a failure answers as, in the classic API's words where they differ from ARM's."""
    match failure:
        case NotFound(resource=CloudServiceId() as cloud_service):
            return CloudServiceNotFound(cloud_service)
        case NotFound(resource=CollectionId() as collection):
            return JobCollectionNotFound(collection)
        case InvalidRequest(errors=errors):
            # Rules name a job's fields below ARM's `properties`, which classic jobs do not have.
            return BadRequest(
                "; ".join(
                    str(FieldError(error.field.removeprefix("properties."), error.problem))
                    for error in errors
                )
            )
    return arm_error(failure)


def _check_versions(headers: Mapping[str, str], query: Mapping[str, str]) -> None:
    if not _is_management_version(headers.get("x-ms-version", "")):
        raise MissingVersionHeader()
    given = query.get("api-version")
    if given is not None and given not in CLASSIC_API_VERSIONS:
        raise InvalidClassicApiVersion(given, CLASSIC_API_VERSIONS)


def _is_management_version(version: str) -> bool:
    if not _MANAGEMENT_VERSION.fullmatch(version):
        return False
    try:
        dated = date.fromisoformat(version)
    except ValueError:  # 2014-02-30, 9999-99-99
        return False
    return _OLDEST_MANAGEMENT_VERSION <= dated <= _NEWEST_MANAGEMENT_VERSION


def _http_response(
    request_id: str, response: ApiResponse, warnings: dict[str, str]
) -> func.HttpResponse:
    headers = {"x-ms-request-id": request_id, **response.headers, **warnings}
    body = response.body
    if body is None:
        return func.HttpResponse(status_code=response.status, headers=headers)
    if isinstance(body, Element):
        content, mimetype = bodies.serialized(body), "application/xml"
    else:
        content, mimetype = json.dumps(body, separators=(",", ":")).encode(), "application/json"
    # The header itself, not mimetype and charset: the Python worker's converter writes a charset
    # only for text/* types, and the classic API answers `application/xml; charset=utf-8`.
    return func.HttpResponse(
        content,
        status_code=response.status,
        headers={**headers, "Content-Type": f"{mimetype}; charset=utf-8"},
    )
