"""Requests to a storage account's Table service over plain HTTP: where they go, how they are
signed, the pooled connections they travel on, the retries, and the errors they raise.

Why not the SDK's own pipeline: on this app's hot path (the executor reads a job and writes its
outcome, the API reads and writes a job) the SDK spends about 1 ms of CPU on a point read that
costs 0.2 ms when sent as below, and 3.8 ms on a two-row batch (it formats and parses batches
with the email package, in a thread pool made for each batch): measured against Azurite on the
machine of bench/results/cpu.md. The SDK still builds what it does well here: it parses the
connection string, creates tables, and issues managed-identity tokens (azure-identity).

The errors are azure-core's (ResourceNotFoundError, ResourceModifiedError, ...), raised as the
SDK raises them, so that code written against the SDK's client works unchanged with either.
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

# The Table service version these requests speak (the SDK's own, azure-data-tables 12.x).
TABLE_VERSION = "2019-02-02"
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


class SharedKeyLite:
    """Signs a Table request with the account key (the Table service's SharedKeyLite scheme)."""

    def __init__(self, account: str, key: str) -> None:
        self._account, self._key = account, base64.b64decode(key)

    def authorization(self, path: str, date: str) -> str:
        signed = f"{date}\n/{self._account}{path}".encode()
        signature = base64.b64encode(hmac.new(self._key, signed, hashlib.sha256).digest())
        return f"SharedKeyLite {self._account}:{signature.decode()}"


class BearerTokens:
    """Authorizes requests with a Microsoft Entra token (a managed identity in Azure), taken
    anew TOKEN_MARGIN_S before it expires."""

    def __init__(self, credential: TokenCredential) -> None:
        self._credential = credential
        self._lock = threading.Lock()
        self._token = ""
        self._expires_on = 0.0

    def authorization(self, path: str, date: str) -> str:
        with self._lock:
            if time.time() > self._expires_on - TOKEN_MARGIN_S:
                token = self._credential.get_token(STORAGE_SCOPE)
                self._token, self._expires_on = token.token, float(token.expires_on)
            return f"Bearer {self._token}"


Signer = SharedKeyLite | BearerTokens
RequestHook = Callable[[Any], None]


class StorageEndpoint:
    """One storage service endpoint (`https://account.table.core.windows.net`, or Azurite's
    `http://127.0.0.1:10002/devstoreaccount1`): signed requests on pooled connections."""

    def __init__(
        self,
        url: str,
        signer: Signer,
        *,
        on_request: RequestHook | None = None,
        verify: str | bool = True,
    ) -> None:
        """`verify`: a CA bundle's path, True for the default one, False for none (tests)."""
        parts = urlsplit(url.rstrip("/"))
        self.url = url.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._base_path = parts.path
        self._signer, self._on_request = signer, on_request
        self._pool = _pool(self.url, verify)

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
        for attempt in range(TRIES):
            if attempt:
                time.sleep(RETRY_PAUSES_S[attempt - 1])
            date = formatdate(usegmt=True)
            sent = {
                "x-ms-date": date,
                "x-ms-version": TABLE_VERSION,
                "DataServiceVersion": "3.0",
                "MaxDataServiceVersion": "3.0;NetFx",
                "Authorization": self._signer.authorization(path, date),
                **(headers or {}),
            }
            if self._on_request is not None:
                self._on_request(self)
            try:
                answer = self._pool.request(
                    method,
                    self._origin + (f"{path}?{query}" if query else path),
                    body=body,
                    headers=sent,
                    retries=False,
                    redirect=False,
                )
            except urllib3.exceptions.NewConnectionError as failure:
                if attempt == TRIES - 1:
                    raise ServiceRequestError(str(failure), error=failure) from failure
                continue
            except urllib3.exceptions.HTTPError as failure:
                if attempt == TRIES - 1:
                    raise ServiceResponseError(str(failure), error=failure) from failure
                continue
            if answer.status in RETRIED_STATUSES and attempt < TRIES - 1:
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
    raise with_status(kind(message=text), answer.status)


def with_status(error: HttpResponseError, status: int) -> HttpResponseError:
    error.status_code = status
    return error


def error_message(answer: Answer) -> str:
    """The service's own message (JSON, OData-style), or the status line's worth."""
    try:
        found = json.loads(answer.body)["odata.error"]
        return f"{found['code']}: {found['message']['value']}"
    except (ValueError, KeyError, TypeError):
        return f"storage answered {answer.status}"


def _pool(url: str, verify: str | bool) -> urllib3.PoolManager | urllib3.ProxyManager:
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
        return urllib3.ProxyManager(proxy, **options)
    return urllib3.PoolManager(**options)
