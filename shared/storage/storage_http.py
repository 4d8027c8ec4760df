"""Requests to a storage account's Table and Queue services over plain HTTP: where they go, how
they are signed, the pooled connections they travel on, the retries, and the errors they raise.

Why not the SDK's own pipeline: on this app's hot path (the executor reads a job and writes its
outcome, the API reads and writes a job) the SDK spends about 1 ms of CPU on a point read that
costs 0.4 ms when sent as below, and about 4 ms on a two-row batch that costs 0.5 ms (it formats
and parses batches with the email package, in thread pools made for each batch): measured
against Azurite on the machine of bench/results/cpu.md (docs/architecture.md has the table).
Queues cost the same way (`queue_http` has their numbers). The SDK still builds what it does
well here: it parses the connection string, creates tables, and issues managed-identity tokens
(azure-identity).

The errors are azure-core's (ResourceNotFoundError, ResourceModifiedError, ...), raised as the
SDK raises them, so that code written against the SDK's clients works unchanged with either.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import random
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import TypedDict, Unpack
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

import certifi
import urllib3
from azure.core.credentials import TokenCredential
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.core.pipeline.transport import HttpResponse as SdkHttpResponse

from shared.transport import CALLS_AT_ONCE, environment_proxies

# The service versions these requests speak: the Table SDK's own (azure-data-tables 12.x), and
# a Queue version that both Azure and Azurite know (the Queue SDK sends newer ones, which
# Azurite only takes with --skipApiVersionCheck).
TABLE_VERSION = "2019-02-02"
QUEUE_VERSION = "2025-11-05"
STORAGE_SCOPE = "https://storage.azure.com/.default"
# A token is taken anew this long before it expires.
TOKEN_MARGIN_S = 300.0
# Tries of one request, and the pauses between them: exponential from FIRST_PAUSE_S, each drawn
# at random between half and the whole of its step (jitter, so that clients throttled together do
# not come back together), never shorter than the service's Retry-After, and no try begun after
# OPERATION_DEADLINE_S. The SDKs' policy (azure-core's RetryPolicy) retries the same statuses.
TRIES = 4
FIRST_PAUSE_S = 0.2
PAUSE_GROWTH = 4.0
LONGEST_PAUSE_S = 10.0
OPERATION_DEADLINE_S = 30.0
# Answers that say the request was not carried out (busy, throttled, not read in time): any
# request may be sent again.
NOT_APPLIED_STATUSES = frozenset({408, 429, 503})
# Answers after which the write may or may not have been applied (500 OperationTimedOut or
# InternalError; a gateway's 502 or 504): sent again only if repeating it cannot apply it twice.
UNKNOWN_OUTCOME_STATUSES = frozenset({500, 502, 504})
# Other 5xx past these (505 is the client's own fault): the SDKs retry 506 and above.
LAST_UNRETRIED_5XX = 505
CONNECT_TIMEOUT_S = 20.0
READ_TIMEOUT_S = 60.0


class AnswerLost(ServiceResponseError):
    """A write was sent but its outcome is unknown (no answer, a dropped connection, a timeout or
    a 500): storage may or may not have applied it. Raised instead of sending it again where a
    second copy could apply it twice; the caller resolves it by reading what storage holds.
    `answer`: the service's answer, where there was one."""

    def __init__(self, message: str, answer: Answer | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)
        self.answer = answer


def retry_pause(attempt: int, answer_headers: Mapping[str, str] | None, left_s: float) -> float:
    """The pause before try `attempt` (1: the first retry): exponential with jitter, at least
    the service's Retry-After, at most what is left of the operation's deadline."""
    step = min(FIRST_PAUSE_S * PAUSE_GROWTH ** (attempt - 1), LONGEST_PAUSE_S)
    pause = random.uniform(step / 2, step)
    asked = _retry_after_s(answer_headers)
    if asked is not None:
        pause = max(pause, asked)
    return max(0.0, min(pause, left_s))


def _retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """The seconds a Retry-After (or x-ms-retry-after-ms) header asks for; None if none."""
    if not headers:
        return None
    milliseconds = headers.get("x-ms-retry-after-ms") or headers.get("retry-after-ms")
    try:
        if milliseconds is not None:
            return min(float(milliseconds) / 1000, LONGEST_PAUSE_S)
        seconds = headers.get("Retry-After")
        return None if seconds is None else min(float(seconds), LONGEST_PAUSE_S)
    except ValueError:  # an HTTP date, or nonsense: the exponential pause stands
        return None


def retried(status: int, repeatable: bool) -> bool:
    """Whether an answer of this status is worth another try of the same request."""
    if status in NOT_APPLIED_STATUSES:
        return True
    if status in UNKNOWN_OUTCOME_STATUSES or status > LAST_UNRETRIED_5XX:
        return repeatable
    return False


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


class TableSharedKeyLite:
    """Signs a Table request with the account key (the Table service's SharedKeyLite scheme:
    the date and the resource)."""

    def __init__(self, account: str, key: str) -> None:
        self._account, self._key = account, base64.b64decode(key)

    def authorization(self, method: str, path: str, query: str, headers: Mapping[str, str]) -> str:
        return _signed(self._account, self._key, f"{headers['x-ms-date']}\n/{self._account}{path}")


class QueueSharedKeyLite:
    """Signs a Queue request with the account key (the Blob and Queue services' SharedKeyLite
    scheme: the verb, Content-MD5, Content-Type, the Date header (empty: x-ms-date is sent),
    every x-ms-* header, and the resource with its `comp` parameter only)."""

    def __init__(self, account: str, key: str) -> None:
        self._account, self._key = account, base64.b64decode(key)

    def authorization(self, method: str, path: str, query: str, headers: Mapping[str, str]) -> str:
        storage_headers = sorted(
            (name.lower(), value.strip())
            for name, value in headers.items()
            if name.lower().startswith("x-ms-")
        )
        canonical = "".join(f"{name}:{value}\n" for name, value in storage_headers)
        comp = next((f"?{part}" for part in query.split("&") if part.startswith("comp=")), "")
        signed = (
            f"{method}\n{headers.get('Content-MD5', '')}\n{headers.get('Content-Type', '')}\n\n"
            f"{canonical}/{self._account}{path}{comp}"
        )
        return _signed(self._account, self._key, signed)


def _signed(account: str, key: bytes, text: str) -> str:
    signature = base64.b64encode(hmac.new(key, text.encode(), hashlib.sha256).digest())
    return f"SharedKeyLite {account}:{signature.decode()}"


class BearerTokens:
    """Authorizes requests with a Microsoft Entra token (a managed identity in Azure), taken
    anew TOKEN_MARGIN_S before it expires."""

    def __init__(self, credential: TokenCredential) -> None:
        self._credential = credential
        self._lock = threading.Lock()
        self._token = ""
        self._expires_on = 0.0

    def authorization(self, method: str, path: str, query: str, headers: Mapping[str, str]) -> str:
        with self._lock:
            if time.time() > self._expires_on - TOKEN_MARGIN_S:
                token = self._credential.get_token(STORAGE_SCOPE)
                self._token, self._expires_on = token.token, float(token.expires_on)
            return f"Bearer {self._token}"


Signer = TableSharedKeyLite | QueueSharedKeyLite | BearerTokens


@dataclass(frozen=True)
class RequestSent:
    """What a request hook is shown of each try: the request's method, URL, headers and body,
    also as `http_request`, where the SDK's `raw_request_hook` finds them."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None

    @property
    def http_request(self) -> RequestSent:
        return self


RequestHook = Callable[[RequestSent], None]


class SendOptions(TypedDict, total=False):
    """What a request carries beside its method and path (`StorageEndpoint.send`)."""

    query: str  # without the "?"
    headers: Mapping[str, str] | None
    body: bytes | None
    repeatable: bool  # False: a write a second copy could apply twice (see `send`)


class StorageEndpoint:
    """One storage service endpoint (`https://account.table.core.windows.net`, or Azurite's
    `http://127.0.0.1:10002/devstoreaccount1`): signed requests on pooled connections."""

    def __init__(
        self,
        url: str,
        signer: Signer,
        *,
        version: str = TABLE_VERSION,
        on_request: RequestHook | None = None,
        verify: str | bool = True,
        tries: int = TRIES,
    ) -> None:
        """`version`: the service version the requests speak (x-ms-version). `verify`: a CA
        bundle's path, True for the default one, False for none (tests). `tries`: of each
        request, at most TRIES (the pauses between them: `retry_pause`)."""
        parts = urlsplit(url.rstrip("/"))
        self.url = url.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._base_path = parts.path
        self._signer, self._version, self._on_request = signer, version, on_request
        self._tries = max(1, min(tries, TRIES))
        self._pool, self._by_absolute_url = _pool(self.url, verify)
        self.sleep: Callable[[float], None] = time.sleep  # tests replace it
        self.deadline_s = OPERATION_DEADLINE_S

    def path(self, resource: str) -> str:
        """The request path of `resource` (already URL-encoded), under the endpoint's own."""
        return f"{self._base_path}/{resource}"

    def absolute(self, path: str) -> str:
        return self._origin + path

    def send(self, method: str, path: str, **options: Unpack[SendOptions]) -> Answer:
        """Send with retries; the answer, whatever its status. ServiceRequestError when no
        connection could be made, ServiceResponseError when none answered, after every try.

        `repeatable=False` for a write that a second copy could apply twice (an insert, an
        etag-checked write, a batch): once it may have reached storage and its answer was lost,
        it is not sent again but raises AnswerLost, for the caller to resolve by reading."""
        query, headers = options.get("query", ""), options.get("headers")
        body, repeatable = options.get("body"), options.get("repeatable", True)
        target = f"{path}?{query}" if query else path
        url = self._origin + target
        last = self._tries - 1
        started = time.monotonic()
        previous: Mapping[str, str] | None = None
        for attempt in range(self._tries):
            if attempt:
                left = self.deadline_s - (time.monotonic() - started)
                self.sleep(retry_pause(attempt, previous, left))
            previous = None
            final = attempt == last or time.monotonic() - started >= self.deadline_s
            sent = {
                "x-ms-date": formatdate(usegmt=True),
                "x-ms-version": self._version,
                **(headers or {}),
            }
            sent["Authorization"] = self._signer.authorization(method, path, query, sent)
            if self._on_request is not None:
                self._on_request(RequestSent(method, url, sent, body))
            try:
                answer = self._pool.urlopen(
                    method,
                    url if self._by_absolute_url else target,
                    body=body,
                    headers=sent,
                    retries=False,
                    redirect=False,
                )
            except urllib3.exceptions.HTTPError as failure:
                if _unsent(failure):
                    # Nothing reached storage (requests, under the SDK, says ConnectionError).
                    if final:
                        raise ServiceRequestError(str(failure), error=failure) from failure
                    continue
                # Sent, and no answer (read timeout, connection dropped): maybe applied.
                if not repeatable:
                    raise AnswerLost(str(failure), error=failure) from failure
                if final:
                    raise ServiceResponseError(str(failure), error=failure) from failure
                continue
            found = Answer(answer.status, answer.headers, answer.data)
            if not repeatable and found.status in UNKNOWN_OUTCOME_STATUSES:
                raise AnswerLost(error_message(found), found)
            if not final and retried(found.status, repeatable):
                previous = found.headers
                continue
            return found
        raise AssertionError("unreachable: the last try returns or raises")


def _unsent(failure: urllib3.exceptions.HTTPError) -> bool:
    """Whether the request failed before any of it was sent: no connection made, to the
    endpoint or to a proxy on the way, or the server's certificate refused in the handshake
    (urllib3 says SSLError for that and for a TLS failure mid-answer alike)."""
    if isinstance(failure, urllib3.exceptions.SSLError):
        return bool(failure.args) and isinstance(failure.args[0], ssl.SSLCertVerificationError)
    return isinstance(
        failure,
        urllib3.exceptions.NewConnectionError
        | urllib3.exceptions.ConnectTimeoutError
        | urllib3.exceptions.ProxyError,
    )


# The errors of the service's error codes (x-ms-error-code), as both SDKs choose them: a 403
# AuthorizationFailure is no authentication error, a 409 or 412 of another code is no "exists"
# or "modified". The statuses the SDKs' generated layers map first (401, 404, 409) go by status.
_ERRORS_BY_STATUS: Mapping[int, type[HttpResponseError]] = {
    401: ClientAuthenticationError,
    404: ResourceNotFoundError,
    409: ResourceExistsError,
}
_ERRORS_BY_CODE: Mapping[str, type[HttpResponseError]] = {
    "ConditionNotMet": ResourceModifiedError,
    "UpdateConditionNotSatisfied": ResourceModifiedError,
    "InvalidAuthenticationInfo": ClientAuthenticationError,
    "AuthenticationFailed": ClientAuthenticationError,
    "ResourceNotFound": ResourceNotFoundError,
    "TableNotFound": ResourceNotFoundError,
    "EntityNotFound": ResourceNotFoundError,
    "QueueNotFound": ResourceNotFoundError,
    "ResourceAlreadyExists": ResourceExistsError,
    "TableAlreadyExists": ResourceExistsError,
    "EntityAlreadyExists": ResourceExistsError,
    "QueueAlreadyExists": ResourceExistsError,
    "QueueBeingDeleted": ResourceExistsError,
    "AccountAlreadyExists": ResourceExistsError,
}


def raise_for(answer: Answer, message: str | None = None) -> None:
    """Raise the error azure-core's clients raise for this answer (a 2xx passes): chosen by
    the service's error code (x-ms-error-code), by the status where it sent none; the error
    carries `error_code`, `status_code` and the answer as `response`."""
    if 200 <= answer.status < 300:
        return
    text = message or error_message(answer)
    code = answer.headers.get("x-ms-error-code") or _body_code(answer)
    kind = _ERRORS_BY_STATUS.get(answer.status) or _ERRORS_BY_CODE.get(code or "")
    if kind is None and code is None and answer.status == 412:  # no code to say otherwise
        kind = ResourceModifiedError
    error = (kind or HttpResponseError)(message=text, response=_sdk_response(answer))
    # The service's code, where the SDKs put it (azure-core's errors do not declare it).
    error.error_code = code  # type: ignore[attr-defined]
    raise with_status(error, answer.status)


def _body_code(answer: Answer) -> str | None:
    """The code in an error body, for answers whose headers lack x-ms-error-code."""
    message = error_message(answer)
    if message.startswith("storage answered"):
        return None
    if "ErrorCode:" in message:
        return message.split("ErrorCode:", 1)[1].split("\n", 1)[0] or None
    return message.split(":", 1)[0] or None


class _AnsweredResponse(SdkHttpResponse):
    """An answer as azure-core's errors take one (`response`): status, reason, headers, body."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(None, None)  # type: ignore[arg-type]
        self.status_code = answer.status
        self.headers = dict(answer.headers)
        self.reason = ""
        self.content_type = answer.headers.get("Content-Type")
        self._body = answer.body

    def body(self) -> bytes:
        return self._body


def _sdk_response(answer: Answer) -> SdkHttpResponse:
    return _AnsweredResponse(answer)


def with_status(error: HttpResponseError, status: int) -> HttpResponseError:
    error.status_code = status
    return error


def error_message(answer: Answer) -> str:
    """The service's own message (the Table service's JSON, OData-style, or the Queue service's
    XML), or the status line's worth."""
    if answer.body.lstrip().startswith(b"<"):
        return _xml_error_message(answer)
    try:
        found = json.loads(answer.body)["odata.error"]
        return f"{found['code']}: {found['message']['value']}"
    except (ValueError, KeyError, TypeError):
        return f"storage answered {answer.status}"


def _xml_error_message(answer: Answer) -> str:
    """`<Error><Code/><Message/>...</Error>` as the SDK words it: the message, then the code
    and any details (`AuthenticationErrorDetail:The token is expired`), a line each."""
    try:
        error = ElementTree.fromstring(answer.body)
    except ElementTree.ParseError:
        return f"storage answered {answer.status}"
    lines = [(error.findtext("Message") or f"storage answered {answer.status}").strip()]
    lines.append(f"ErrorCode:{error.findtext('Code') or ''}")
    lines += [
        f"{detail.tag}:{(detail.text or '').strip()}"
        for detail in error
        if detail.tag not in ("Code", "Message")
    ]
    return "\n".join(lines)


class _PoolOptions(TypedDict, total=False):
    """The keywords urllib3 takes for a pool of connections, of those set here."""

    maxsize: int
    block: bool
    timeout: urllib3.Timeout
    cert_reqs: str
    ssl_context: ssl.SSLContext


def _pool(
    url: str, verify: str | bool
) -> tuple[urllib3.HTTPConnectionPool | urllib3.ProxyManager, bool]:
    """The connections to `url`, and whether a request names its absolute URL (through a
    proxy) or only its path (to the endpoint's own pool, which saves parsing the URL)."""
    proxies = environment_proxies(url)  # read once: NO_PROXY counts, as with the SDKs
    proxy = proxies.get(urlsplit(url).scheme) or proxies.get("all")
    options: _PoolOptions = {
        "maxsize": CALLS_AT_ONCE,
        "block": False,
        "timeout": urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S),
    }
    if url.startswith("https"):
        if verify is False:
            options["cert_reqs"] = "CERT_NONE"
        else:
            options["ssl_context"] = trusting(
                verify if isinstance(verify, str) else certifi.where()
            )
    if proxy:
        return urllib3.ProxyManager(proxy, proxy_headers=proxy_credentials(proxy), **options), True
    return urllib3.PoolManager(**options).connection_from_url(url), False


@functools.cache
def trusting(ca_bundle: str) -> ssl.SSLContext:
    """A TLS context whose roots are the bundle's, loaded once a process. Given the bundle's
    path (`ca_certs`) instead, urllib3 loads it again on every connection it opens: some 14 ms
    of CPU each (certifi's, on the 2-core VM), paid by the first request to each endpoint and
    by every connection a burst adds, in Azure, where storage is reached over HTTPS."""
    context = urllib3.util.create_urllib3_context()
    context.load_verify_locations(cafile=ca_bundle)
    return context


def proxy_credentials(proxy: str) -> dict[str, str]:
    """The Proxy-Authorization a proxy URL's `user:password@` asks for (urllib3 would drop it):
    requests, under the SDK, sends it the same way; no header for a proxy named without."""
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.username is None:
        return {}
    return urllib3.util.make_headers(
        proxy_basic_auth=f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    )
