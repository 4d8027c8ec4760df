"""The Http and Https actions: one request, success on a 2xx within the timeout.

Every request carries the occurrence's identity in `x-ms-scheduler-*` headers, the same on a
retry of the same attempt and on a duplicate delivery, so that a receiver can drop duplicates.
Outbound authentication: Basic, ClientCertificate (the pfx becomes the TLS client certificate),
ActiveDirectoryOAuth (a bearer token from `TokenCache`) and ManagedServiceIdentity (a bearer
token of the app's own identity, from `IdentityTokens`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import ssl
import tempfile

import httpx

from shared.actions import Performed
from shared.actions.clients import ClientPool
from shared.actions.managed_identity import IdentityTokens
from shared.actions.oauth import TokenCache, TokenUnavailable
from shared.actions.outbound import OutboundPolicy, guarded_client, tls_context
from shared.domain.attempts import Attempt, execution_id
from shared.domain.audiences import audience_refusal
from shared.domain.ids import JobId
from shared.domain.job_definition import ErrorAction, HttpAuthentication, HttpAuthenticationType
from shared.domain.redaction import masked_values, redact_text
from shared.domain.wire import iso

IDENTITY_PREFIX = "x-ms-scheduler-"
# History keeps up to 2,048 bytes of the response body (docs/behaviour.md#http-calls).
MOST_BODY_BYTES = 2048
_MOST_CERTIFICATE_CLIENTS = 32


class HttpActions:
    """Performs Http(s) actions with one pooled client per process (and per client certificate)."""

    def __init__(
        self,
        policy: OutboundPolicy,
        extra_ca_file: str | None,
        tokens: TokenCache,
        identity: IdentityTokens | None = None,
        own_storage_hosts: frozenset[str] = frozenset(),
        *,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """`identity` gives ManagedServiceIdentity tokens (None: the app has no identity);
        `own_storage_hosts` are the hosts of the app's own storage, which its identity may
        read and write (tables with every job's secrets): no identity token goes there.
        `tls` is a context already built from `extra_ca_file` to share (each context loads the
        system's roots at its first handshake, some 17 ms of CPU); None builds one."""
        self._policy, self._extra_ca_file, self._tokens = policy, extra_ca_file, tokens
        self._identity, self._own_storage_hosts = identity, own_storage_hosts
        self._client = guarded_client(policy, tls or tls_context(extra_ca_file))
        self._certificate_clients: ClientPool[httpx.Client] = ClientPool(_MOST_CERTIFICATE_CLIENTS)

    def perform(
        self, action: ErrorAction, job: JobId, attempt: Attempt, region: str = ""
    ) -> Performed:
        """Send the request, and say how it went."""
        request = action.request
        if request is None:
            raise ValueError("an Http action without its request")
        uri = request.uri
        host = httpx.URL(uri).host
        authentication = request.authentication
        kind = authentication.type if authentication else None
        # The job's own headers, except any that would pass for the service's identity headers.
        own = {
            name: value
            for name, value in (request.headers or {}).items()
            if not name.lower().startswith(IDENTITY_PREFIX)
        }
        headers = {**own, **identity_headers(job, attempt)}
        client, auth, token = self._client, None, ""
        try:
            if authentication is None:
                pass
            elif kind is HttpAuthenticationType.BASIC:
                auth = httpx.BasicAuth(authentication.username or "", authentication.password or "")
            elif kind is HttpAuthenticationType.ACTIVE_DIRECTORY_OAUTH:
                token = self._tokens.token(authentication)
            elif kind is HttpAuthenticationType.CLIENT_CERTIFICATE:
                client = self._certificate_client(authentication)
            elif kind is HttpAuthenticationType.MANAGED_SERVICE_IDENTITY:
                token = self._identity_token(authentication, uri)
        except TokenUnavailable as failure:
            return Performed(False, f"Http Action - No token for host '{host}': {failure}")
        except ValueError as failure:
            return Performed(
                False, f"Http Action - The client certificate cannot be used: {failure}"
            )
        if token:
            headers["Authorization"] = f"Bearer {token}"
        body = request.body
        try:
            with client.stream(
                request.method.upper(),
                uri,
                headers=headers,
                content=body.encode() if body is not None else None,
                auth=auth,
            ) as response:
                shown = _first_bytes(response)
                status = f"{response.status_code} {response.reason_phrase}".strip()
                succeeded = response.is_success
        except httpx.TimeoutException:
            return Performed(False, f"Http Action - Request to host '{host}' timed out")
        except httpx.HTTPError as failure:
            # Some of httpx's messages quote the URL, and history is shown to whoever reads it.
            return Performed(
                False,
                f"Http Action - Request to host '{host}' failed: {redact_text(str(failure))}",
            )
        # A target that echoes the request would put the token into history.
        shown = masked_values(shown, {token})
        return Performed(
            succeeded, f"Http Action - Response from host '{host}': '{status}' Body: {shown}"
        )

    def close(self) -> None:
        self._client.close()
        for client in self._certificate_clients.take_all():
            client.close()

    def _identity_token(self, authentication: HttpAuthentication, uri: str) -> str:
        if self._identity is None:
            raise TokenUnavailable(
                "the app has no managed identity here (the platform sets IDENTITY_ENDPOINT "
                "where it has one)"
            )
        if httpx.URL(uri).host.lower().rstrip(".") in self._own_storage_hosts:
            raise TokenUnavailable(
                "the app's identity is not lent for calls to the app's own storage account"
            )
        # Checked at the save too; here again for jobs saved before the rule was.
        audience = authentication.audience or ""
        refusal = audience_refusal(audience, uri)
        if refusal is not None:
            raise TokenUnavailable(f"the audience {refusal}")
        return self._identity.token(audience, authentication.client_id)

    def _certificate_client(self, authentication: HttpAuthentication) -> httpx.Client:
        key = hashlib.sha256(
            f"{authentication.pfx}\n{authentication.password or ''}".encode()
        ).hexdigest()
        return self._certificate_clients.get(
            key, lambda: guarded_client(self._policy, self._with_certificate(authentication))
        )

    def _with_certificate(self, authentication: HttpAuthentication) -> ssl.SSLContext:
        """A TLS context presenting the job's certificate (ssl loads keys only from files)."""
        # Imported here: cryptography is a tenth of a second of the first delivery's import,
        # and only jobs with a client certificate need it (once per certificate: cached).
        from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
            BestAvailableEncryption,
            Encoding,
            PrivateFormat,
            pkcs12,
        )

        password = (authentication.password or "").encode()
        key, certificate, chain = pkcs12.load_key_and_certificates(
            base64.b64decode(authentication.pfx or ""), password or None
        )
        if key is None or certificate is None:
            raise ValueError("the pfx holds no certificate with its private key")
        context = tls_context(self._extra_ca_file)
        one_time = os.urandom(16).hex().encode()
        with tempfile.TemporaryDirectory() as folder:  # private to this user, removed at once
            key_file, chain_file = os.path.join(folder, "key.pem"), os.path.join(folder, "c.pem")
            with open(key_file, "wb") as out:
                encryption = BestAvailableEncryption(one_time)
                out.write(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, encryption))
            with open(chain_file, "wb") as out:
                for part in (certificate, *(chain or ())):
                    out.write(part.public_bytes(Encoding.PEM))
            context.load_cert_chain(chain_file, key_file, password=one_time)
        return context


def identity_headers(job: JobId, attempt: Attempt) -> dict[str, str]:
    """What identifies an execution to its receiver; equal on every duplicate of it."""
    return {
        "x-ms-scheduler-jobcollectionid": job.collection.arm_id,
        "x-ms-scheduler-jobid": job.arm_id,
        "x-ms-scheduler-execution-id": execution_id(job, attempt),
        "x-ms-scheduler-expected-execution-time": iso(attempt.expected),
        "x-ms-scheduler-retry-count": str(attempt.retry),
        "x-ms-scheduler-action": attempt.action.value,
    }


def _first_bytes(response: httpx.Response) -> str:
    kept = b""
    for chunk in response.iter_bytes():
        kept += chunk
        if len(kept) >= MOST_BODY_BYTES:
            break
    return kept[:MOST_BODY_BYTES].decode("utf-8", errors="replace")
