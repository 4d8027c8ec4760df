"""ManagedServiceIdentity (docs/behaviour.md#http-authentication): the token of the app's own
identity, from azure-identity's ManagedIdentityCredential, against a local token server that
stands where the platform's endpoint stands (IDENTITY_ENDPOINT and IDENTITY_HEADER)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

import tests.pipeline
from shared.actions.http import HttpActions
from shared.actions.managed_identity import IdentityTokens, storage_hosts
from shared.actions.oauth import TokenCache
from shared.actions.outbound import OutboundPolicy
from shared.domain.attempts import Attempt
from shared.domain.ids import CollectionId, JobId
from shared.logs import quiet_third_party_loggers
from shared.settings import Settings
from tests.actions import typed
from tests.pipeline import START, Pipeline
from tests.targets import IdentityEndpoint, Received, Target

JOB = JobId(CollectionId("sub", "group", "jc"), "job")
ATTEMPT = Attempt(datetime(2026, 11, 22, 18, 0, tzinfo=UTC))
LOCAL = OutboundPolicy.from_setting("127.0.0.1/32")
# The jobs' targets here are not the management endpoint, which alone takes management tokens.
API = "https://api.example.org/"
ARM_AUDIENCE = "https://management.azure.com/"
VAULT = "https://vault.azure.net"
SECRET = "platform-secret-4c1d"
USER_ASSIGNED = "0e6a6a6b-3c0f-4a5e-9f5d-2a7c3b1d9e8f"
OTHER_USER_ASSIGNED = "9b2f7a51-6d1c-4e3b-8a0f-55c2d4e6f701"


class Clock:
    """The service's clock, starting at the real now (tokens expire on the real clock)."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def server() -> Iterator[Target]:
    """The token server and the jobs' targets, on one real HTTP server of the test's own."""
    target = Target()
    yield target
    target.close()


@pytest.fixture
def endpoint(server: Target, monkeypatch: pytest.MonkeyPatch) -> IdentityEndpoint:
    """A fresh token server for the test, named in this process's environment as the platform
    names its own."""
    identity = IdentityEndpoint(SECRET, user_assigned=(USER_ASSIGNED, OTHER_USER_ASSIGNED))
    server.respond(identity.path, identity.respond)
    monkeypatch.setenv("IDENTITY_ENDPOINT", server.url(identity.path))
    monkeypatch.setenv("IDENTITY_HEADER", SECRET)
    monkeypatch.delenv("IDENTITY_SERVER_THUMBPRINT", raising=False)  # that would be Service Fabric
    return identity


@pytest.fixture
def clock() -> Clock:
    return Clock()


def performer(clock: Clock, default_client_id: str | None = None, **options: Any) -> HttpActions:
    oauth = TokenCache("https://login.invalid", httpx.Client(), clock)
    return HttpActions(LOCAL, None, oauth, IdentityTokens(clock, default_client_id), **options)


def with_identity(uri: str, audience: str = API, **fields: str) -> dict[str, Any]:
    authentication = {"type": "ManagedServiceIdentity", "audience": audience, **fields}
    return {
        "type": "Http",
        "request": {"uri": uri, "method": "POST", "authentication": authentication},
    }


def bearer_of(call: Received) -> str:
    return call.headers.get("authorization", "").removeprefix("Bearer ")


def token_requests(server: Target, endpoint: IdentityEndpoint) -> list[dict[str, str]]:
    return [{name: values[0] for name, values in parse_qs(call.query).items()}
            for call in server.received(endpoint.path)]  # fmt: skip


def test_the_token_request_names_the_audience_and_carries_the_platform_secret(
    server: Target, endpoint: IdentityEndpoint, clock: Clock
) -> None:
    server.answer("/stop-vm", 202, b"")
    succeeded, message = performer(clock).perform(
        typed(with_identity(server.url("/stop-vm"))), JOB, ATTEMPT
    )
    assert succeeded, message
    [asked] = server.received(endpoint.path)
    assert asked.method == "GET"
    assert asked.headers["x-identity-header"] == SECRET
    assert token_requests(server, endpoint) == [{"api-version": "2019-08-01", "resource": API}]
    [(token, resource, client_id)] = endpoint.issued
    assert (resource, client_id) == (API, None)  # no clientId: the app's default identity
    [call] = server.received("/stop-vm")
    assert call.headers["authorization"] == f"Bearer {token}"
    assert token not in message


def test_a_user_assigned_identity_is_asked_for_by_its_client_id(
    server: Target, endpoint: IdentityEndpoint, clock: Clock
) -> None:
    server.answer("/secrets", 200)
    action = with_identity(server.url("/secrets"), VAULT, clientId=OTHER_USER_ASSIGNED.upper())
    assert performer(clock).perform(typed(action), JOB, ATTEMPT)[0]
    assert token_requests(server, endpoint) == [
        {"api-version": "2019-08-01", "resource": VAULT, "client_id": OTHER_USER_ASSIGNED}
    ]
    [(token, _, _)] = endpoint.issued
    assert bearer_of(server.received("/secrets")[-1]) == token


def test_without_a_client_id_the_app_uses_the_identity_its_settings_name(
    server: Target, endpoint: IdentityEndpoint, clock: Clock
) -> None:
    """In Azure, the templates' user-assigned identity (AzureWebJobsStorage__clientId)."""
    endpoint.system_assigned = False  # as in the templates: the app has only its user-assigned one
    server.answer("/arm", 200)
    assert performer(clock, default_client_id=USER_ASSIGNED).perform(
        typed(with_identity(server.url("/arm"))), JOB, ATTEMPT
    )[0]
    assert [client_id for _, _, client_id in endpoint.issued] == [USER_ASSIGNED]
    settings = Settings.from_environment({"AzureWebJobsStorage__tableServiceUri": "https://a.table.core.windows.net",
                                          "AzureWebJobsStorage__queueServiceUri": "https://a.queue.core.windows.net",
                                          "AzureWebJobsStorage__clientId": USER_ASSIGNED})  # fmt: skip
    assert settings.identity_client_id == USER_ASSIGNED


def test_a_token_is_reused_until_five_minutes_before_it_expires_then_renewed(
    server: Target, endpoint: IdentityEndpoint, clock: Clock
) -> None:
    server.answer("/often", 200)
    actions = performer(clock)
    action = with_identity(server.url("/often"))
    started = clock.at
    for minutes in (0, 10, 54):  # the token lives an hour: cached up to 55 minutes
        clock.at = started + timedelta(minutes=minutes)
        assert actions.perform(typed(action), JOB, ATTEMPT)[0]
    assert len(endpoint.issued) == 1
    clock.at = started + timedelta(minutes=55, seconds=1)
    assert actions.perform(typed(action), JOB, ATTEMPT)[0]
    assert [token for token, _, _ in endpoint.issued] == ["identity-token-1", "identity-token-2"]
    bearers = [bearer_of(call) for call in server.received("/often")]
    assert bearers == ["identity-token-1"] * 3 + ["identity-token-2"]
    # Each audience and each identity has a token of its own.
    assert actions.perform(typed(with_identity(server.url("/often"), VAULT)), JOB, ATTEMPT)[0]
    assert actions.perform(
        typed(with_identity(server.url("/often"), clientId=USER_ASSIGNED)), JOB, ATTEMPT
    )[0]
    assert len(endpoint.issued) == 4


def test_a_token_that_lives_a_day_is_renewed_after_half_its_life(
    server: Target, endpoint: IdentityEndpoint, clock: Clock
) -> None:
    """Managed identity tokens live 24 hours; MSAL advises renewing at half-life, and it is
    followed, so that a revoked role stops working within 12 hours, not 24."""
    endpoint.lifetime_s = 24 * 3600
    server.answer("/daily", 200)
    actions, action, started = performer(clock), with_identity(server.url("/daily")), clock.at
    for hours in (0, 11.9):
        clock.at = started + timedelta(hours=hours)
        assert actions.perform(typed(action), JOB, ATTEMPT)[0]
    assert len(endpoint.issued) == 1
    clock.at = started + timedelta(hours=12, minutes=1)
    assert actions.perform(typed(action), JOB, ATTEMPT)[0]
    assert len(endpoint.issued) == 2


def test_an_identity_the_platform_does_not_know_fails_the_attempt_with_its_answer(
    server: Target, endpoint: IdentityEndpoint, clock: Clock
) -> None:
    server.answer("/never", 200)
    unknown = "11111111-2222-3333-4444-555555555555"
    succeeded, message = performer(clock).perform(
        typed(with_identity(server.url("/never"), clientId=unknown)), JOB, ATTEMPT
    )
    assert not succeeded
    assert message == (
        f"Http Action - No token for host '127.0.0.1': the app's managed identity (client id {unknown}) "
        f"gave no token for audience '{API}': the endpoint answered 400: No User Assigned or Delegated "
        "Managed Identity found for specified ClientId/ResourceId/PrincipalId."
    )
    assert server.received("/never") == []


def test_a_wrong_platform_secret_fails_the_attempt_without_quoting_the_secret(
    server: Target, endpoint: IdentityEndpoint, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IDENTITY_HEADER", "stale-secret")
    server.answer("/never", 200)
    succeeded, message = performer(clock).perform(typed(with_identity(server.url("/never"))), JOB, ATTEMPT)
    assert not succeeded
    assert message.endswith(
        f"gave no token for audience '{API}': "
        "the endpoint answered 401: The X-IDENTITY-HEADER header is missing or wrong."
    )
    assert "stale-secret" not in message
    assert endpoint.issued == []
    assert server.received("/never") == []


def test_an_endpoint_that_does_not_answer_fails_the_attempt_in_bounded_time(
    server: Target, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IDENTITY_ENDPOINT", "http://127.0.0.1:9/msi/token")  # discard: refused
    monkeypatch.setenv("IDENTITY_HEADER", SECRET)
    server.answer("/never", 200)
    started = time.monotonic()
    succeeded, message = performer(clock).perform(typed(with_identity(server.url("/never"))), JOB, ATTEMPT)
    assert not succeeded
    assert "the app's managed identity (its default identity) gave no token" in message
    assert time.monotonic() - started < 10
    assert server.received("/never") == []


def test_without_a_managed_identity_the_attempt_fails_at_once(server: Target, clock: Clock) -> None:
    server.answer("/never", 200)
    oauth = TokenCache("https://login.invalid", httpx.Client(), clock)
    succeeded, message = HttpActions(LOCAL, None, oauth).perform(
        typed(with_identity(server.url("/never"))), JOB, ATTEMPT
    )
    assert not succeeded
    assert message == (
        "Http Action - No token for host '127.0.0.1': the app has no managed identity here "
        "(the platform sets IDENTITY_ENDPOINT where it has one)"
    )


def test_the_identity_is_not_lent_for_calls_to_the_apps_own_storage(
    server: Target, endpoint: IdentityEndpoint, clock: Clock
) -> None:
    """Its identity may read the app's tables, where every job's secrets are: a job calling
    them with it would read those secrets into its history."""
    own = storage_hosts(
        ["https://schedstore.table.core.windows.net/", "https://schedstore.queue.core.windows.net/"]
    )
    assert {
        "schedstore.blob.core.windows.net",
        "schedstore-secondary.table.core.windows.net",
    } <= own
    assert "otherstore.blob.core.windows.net" not in own
    action = with_identity(
        "https://schedstore.table.core.windows.net/jobs()", "https://storage.azure.com/"
    )
    succeeded, message = performer(clock, own_storage_hosts=own).perform(typed(action), JOB, ATTEMPT)
    assert not succeeded
    assert message == (
        "Http Action - No token for host 'schedstore.table.core.windows.net': "
        "the app's identity is not lent for calls to the app's own storage account"
    )
    assert endpoint.issued == []


@pytest.mark.parametrize(
    "audience", ["https://storage.azure.com/", "https://otherstore.queue.core.windows.net", ARM_AUDIENCE],
    ids=["storage", "an-account", "management"],
)  # fmt: skip
def test_a_job_saved_before_the_audience_rules_gets_no_token_for_what_they_refuse(
    server: Target, endpoint: IdentityEndpoint, clock: Clock, audience: str
) -> None:
    """H3: the rules are checked at the save, and again at the call for jobs saved before."""
    server.answer("/collector", 200)
    action = with_identity(server.url("/collector"), audience)
    succeeded, message = performer(clock).perform(typed(action), JOB, ATTEMPT)
    assert not succeeded
    assert message.startswith("Http Action - No token for host '127.0.0.1': the audience is ")
    assert endpoint.issued == []
    assert server.received("/collector") == []


def test_a_redirect_to_another_host_does_not_carry_the_token(
    server: Target, endpoint: IdentityEndpoint, clock: Clock
) -> None:
    server.answer("/moved", 302, b"", {"Location": server.url("/elsewhere", host="localhost")})
    server.answer("/elsewhere", 200)
    policy = OutboundPolicy.from_setting("127.0.0.1/32,localhost")
    oauth = TokenCache("https://login.invalid", httpx.Client(), clock)
    actions = HttpActions(policy, None, oauth, IdentityTokens(clock))
    assert actions.perform(typed(with_identity(server.url("/moved"))), JOB, ATTEMPT)[0]
    assert bearer_of(server.received("/moved")[-1]) == endpoint.issued[0][0]
    assert "authorization" not in server.received("/elsewhere")[-1].headers


def test_no_token_reaches_the_logs(
    server: Target, endpoint: IdentityEndpoint, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    quiet_third_party_loggers()  # as every process of the app does before it builds a client
    caplog.set_level(logging.DEBUG)
    server.answer("/logged", 200)
    assert performer(clock).perform(typed(with_identity(server.url("/logged"))), JOB, ATTEMPT)[0]
    [(token, _, _)] = endpoint.issued
    assert token not in caplog.text
    assert SECRET not in caplog.text


# --- the whole path: due index, queue, executor, history, on Azurite ---


def test_the_main_action_and_the_error_action_call_with_the_identity(
    storage: str, server: Target, endpoint: IdentityEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pipeline's settings, with the platform's endpoint that the environment names.
    with_endpoint = functools.partial(Settings, identity_endpoint=server.url(endpoint.path))
    monkeypatch.setattr(tests.pipeline, "Settings", with_endpoint)
    pipeline = Pipeline(storage)
    server.answer("/deallocate", 409, b"conflict")
    server.answer("/page-on-call", 200, b"paged")
    main = with_identity(server.url("/deallocate")) | {"retryPolicy": {"retryType": "None"}}
    main["errorAction"] = with_identity(
        server.url("/page-on-call"), "api://on-call", clientId=USER_ASSIGNED
    )
    job = pipeline.put_job("stop-vm", {"startTime": START.isoformat(), "action": main,
                                       "recurrence": {"frequency": "Day", "interval": 1}})  # fmt: skip
    pipeline.advance(timedelta(minutes=1))
    issued = {(resource, client_id): token for token, resource, client_id in endpoint.issued}
    assert bearer_of(server.received("/deallocate")[-1]) == issued[(API, None)]
    assert (
        bearer_of(server.received("/page-on-call")[-1]) == issued[("api://on-call", USER_ASSIGNED)]
    )
    history = pipeline.history(job)
    assert [(entry["actionName"], entry["status"]) for entry in history] == [
        ("MainAction", "Failed"),
        ("ErrorAction", "Completed"),
    ]
    stored = str(pipeline.job(job).document.properties.to_wire()) + str(history)
    assert not any(token in stored for token in issued.values())
