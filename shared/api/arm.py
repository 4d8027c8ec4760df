"""The ARM conventions every operation shares: api-version, the error envelope, request ids, ETags.

An operation takes an `ApiRequest` and the process's services and returns an `ApiResponse`, or
raises; `serve` turns either into the HTTP response a Microsoft.Scheduler client expects, each
error through `errors.arm_error`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import azure.functions as func
from pydantic import BaseModel, ValidationError

from shared.api.errors import (
    ArmError,
    InvalidApiVersion,
    MissingApiVersion,
    UnsupportedMediaType,
    arm_error,
)
from shared.domain.problems import InvalidRequest, field_errors
from shared.domain.wire import IgnoredProperty, ignored_properties
from shared.services import Services
from shared.storage.interface import Preconditions

SUPPORTED_API_VERSIONS = ("2016-03-01",)
# What a body may be declared as, parameters (`; charset=utf-8`) aside: the SDKs send
# application/json, and ARM took text/json as well. A body without a Content-Type is read as JSON.
JSON_MEDIA_TYPES = frozenset({"application/json", "text/json"})
MOST_NESTING = 512  # arrays and objects within one another in a request body (docs/behaviour.md)
Body = TypeVar("Body", bound=BaseModel)
log = logging.getLogger("scheduler.api")


@dataclass(frozen=True)
class ApiRequest:
    method: str
    url: str
    route: Mapping[str, str]
    query: Mapping[str, str]  # names folded to lower case: ARM reads `$Top` as `$top`
    headers: Mapping[str, str]
    body: bytes
    # Properties the API does not know, found in what was read: answered as Warning headers.
    ignored: list[IgnoredProperty] = field(default_factory=list)

    def json_body(self) -> Any:
        """The body as JSON, or InvalidRequest saying why it is not."""
        content_type = self.headers.get("content-type", "application/json")
        if content_type.split(";", 1)[0].strip(" \t").lower() not in JSON_MEDIA_TYPES:
            raise UnsupportedMediaType(content_type)
        if not self.body.strip():
            raise InvalidRequest.because("", "the request body is empty; a JSON object is required")
        try:
            parsed = json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as bad:
            raise InvalidRequest.because("", f"the request body is not valid JSON: {bad}") from None
        except RecursionError:
            parsed = None  # deeper than the parser goes, so deeper than MOST_NESTING too
        else:
            if _nesting_within(parsed, MOST_NESTING):
                return parsed
        # A limit of our own: how deep the parser goes differs between Pythons (3.13 parses
        # thousands of levels, 3.11 about a thousand), and the same body must get one answer.
        raise InvalidRequest.because("", "the request body is nested too deeply")

    def parsed_body(self, model: type[Body]) -> Body:
        """The body read into a wire model, or InvalidRequest listing every problem."""
        return self.read(model, self.json_body())

    def read(self, model: type[Body], sent: Any, *at: str) -> Body:
        """`sent` (JSON, found at `at` in the body) read into a wire model, or InvalidRequest
        listing every problem; the properties it ignores are noted for the answer."""
        try:
            read = model.model_validate(sent)
        except ValidationError as invalid:
            raise InvalidRequest(field_errors(invalid, *at)) from None
        self.note_ignored(model, sent, *at)
        return read

    def note_ignored(self, model: type[BaseModel], sent: Any, *at: str) -> None:
        """Note the properties of `sent` that `model` does not know, for the answer's warnings."""
        self.ignored.extend(ignored_properties(model, sent, *at))

    @property
    def preconditions(self) -> Preconditions:
        return Preconditions(
            if_match=self.headers.get("if-match"), if_none_match=self.headers.get("if-none-match")
        )


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Operation = Callable[[ApiRequest, Services], ApiResponse]


def serve(
    request: func.HttpRequest,
    operation: Operation,
    services: Callable[[], Services],
    *,
    versioned: bool = True,
) -> func.HttpResponse:
    """Run one operation for one HTTP request, with every ARM convention applied.

    `services` gives the process's services; it is called inside, so that a failure to build
    them is answered in the ARM envelope like any other fault. `versioned=False` serves routes
    of our own that take no api-version (the console's reads).
    """
    started = time.perf_counter()
    request_id = str(uuid.uuid4())
    arm_request = None
    try:
        arm_request = api_request(request)
        if versioned:
            _check_api_version(arm_request.query)
        response = operation(arm_request, services())
    except Exception as failure:
        error = arm_error(failure)
        if error is None:
            log.exception("request %s failed: %s", request_id, request_line(request))
            error = ArmError(f"Request {request_id} failed.")
        response = ApiResponse(error.status, error.envelope, error.headers)
    headers = {"x-ms-request-id": request_id, **response.headers}
    headers |= warning_headers(arm_request.ignored if arm_request else [], request_id)
    if response.body is None:
        answer = func.HttpResponse(status_code=response.status, headers=headers)
    else:
        # The header itself, not mimetype and charset: the Python worker's converter writes a
        # charset only for text/* types, and ARM answers `application/json; charset=utf-8`.
        answer = func.HttpResponse(
            json.dumps(response.body, separators=(",", ":")),
            status_code=response.status,
            headers={**headers, "Content-Type": "application/json; charset=utf-8"},
        )
    log_access(request, response.status, started)
    return answer


# The most warnings one answer carries: a body of a thousand unknown names gets a line saying so.
MOST_WARNINGS = 20


def warning_headers(ignored: list[IgnoredProperty], request_id: str) -> dict[str, str]:
    """The Warning header (RFC 7234, code 299) naming each ignored property, each also logged."""
    if not ignored:
        return {}
    texts = [each.warning() for each in ignored]
    for text in texts:
        log.warning("request %s: %s", request_id, text)
    if len(texts) > MOST_WARNINGS:
        texts = [*texts[:MOST_WARNINGS], f"and {len(texts) - MOST_WARNINGS} more were ignored"]
    return {"Warning": ", ".join(f'299 - "{_quoted(text)}"' for text in texts)}


def _quoted(text: str) -> str:
    """Text fit for a header's quoted string: ASCII, no control characters, quotes escaped."""
    printable = "".join(c if " " <= c < "\x7f" else "?" for c in text)
    return printable.replace("\\", "\\\\").replace('"', '\\"')


def request_line(request: func.HttpRequest) -> str:
    """The method and path of a request, as logs show it: never its query string, which may
    carry the function key (`?code=`)."""
    return f"{request.method.upper()} {urlsplit(request.url).path}"


def log_access(request: func.HttpRequest, status: int, started: float) -> None:
    """The one access line of an API call: `PUT /subscriptions/.../jobs/j 201 12 ms`.

    `started` is the `time.perf_counter()` reading taken when the call came in.
    """
    elapsed = round((time.perf_counter() - started) * 1000)
    log.info("%s %d %d ms", request_line(request), status, elapsed)


def api_request(request: func.HttpRequest) -> ApiRequest:
    return ApiRequest(
        method=request.method.upper(),
        url=request.url,
        route=dict(request.route_params),
        query={name.lower(): value for name, value in request.params.items()},
        headers={name.lower(): value for name, value in request.headers.items()},
        body=request.get_body() or b"",
    )


def _check_api_version(query: Mapping[str, str]) -> None:
    version = query.get("api-version")
    if not version:
        raise MissingApiVersion(SUPPORTED_API_VERSIONS)
    if version not in SUPPORTED_API_VERSIONS:
        raise InvalidApiVersion(version, SUPPORTED_API_VERSIONS)


def _nesting_within(value: Any, most: int) -> bool:
    """Whether `value` (parsed JSON) nests arrays and objects no more than `most` deep."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > most:
                return False
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return True
