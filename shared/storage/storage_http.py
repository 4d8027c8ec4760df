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
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any
from urllib.parse import urlsplit
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
from requests.utils import get_environ_proxies

from shared.transport import CALLS_AT_ONCE

# The service versions these requests speak: the Table SDK's own (azure-data-tables 12.x), and
# a Queue version that both Azure and Azurite know (the Queue SDK sends newer ones, which
# Azurite only takes with --skipApiVersionCheck).
TABLE_VERSION = "2019-02-02"
QUEUE_VERSION = "2025-11-05"
STORAGE_SCOPE = "https://storage.azure.com/.default"
# A token is taken anew this long before it expires.
TOKEN_MARGIN_S = 300.0
# Tries of one request, and the pause before each retry: connection failures, timeouts, and the
# answers a storage service gives when it is busy (the SDK retries the same, longer).
TRIES = 4
RETRY_PAUSES_S = (0.2, 0.8, 2.4)
RETRIED_STATUSES = frozenset({408, 500, 502, 503, 504})
CONNECT_TIMEOUT_S = 20.0
READ_TIMEOUT_S = 60.0


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
        request, at most TRIES (the pauses between them are RETRY_PAUSES_S)."""
        parts = urlsplit(url.rstrip("/"))
        self.url = url.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._base_path = parts.path
        self._signer, self._version, self._on_request = signer, version, on_request
        self._tries = max(1, min(tries, TRIES))
        self._pool, self._by_absolute_url = _pool(self.url, verify)

    def path(self, resource: str) -> str:
        """The request path of `resource` (already URL-encoded), under the endpoint's own."""
        return f"{self._base_path}/{resource}"

    def absolute(self, path: str) -> str:
        return self._origin + path

    def send(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> Answer:
        """Send with retries; the answer, whatever its status. ServiceRequestError when no
        connection could be made, ServiceResponseError when none answered, after every try."""
        target = f"{path}?{query}" if query else path
        url = self._origin + target
        last = self._tries - 1
        for attempt in range(self._tries):
            if attempt:
                time.sleep(RETRY_PAUSES_S[attempt - 1])
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
            except (
                urllib3.exceptions.NewConnectionError,
                urllib3.exceptions.ProxyError,
            ) as failure:
                # No connection made, to the endpoint or to the proxy on the way (requests,
                # under the SDK, says ConnectionError for both).
                if attempt == last:
                    raise ServiceRequestError(str(failure), error=failure) from failure
                continue
            except urllib3.exceptions.HTTPError as failure:
                if attempt == last:
                    raise ServiceResponseError(str(failure), error=failure) from failure
                continue
            if answer.status in RETRIED_STATUSES and attempt < last:
                continue
            return Answer(answer.status, answer.headers, answer.data)
        raise AssertionError("unreachable: the last try returns or raises")


def raise_for(answer: Answer, message: str | None = None) -> None:
    """Raise the error azure-core's clients raise for this answer's status (a 2xx passes)."""
    if 200 <= answer.status < 300:
        return
    text = message or error_message(answer)
    kind: type[HttpResponseError] = {
        404: ResourceNotFoundError,
        409: ResourceExistsError,
        412: ResourceModifiedError,
        401: ClientAuthenticationError,
        403: ClientAuthenticationError,
    }.get(answer.status, HttpResponseError)
    error = kind(message=text)
    # The service's code, where the SDKs put it (azure-core's errors do not declare it).
    error.error_code = answer.headers.get("x-ms-error-code")  # type: ignore[attr-defined]
    raise with_status(error, answer.status)


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


def _pool(
    url: str, verify: str | bool
) -> tuple[urllib3.HTTPConnectionPool | urllib3.ProxyManager, bool]:
    """The connections to `url`, and whether a request names its absolute URL (through a
    proxy) or only its path (to the endpoint's own pool, which saves parsing the URL)."""
    # The proxy the environment names for this endpoint (NO_PROXY counts), read once.
    proxies = get_environ_proxies(url)
    proxy = proxies.get(urlsplit(url).scheme) or proxies.get("all")
    options: dict[str, Any] = {
        "maxsize": CALLS_AT_ONCE,
        "block": False,
        "timeout": urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S),
    }
    if url.startswith("https"):
        if verify is False:
            options["cert_reqs"] = "CERT_NONE"
        else:
            options["ca_certs"] = verify if isinstance(verify, str) else certifi.where()
    if proxy:
        return urllib3.ProxyManager(proxy, **options), True
    return urllib3.PoolManager(**options).connection_from_url(url), False
