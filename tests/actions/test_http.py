"""The Http action against real local servers: outbound authentication, TLS, the SSRF guard."""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

from shared.actions.http import MOST_BODY_BYTES, HttpActions
from shared.actions.oauth import TokenCache
from shared.actions.outbound import OutboundPolicy, tls_context
from shared.domain.attempts import Attempt, execution_id
from shared.domain.ids import CollectionId, JobId
from tests.actions import typed
from tests.targets import Target, token_endpoint

JOB = JobId(CollectionId("sub", "group", "jc"), "job")
ATTEMPT = Attempt(datetime(2026, 11, 22, 10, 0, tzinfo=UTC))
LOCAL = OutboundPolicy.from_setting("127.0.0.1/32")


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def ca_file(authority: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    authority.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture(scope="module")
def tls_target(authority: trustme.CA) -> Iterator[Target]:
    """An HTTPS server that accepts only clients with a certificate from `authority`."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    authority.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    server = Target(tls=context)
    yield server
    server.close()


def actions(policy: OutboundPolicy = LOCAL, ca_file: str | None = None, authority_host: str = "https://login.invalid") -> HttpActions:
    tokens = TokenCache(authority_host, httpx.Client(), lambda: datetime.now(UTC))
    return HttpActions(policy, ca_file, tokens)


def request(uri: str, method: str = "GET", **fields: Any) -> dict[str, Any]:
    return {"type": "Http", "request": {"uri": uri, "method": method, **fields}}


def perform(performer: HttpActions, action: dict[str, Any]) -> tuple[bool, str]:
    return performer.perform(typed(action), JOB, ATTEMPT)


# --- requests and responses -------------------------------------------------------------------


def test_method_headers_and_body_are_sent_and_a_2xx_succeeds(target: Target) -> None:
    target.answer("/plain", 202, b"accepted")
    headers = {"X-Custom": "1", "X-MS-Scheduler-JobId": "forged"}
    succeeded, message = perform(actions(), request(target.url("/plain"), "PUT", headers=headers, body="{}"))
    assert succeeded
    assert message == "Http Action - Response from host '127.0.0.1': '202 Accepted' Body: accepted"
    [call] = target.received("/plain")
    assert (call.method, call.body, call.headers["x-custom"]) == ("PUT", b"{}", "1")
    assert call.headers["x-ms-scheduler-execution-id"] == execution_id(JOB, ATTEMPT)
    assert call.headers["x-ms-scheduler-jobid"] == JOB.arm_id


def test_any_other_status_fails_and_history_keeps_2048_bytes_of_the_body(target: Target) -> None:
    target.answer("/teapot", 418, b"x" * 5000)
    succeeded, message = perform(actions(), request(target.url("/teapot")))
    assert not succeeded
    assert "'418 " in message
    assert message.endswith("x" * MOST_BODY_BYTES)
    assert "x" * (MOST_BODY_BYTES + 1) not in message


def test_the_execution_identity_is_the_occurrence_not_the_attempt() -> None:
    retry = Attempt(ATTEMPT.expected, retry=1)
    assert execution_id(JOB, retry) == execution_id(JOB, ATTEMPT)
    assert execution_id(JOB, Attempt(ATTEMPT.expected, run_now=True)) != execution_id(JOB, ATTEMPT)


# --- outbound authentication ------------------------------------------------------------------


def test_basic_authentication(target: Target) -> None:
    expected = "Basic " + base64.b64encode(b"scheduler:s3cret").decode()
    target.respond("/basic", lambda r: (200, b"ok", {}) if r.headers.get("authorization") == expected else (401, b"no", {}))
    auth = {"type": "Basic", "username": "scheduler", "password": "s3cret"}
    assert perform(actions(), request(target.url("/basic"), authentication=auth))[0]
    wrong = auth | {"password": "guess"}
    succeeded, message = perform(actions(), request(target.url("/basic"), authentication=wrong))
    assert not succeeded
    assert "401" in message


def client_pfx(authority: trustme.CA, password: bytes) -> str:
    issued = authority.issue_cert("scheduler-client@example.org")
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    certificate = x509.load_pem_x509_certificate(issued.cert_chain_pems[0].bytes())
    data = pkcs12.serialize_key_and_certificates(b"client", key, certificate, None, BestAvailableEncryption(password))  # type: ignore[arg-type]
    return base64.b64encode(data).decode()


def test_client_certificate_authentication_presents_the_pfx_over_real_tls(
    tls_target: Target, authority: trustme.CA, ca_file: str
) -> None:
    tls_target.answer("/mtls", 200, b"hello client")
    auth = {"type": "ClientCertificate", "pfx": client_pfx(authority, b"pfx-pw"), "password": "pfx-pw"}
    performer = actions(ca_file=ca_file)
    succeeded, message = perform(performer, request(tls_target.url("/mtls"), authentication=auth))
    assert succeeded, message
    [call] = tls_target.received("/mtls")
    assert call.client_certificate is not None
    assert "scheduler-client@example.org" in str(call.client_certificate["subjectAltName"])
    # Without the certificate the server refuses the handshake: a failed attempt, not a crash.
    succeeded, message = perform(performer, request(tls_target.url("/mtls")))
    assert not succeeded
    assert "failed" in message
    assert len(tls_target.received("/mtls")) == 1


def test_an_untrusted_server_certificate_fails(tls_target: Target, authority: trustme.CA) -> None:
    auth = {"type": "ClientCertificate", "pfx": client_pfx(authority, b"pw"), "password": "pw"}
    succeeded, message = perform(actions(), request(tls_target.url("/mtls"), authentication=auth))
    assert not succeeded
    assert "CERTIFICATE_VERIFY_FAILED" in message


def test_the_actions_tls_context_checks_as_strictly_as_the_standard_librarys_default(ca_file: str) -> None:
    ours, standard = tls_context(ca_file), ssl.create_default_context()
    for setting in ("protocol", "verify_mode", "check_hostname", "verify_flags", "options", "minimum_version", "maximum_version"):
        assert getattr(ours, setting) == getattr(standard, setting), setting


def test_the_system_roots_are_loaded_at_the_first_tls_handshake_not_before(target: Target, authority: trustme.CA, ca_file: str) -> None:
    system_roots = ssl.create_default_context().cert_store_stats()["x509_ca"]
    assert system_roots > 0, "this machine has no system roots to load"
    tls = tls_context(ca_file)
    tokens = TokenCache("https://login.invalid", httpx.Client(verify=tls), lambda: datetime.now(UTC))
    performer = HttpActions(LOCAL, ca_file, tokens, tls=tls)
    target.answer("/before-any-tls")
    assert perform(performer, request(target.url("/before-any-tls")))[0]
    assert tls.cert_store_stats()["x509_ca"] == 1  # the development CA alone: http needed no roots
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_side)
    https = Target(tls=server_side)
    try:
        https.answer("/first-handshake")
        for _ in range(2):  # two connections, two handshakes
            succeeded, message = perform(performer, request(https.url("/first-handshake"), headers={"Connection": "close"}))
            assert succeeded, message
    finally:
        https.close()
    assert tls.cert_store_stats()["x509_ca"] == 1 + system_roots


def test_active_directory_oauth_gets_a_token_for_the_audience_and_caches_it(target: Target) -> None:
    path, responder = token_endpoint("contoso.onmicrosoft.com", "app-id", "app-secret", "tok")
    target.respond(path, responder)
    audience = "https://management.core.windows.net/"
    expected = f"Bearer tok:{audience}"
    target.respond("/oauth", lambda r: (200, b"ok", {}) if r.headers.get("authorization") == expected else (401, b"", {}))
    auth = {"type": "ActiveDirectoryOAuth", "tenant": "contoso.onmicrosoft.com", "audience": audience,
            "clientId": "app-id", "secret": "app-secret"}  # fmt: skip
    performer = actions(authority_host=target.url(""))
    assert perform(performer, request(target.url("/oauth"), authentication=auth))[0]
    assert perform(performer, request(target.url("/oauth"), authentication=auth))[0]
    assert len(target.received(path)) == 1  # the second call used the cached token
    [asked] = target.received(path)
    assert b"resource=https" in asked.body
    succeeded, message = perform(performer, request(target.url("/oauth"), authentication=auth | {"secret": "wrong"}))
    assert not succeeded
    assert "No token" in message
    assert "invalid_client" in message


# --- the SSRF guard -----------------------------------------------------------------------------


@pytest.mark.parametrize("uri", [
    "http://169.254.169.254/metadata/identity/oauth2/token",
    "http://127.0.0.1:{port}/guarded",
    "http://localhost:{port}/guarded",
    "http://[::1]:{port}/guarded",
    "http://0.0.0.0:{port}/guarded",
    "http://10.1.2.3/",
    "http://192.168.0.1/",
    "http://172.16.5.4/",
    "http://[::ffff:127.0.0.1]:{port}/guarded",
], ids=["metadata", "loopback", "name-resolving-to-loopback", "loopback-v6", "unspecified", "private-10",
        "private-192", "private-172", "v4-mapped-loopback"])  # fmt: skip
def test_by_default_actions_cannot_reach_internal_addresses(uri: str, target: Target) -> None:
    target.answer("/guarded", 200)
    succeeded, message = perform(actions(OutboundPolicy()), request(uri.format(port=target.port)))
    assert not succeeded
    assert "which actions may not reach" in message
    assert target.received("/guarded") == []


@pytest.mark.parametrize("location", ["http://10.9.8.7/inside", "http://169.254.169.254/metadata",
                                      "http://localhost:{port}/after-redirect"])  # fmt: skip
def test_every_redirect_hop_is_checked(location: str, target: Target) -> None:
    target.answer("/redirect", 302, b"", {"Location": location.format(port=target.port)})
    target.answer("/after-redirect", 200)
    succeeded, message = perform(actions(OutboundPolicy.from_setting("127.0.0.1/32")),
                                 request(target.url("/redirect")))
    if "localhost" in location:
        # localhost is 127.0.0.1 here, which this allow-list opens: the hop is allowed.
        assert succeeded, message
    else:
        assert not succeeded
        assert "which actions may not reach" in message


CREDENTIALS = {"Authorization": "Bearer Tok-1", "X-Api-Key": "Api-Key-2", "Ocp-Apim-Subscription-Key": "Apim-Key-3",
               "Proxy-Authorization": "Basic Proxy-4"}  # fmt: skip


def test_a_redirect_to_another_origin_carries_no_credential_header(target: Target) -> None:
    """M1: httpx drops only `Authorization` when a redirect changes the origin."""
    target.answer("/moving", 302, b"", {"Location": target.url("/moved-here", host="localhost")})
    target.answer("/moved-here", 200)
    performer = actions(OutboundPolicy.from_setting("127.0.0.1/32,localhost"))
    headers = {**CREDENTIALS, "X-Trace": "t-1"}
    assert perform(performer, request(target.url("/moving"), headers=headers))[0]
    assert target.received("/moving")[-1].headers["x-api-key"] == "Api-Key-2"
    landed = target.received("/moved-here")[-1].headers
    assert landed["x-trace"] == "t-1"  # what is no credential goes along
    assert not {name.lower() for name in CREDENTIALS} & landed.keys()


def test_a_redirect_within_the_origin_keeps_the_credential_headers(target: Target) -> None:
    target.answer("/step", 307, b"", {"Location": "/stepped"})
    target.answer("/stepped", 200)
    assert perform(actions(), request(target.url("/step"), headers=dict(CREDENTIALS)))[0]
    landed = target.received("/stepped")[-1].headers
    assert {name: landed[name.lower()] for name in CREDENTIALS} == CREDENTIALS


def test_a_cookie_one_target_sets_goes_along_on_no_other_call(target: Target) -> None:
    """The pooled client is shared by every job: it must keep no cookie for the next one."""
    target.answer("/sets-a-cookie", 200, b"ok", {"Set-Cookie": "session=Their-Session; Path=/"})
    target.answer("/another-job", 200)
    performer = actions()
    assert perform(performer, request(target.url("/sets-a-cookie")))[0]
    assert perform(performer, request(target.url("/another-job")))[0]
    assert "cookie" not in target.received("/another-job")[-1].headers
    # A job's own Cookie header is its own to send.
    assert perform(performer, request(target.url("/another-job"), headers={"Cookie": "mine=1"}))[0]
    assert target.received("/another-job")[-1].headers["cookie"] == "mine=1"


def test_the_allow_list_opens_names_and_ranges(target: Target) -> None:
    target.answer("/allowed", 200)
    for setting, host in [("localhost", "localhost"), ("127.0.0.0/8", "127.0.0.1")]:
        performer = actions(OutboundPolicy.from_setting(setting))
        assert perform(performer, request(target.url("/allowed", host=host)))[0]


def test_requests_that_cannot_connect_fail_with_a_clear_message() -> None:
    succeeded, message = perform(actions(OutboundPolicy.from_setting("127.0.0.1/32")), request("http://127.0.0.1:9/"))
    assert not succeeded
    assert message.startswith("Http Action - Request to host '127.0.0.1' failed")

