"""ManagedServiceIdentity: a token of the app's own managed identity, cached until near expiry.

The token comes from azure-identity's `ManagedIdentityCredential`, which finds the endpoint the
platform provides (`IDENTITY_ENDPOINT` and `IDENTITY_HEADER` on App Service and Functions) in
the environment of this process. Locally and in tests a small token server stands in for it.

This module owns the cache, not azure-identity: its credential keeps tokens in an MSAL cache of
its own, judged by the wall clock and, for tokens that live two hours or more, renewed only after
half their life. A renewal decided here, on the service's clock, would get that cached token
back. So each renewal asks a credential made for it, which holds nothing from before, and the
token is kept here alone, in memory: never in the job, its history or the logs.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from azure.core.exceptions import AzureError

from shared.actions.oauth import RENEW_BEFORE, TokenUnavailable
from shared.domain.audiences import STORAGE_SERVICES

if TYPE_CHECKING:
    from azure.identity import ManagedIdentityCredential

# The token endpoint is the platform's, on the same machine: bounded all the same, so that an
# endpoint that hangs fails the attempt instead of holding an executor thread.
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 20
TOKEN_REQUEST_RETRIES = 2
# azure-identity says "configuration not found" for any refusal of the endpoint, and names the
# endpoint's answer after it: only that answer is kept.
_NOT_FOUND_PREFIX = re.compile(r"^[^.]*configuration not found in environment\.\s*")
_ENDPOINT_ANSWER = re.compile(r"Token request error: \(\w+\)\s*(\d{3}),\s*")


def platform_credential(client_id: str | None) -> ManagedIdentityCredential:
    """azure-identity's credential for the identity the platform's endpoint serves."""
    # Imported here: azure-identity takes a tenth of a second or more to import, and only jobs
    # that authenticate as the app's identity need it (not a cold start's first call).
    from azure.identity import ManagedIdentityCredential  # noqa: PLC0415

    return ManagedIdentityCredential(
        client_id=client_id,
        connection_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retry_total=TOKEN_REQUEST_RETRIES,
    )


@dataclass(frozen=True)
class _Token:
    value: str
    renew_at: datetime


class IdentityTokens:
    """Bearer tokens of the app's managed identity, one per audience and identity."""

    def __init__(self, clock: Callable[[], datetime], default_client_id: str | None = None) -> None:
        self._clock, self._default_client_id = clock, default_client_id
        self._tokens: dict[tuple[str, str | None], _Token] = {}
        self._lock = threading.Lock()

    def token(self, audience: str, client_id: str | None = None) -> str:
        """A bearer token for the audience, from the job's identity or else the app's own."""
        identity = (client_id or self._default_client_id or "").lower() or None
        key = (audience, identity)
        with self._lock:
            cached = self._tokens.get(key)
        if cached is not None and self._clock() < cached.renew_at:
            return cached.value
        fresh = self._request(audience, identity)
        with self._lock:
            self._tokens[key] = fresh
        return fresh.value

    def _request(self, audience: str, client_id: str | None) -> _Token:
        identity = f"client id {client_id}" if client_id else "its default identity"
        credential = platform_credential(client_id)  # fresh: nothing cached from before
        try:
            # A scope is the resource and `/.default`; azure-identity takes that suffix off again
            # and sends the audience exactly as the job gives it, trailing slash and all.
            issued = credential.get_token_info(f"{audience}/.default")
        except (AzureError, ValueError) as failure:
            # The library's message quotes the endpoint's answer, never a token.
            reason = _NOT_FOUND_PREFIX.sub("", " ".join(str(failure).split()))
            reason = _ENDPOINT_ANSWER.sub(r"the endpoint answered \1: ", reason)[:400]
            raise TokenUnavailable(
                f"the app's managed identity ({identity}) gave no token for audience "
                f"'{audience}': {reason}"
            ) from None
        finally:
            credential.close()
        expires = datetime.fromtimestamp(issued.expires_on, UTC)
        renew_at = expires - RENEW_BEFORE
        if issued.refresh_on is not None:  # the platform's (or MSAL's) advice: half a long life
            renew_at = min(renew_at, datetime.fromtimestamp(issued.refresh_on, UTC))
        return _Token(issued.token, renew_at)


def storage_hosts(service_uris: Iterable[str]) -> frozenset[str]:
    """Every host of the storage accounts behind these service URIs (`acct.table.core...`):
    a managed identity token must not reach the app's own storage (see `HttpActions`)."""
    hosts = set()
    for uri in service_uris:
        host = (urlsplit(uri).hostname or "").lower()
        account, _, rest = host.partition(".")
        _, _, suffix = rest.partition(".")
        if not account or not suffix:
            continue
        for name in (account, f"{account}-secondary"):
            hosts |= {f"{name}.{service}.{suffix}" for service in STORAGE_SERVICES}
    return frozenset(hosts)
