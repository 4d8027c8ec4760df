"""ActiveDirectoryOAuth: a client-credentials token for the audience, cached until near expiry.

Azure Scheduler used the Azure AD v1 endpoint (`/{tenant}/oauth2/token` with `resource`), which is
what a job's `audience` names. The authority host is a setting: Azure's public cloud by default,
a sovereign cloud's or a local test server's otherwise. The token request goes to that trusted
host only (the tenant is a path segment of it), so it does not pass the SSRF guard.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import quote

import httpx

from shared.domain.job_definition import HttpAuthentication

# A token is renewed this long before it expires, so that no call carries a token about to lapse.
RENEW_BEFORE = timedelta(minutes=5)
TOKEN_TIMEOUT_S = 30.0


class TokenUnavailable(Exception):
    """The authority did not issue a token; the message says what it answered."""


@dataclass(frozen=True)
class _Token:
    value: str
    renew_at: datetime


class TokenCache:
    def __init__(
        self, authority_host: str, client: httpx.Client, clock: Callable[[], datetime]
    ) -> None:
        self._authority = authority_host.rstrip("/")
        self._client, self._clock = client, clock
        self._tokens: dict[tuple[str, ...], _Token] = {}
        self._lock = threading.Lock()

    def token(self, authentication: HttpAuthentication) -> str:
        """A bearer token for the job's tenant, client and audience."""
        key = (
            (authentication.tenant or "").lower(),
            authentication.client_id or "",
            authentication.audience or "",
            hashlib.sha256((authentication.secret or "").encode()).hexdigest(),
        )
        with self._lock:
            cached = self._tokens.get(key)
        if cached is not None and self._clock() < cached.renew_at:
            return cached.value
        fresh = self._request(authentication)
        with self._lock:
            self._tokens[key] = fresh
        return fresh.value

    def _request(self, authentication: HttpAuthentication) -> _Token:
        url = f"{self._authority}/{quote(authentication.tenant or '', safe='')}/oauth2/token"
        asked_at = self._clock()
        try:
            response = self._client.post(
                url,
                data={
                    "grant_type": "client_credentials",
                    "client_id": authentication.client_id,
                    "client_secret": authentication.secret,
                    "resource": authentication.audience,
                },
                timeout=TOKEN_TIMEOUT_S,
            )
        except httpx.HTTPError as failure:
            raise TokenUnavailable(f"the token endpoint {url} did not answer: {failure}") from None
        try:
            answer = response.json()
            value, lifetime = answer["access_token"], float(answer.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError):
            raise TokenUnavailable(
                f"the token endpoint {url} answered {response.status_code} without a token: "
                f"{response.text[:300]}"
            ) from None
        return _Token(value, asked_at + timedelta(seconds=lifetime) - RENEW_BEFORE)
