"""The ARM conventions every operation shares: api-version, the error envelope, request ids, ETags.

An operation takes an `ApiRequest` and the process's services and returns an `ApiResponse`, or
raises; `serve` turns either into the HTTP response a Microsoft.Scheduler client expects, each
error through `errors.arm_error`.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import azure.functions as func
from pydantic import BaseModel, ValidationError

from shared.api.api_versions import SUPPORTED_API_VERSIONS, as_answered_in
from shared.api.errors import (
    ArmError,
    InvalidApiVersion,
    MissingApiVersion,
    UnsupportedMediaType,
    arm_error,
)
from shared.domain.access import Caller
from shared.domain.problems import InvalidRequest, field_errors
from shared.domain.wire import IgnoredProperty, ignored_properties
from shared.logs import app_logger
from shared.services import Services
from shared.storage.interface import Preconditions
from shared.telemetry import current as telemetry

# What a body may be declared as, parameters (`; charset=utf-8`) aside: the SDKs send
# application/json, and ARM took text/json as well. A body without a Content-Type is read as JSON.
JSON_MEDIA_TYPES = frozenset({"application/json", "text/json"})
MOST_NESTING = 512  # arrays and objects within one another in a request body (docs/behaviour.md)
Body = TypeVar("Body", bound=BaseModel)
log = app_logger("scheduler.api")


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
    caller: Caller | None = None  # who sent it, once a guard admitted it (shared/api/access.py)

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
            if _nesting_within(self.body, MOST_NESTING):
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


class Guard(Protocol):
    """Who may call a route, and the record of what they did (shared/api/access.py)."""

    def admit(self, request: ApiRequest, services: Services) -> ApiRequest:
        """The request with its caller, or a 401 or 403 error."""
        ...

    def record(
        self,
        services: Services,
        request: ApiRequest,
        status: int,
        request_id: str,
        refusal: Exception | None,
    ) -> None:
        """Keep a change, or a refused attempt, in the activity log."""
        ...


def serve(
    request: func.HttpRequest,
    operation: Operation,
    services: Callable[[], Services],
    *,
    versioned: bool = True,
    guard: Guard | None = None,
) -> func.HttpResponse:
    """Run one operation for one HTTP request, with every ARM convention applied.

    `services` gives the process's services; it is called inside, so that a failure to build
    them is answered in the ARM envelope like any other fault. `versioned=False` serves routes
    of our own that take no api-version (the console's reads). `guard` decides who may call
    (every route the app registers has one; only tests calling an operation leave it out).
    """
    started = time.perf_counter()
    request_id = str(uuid.uuid4())
    arm_request = None
    running, refusal = None, None
    try:
        arm_request = api_request(request)
        if guard is not None:  # ARM authenticates before it looks at the api-version
            running = services()
            arm_request = guard.admit(arm_request, running)
        if versioned:
            _check_api_version(arm_request.query)
        running = running or services()
        response = operation(arm_request, running)
        if versioned and response.body is not None:
            body = as_answered_in(arm_request.query.get("api-version"), response.body)
            response = ApiResponse(response.status, body, response.headers)
    except Exception as failure:
        error = arm_error(failure)
        if error is None:
            log.exception("request %s failed: %s", request_id, request_line(request))
            error = ArmError(f"Request {request_id} failed.")
        response = ApiResponse(error.status, error.envelope, error.headers)
        refusal = failure
    if guard is not None and running is not None and arm_request is not None:
        guard.record(running, arm_request, response.status, request_id, refusal)
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
    telemetry().served(operation, response.status, started)
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


# What measuring a JSON text's depth keeps of it: its brackets and quotes.
_NOT_BRACKET_OR_QUOTE = bytes(range(256)).translate(None, b'[]{}"')
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _nesting_within(body: bytes, most: int) -> bool:
    """Whether `body`, valid JSON, nests arrays and objects no more than `most` deep.

    Read from the text, not the parsed value: a template of thousands of jobs is mostly values,
    and a Python step per value cost more than parsing the body. Of JSON's escapes only `\\\\`
    and `\\"` can hide a quote; with those gone, every other quote opens or closes a string, so
    the text between the odd and even quotes is outside the strings, and the depth is the
    highest running count of its brackets."""
    encoding = json.detect_encoding(body)
    if encoding not in ("utf-8", "utf-8-sig"):
        body = body.decode(encoding).encode()
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside_strings = b"".join(unescaped.translate(None, _NOT_BRACKET_OR_QUOTE).split(b'"')[::2])
    depths = itertools.accumulate(map(_DEPTH_STEP.__getitem__, outside_strings))
    return max(depths, default=0) <= most
