"""Who may do what: each role against every route, callers the service must not believe, and
role assignments scoped to a subscription or resource group.

Every route of shared/api/routes.py (ARM and classic) and every read of the console is called
with a token of each role. A route the role may use answers anything but 401 and 403 (the
requests name resources that do not exist and carry no body, so nothing is changed: they get
400 or 404 once admitted); one it may not answers 403 AuthorizationFailed with ARM's message.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from devhost import azurite
from devhost.identity import mint, object_id_of, principal_headers
from shared.api.access import ARM_ACTIONS, CLASSIC_ACTIONS, CONSOLE_ACTIONS
from shared.api.routes import CLASSIC_ROUTES, ROUTES
from shared.console.routes import ROUTES as CONSOLE_ROUTES
from shared.domain.access import Role
from tests.conftest import API_VERSION, Service, identity_folder_of, launch_host
from tests.devhost.test_identity import now_is_when_the_test_runs, refused_tokens  # noqa: F401 (its fixture dates the tokens)

ROLES = [None, Role.READER, Role.OPERATOR, Role.CONTRIBUTOR]
SUBSCRIPTION = "access-subscription"
VALUES = {
    "subscriptionId": SUBSCRIPTION, "resourceGroupName": "access-rg",
    "jobCollectionName": "no-such-collection", "jobName": "no-such-job",
    "roleAssignmentName": "00000000-0000-0000-0000-000000000000", "cloudServiceName": "no-such-cs",
    "jobId": "no-such-job", "requestId": "0" * 32,
}  # fmt: skip
REFUSAL = re.compile(
    r"The client '(?P<name>[^']*)' with object id '(?P<oid>[^']*)' does not have authorization to "
    r"perform action '(?P<action>Microsoft\.Scheduler/[^']+)' over scope '(?P<scope>/[^']*)' or the "
    r"scope is invalid\. If access was recently granted, please refresh your credentials\."
)
NOW = datetime.now(UTC)


def token(service: Service, name: str, *roles: Role) -> str:
    return mint(identity_folder_of(service.log), name, [role.value for role in roles], now=datetime.now(UTC))


def bearer(service: Service, name: str, *roles: Role) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(service, name, *roles)}"}


def path_of(template: str) -> str:
    return "/" + re.sub(r"\{(\w+)\}", lambda found: VALUES[found.group(1)], template)


def least_role(action: object) -> Role:
    # A job's patch is a write unless it changes the state alone: an empty body is a write.
    return action.least if hasattr(action, "least") else Role.CONTRIBUTOR  # type: ignore[attr-defined]


CASES = (
    [("arm", route.name, route.method, path_of(route.template), least_role(ARM_ACTIONS[route.name])) for route in ROUTES]
    + [("classic", route.name, route.method, path_of(route.template), least_role(CLASSIC_ACTIONS[route.name]))
       for route in CLASSIC_ROUTES]
    + [("console", route.name, "GET", path_of(route.template), CONSOLE_ACTIONS[route.name][0].least)
       for route in CONSOLE_ROUTES]
)  # fmt: skip


def test_every_route_has_an_action() -> None:
    assert {route.name for route in ROUTES} == set(ARM_ACTIONS)
    assert {route.name for route in CLASSIC_ROUTES} == set(CLASSIC_ACTIONS)
    assert {route.name for route in CONSOLE_ROUTES} <= set(CONSOLE_ACTIONS)


def call(service: Service, kind: str, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    query = {"arm": {"api-version": API_VERSION}, "classic": {"api-version": "2014-04-01"}, "console": {}}[kind]
    extra = {"x-ms-version": "2014-10-01"} if kind == "classic" else {}
    return httpx.request(method, service.base_url + path, params=query, headers=headers | extra, timeout=30)


@pytest.mark.parametrize("role", ROLES, ids=lambda role: role.value if role else "no-role")
@pytest.mark.parametrize("case", CASES, ids=[case[1] for case in CASES])
def test_each_role_against_every_route(service: Service, role: Role | None, case: tuple[str, str, str, str, Role]) -> None:
    kind, _, method, path, least = case
    caller = f"user-{role.name.lower() if role else 'none'}"
    answer = call(service, kind, method, path, bearer(service, caller, *([role] if role else [])))
    allowed = role is not None and role.rank >= least.rank
    if allowed:
        assert answer.status_code not in (401, 403), answer.text
        return
    assert answer.status_code == 403, answer.text
    if kind == "classic":
        code = re.search(r"<Code>(.*?)</Code>", answer.text)
        message = re.search(r"<Message>(.*?)</Message>", answer.text, re.S)
        assert code is not None and message is not None
        found_code, found_message = code.group(1), message.group(1)
    else:
        error = answer.json()["error"]
        found_code, found_message = error["code"], error["message"]
    assert found_code == "AuthorizationFailed"
    refused = REFUSAL.fullmatch(found_message)
    assert refused is not None, found_message
    assert (refused["name"], refused["oid"]) == (caller, object_id_of(caller))
    assert refused["scope"].startswith("/") and (SUBSCRIPTION in refused["scope"] or refused["scope"] == "/")


@pytest.mark.parametrize("case", CASES, ids=[case[1] for case in CASES])
def test_every_route_refuses_a_caller_without_credentials(service: Service, case: tuple[str, str, str, str, Role]) -> None:
    kind, _, method, path, _ = case
    answer = call(service, kind, method, path, {})
    assert answer.status_code == 401, answer.text
    if kind != "classic":
        assert answer.json()["error"]["code"] == "AuthenticationFailed"


def test_the_function_key_is_the_administrators(service: Service) -> None:
    answer = call(service, "arm", "PUT", path_of(ROUTES[3].template), {"x-functions-key": service.key})
    assert answer.status_code == 400  # admitted: the body is what is missing
    wrong = call(service, "arm", "GET", path_of(ROUTES[0].template), {"x-functions-key": "wrong"})
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "InvalidAuthenticationToken")


def test_a_bad_token_is_a_401_in_arms_shape(service: Service) -> None:
    expired = mint(identity_folder_of(service.log), "alice", ["Scheduler.Contributor"],
                   now=datetime.now(UTC) - timedelta(hours=3))  # fmt: skip
    answer = httpx.get(f"{service.base_url}/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Scheduler/jobCollections",
                       params={"api-version": API_VERSION}, headers={"Authorization": f"Bearer {expired}"}, timeout=10)  # fmt: skip
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "InvalidAuthenticationToken")


BAD_TOKENS = ["expired", "not yet valid", "another audience", "another issuer", "signed with another key", "alg none",
              "alg none, signature left on", "HS256 keyed with the public key", "not a token"]  # fmt: skip


@pytest.mark.parametrize("kind", BAD_TOKENS)
def test_each_kind_of_bad_token_opens_nothing_through_the_host(service: Service, tmp_path: Path, kind: str) -> None:
    # Through the whole path (the local platform, then the app): a contributor's write, refused.
    bad = refused_tokens(identity_folder_of(service.log), tmp_path / "elsewhere")[kind]
    url = f"{service.base_url}/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/bad-token"
    body = {"location": "westeurope", "properties": {"sku": {"name": "Standard"}}}
    answer = httpx.put(url, params={"api-version": API_VERSION}, json=body, headers={"Authorization": f"Bearer {bad}"}, timeout=10)
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "InvalidAuthenticationToken"), answer.text
    assert httpx.get(url, params={"api-version": API_VERSION}, headers={"x-functions-key": service.key}, timeout=10).status_code == 404


def forged(*roles: str) -> dict[str, str]:
    return principal_headers({"oid": str(uuid.uuid4()), "name": "eve", "roles": list(roles)})


def test_principal_headers_a_client_forges_are_dropped_by_the_local_platform(service: Service) -> None:
    answer = httpx.get(f"{service.base_url}/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Scheduler/jobCollections",
                       params={"api-version": API_VERSION}, headers=forged("Scheduler.Contributor"), timeout=10)  # fmt: skip
    assert answer.status_code == 401


@pytest.fixture(scope="module")
def platform_off(storage: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A host told the platform's authentication is off: it passes every header on untouched,
    as a Function App without App Service Authentication does."""
    port, key = azurite.free_port(), secrets.token_urlsafe(24)
    log_path = tmp_path_factory.mktemp("platform-off") / "output.log"
    host = launch_host(storage, port, key, log_path, settings={"WEBSITE_AUTH_ENABLED": "false"})
    yield Service(f"http://127.0.0.1:{port}", key, storage, log_path)
    host.terminate()
    host.wait(timeout=10)


def test_forged_principal_headers_open_nothing_when_the_platforms_authentication_is_off(platform_off: Service) -> None:
    url = f"{platform_off.base_url}/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/forged"
    body = {"location": "westeurope", "properties": {"sku": {"name": "Standard"}}}
    answer = httpx.put(url, params={"api-version": API_VERSION}, json=body, headers=forged("Scheduler.Contributor"), timeout=10)
    assert answer.status_code == 401, answer.text
    # Nor does a token: nothing checks it when the platform's authentication is off.
    signed = httpx.put(url, params={"api-version": API_VERSION}, json=body, headers=bearer(platform_off, "alice", Role.CONTRIBUTOR), timeout=10)
    assert signed.status_code == 401
    # The key still opens it, and nothing was created before.
    assert httpx.get(url, params={"api-version": API_VERSION}, headers={"x-functions-key": platform_off.key}, timeout=10).status_code == 404


def test_an_operator_may_change_a_jobs_state_but_not_its_definition(service: Service, api: httpx.Client) -> None:
    collection = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/ops/providers/Microsoft.Scheduler/jobCollections/ops-{uuid.uuid4().hex[:6]}"
    assert api.put(collection, json={"location": "westeurope", "properties": {"sku": {"name": "Standard"}}}).status_code in (200, 201)
    job = {"properties": {"startTime": (NOW + timedelta(days=1)).isoformat(), "action": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}},
                          "recurrence": {"frequency": "Hour", "interval": 1}}}  # fmt: skip
    assert api.put(f"{collection}/jobs/j", json=job).status_code in (200, 201)
    operator = bearer(service, "olga", Role.OPERATOR)
    disabled = httpx.patch(f"{service.base_url}{collection}/jobs/j", params={"api-version": API_VERSION},
                           json={"properties": {"state": "Disabled"}}, headers=operator, timeout=10)  # fmt: skip
    assert (disabled.status_code, disabled.json()["properties"]["state"].lower()) == (200, "disabled")
    rewritten = httpx.patch(f"{service.base_url}{collection}/jobs/j", params={"api-version": API_VERSION},
                            json={"properties": {"state": "Enabled", "action": {"request": {"uri": "https://evil.example/"}}}},
                            headers=operator, timeout=10)  # fmt: skip
    assert rewritten.status_code == 403
    ran = httpx.post(f"{service.base_url}{collection}/jobs/j/run", params={"api-version": API_VERSION}, headers=operator, timeout=10)
    assert ran.status_code not in (401, 403)
    assert api.get(f"{collection}/jobs/j").json()["properties"]["action"]["request"]["uri"] == "https://example.org/"


# --- role assignments, scoped ---


def test_a_role_assignment_holds_at_its_scope_only(service: Service, api: httpx.Client) -> None:
    subscription = f"scoped-{uuid.uuid4().hex[:6]}"
    name, person = str(uuid.uuid4()), f"carol-{uuid.uuid4().hex[:6]}"
    assignments = f"/subscriptions/{subscription}/providers/Microsoft.Scheduler/roleAssignments"
    body = {"properties": {"principalId": object_id_of(person), "roleName": "Scheduler.Contributor",
                           "scope": f"/subscriptions/{subscription}/resourceGroups/team-a"}}  # fmt: skip
    # Only a contributor of the subscription may give roles in it.
    refused = httpx.put(f"{service.base_url}{assignments}/{name}", params={"api-version": API_VERSION}, json=body,
                        headers=bearer(service, person), timeout=10)  # fmt: skip
    assert refused.status_code == 403
    given = api.put(f"{assignments}/{name}", json=body)
    assert given.status_code == 201, given.text
    assert [each["name"] for each in api.get(assignments).json()["value"]] == [name]

    collection_body = {"location": "westeurope", "properties": {"sku": {"name": "Standard"}}}
    hers = f"/subscriptions/{subscription}/resourceGroups/team-a/providers/Microsoft.Scheduler/jobCollections/c"
    others = f"/subscriptions/{subscription}/resourceGroups/team-b/providers/Microsoft.Scheduler/jobCollections/c"
    as_carol = bearer(service, person)  # a token with no app role: only the assignment gives one
    made = httpx.put(service.base_url + hers, params={"api-version": API_VERSION}, json=collection_body, headers=as_carol, timeout=10)
    assert made.status_code == 201, made.text
    elsewhere = httpx.put(service.base_url + others, params={"api-version": API_VERSION}, json=collection_body, headers=as_carol, timeout=10)
    assert elsewhere.status_code == 403
    assert REFUSAL.fullmatch(elsewhere.json()["error"]["message"])["scope"] == others  # type: ignore[index]

    assert api.delete(f"{assignments}/{name}").status_code == 200
    again = httpx.get(service.base_url + hers, params={"api-version": API_VERSION}, headers=as_carol, timeout=10)
    assert again.status_code == 403


@pytest.mark.parametrize("scope", ["/subscriptions/another", "/subscriptions/SUB/resourceGroups/g/providers/x", "/", "rg"])
def test_an_assignment_outside_its_subscription_or_below_a_resource_group_is_refused(api: httpx.Client, scope: str) -> None:
    subscription = "scoped-refusals"
    body = {"properties": {"principalId": object_id_of("dan"), "roleName": "Scheduler.Reader",
                           "scope": scope.replace("SUB", subscription)}}  # fmt: skip
    answer = api.put(f"/subscriptions/{subscription}/providers/Microsoft.Scheduler/roleAssignments/{uuid.uuid4()}", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["target"] == "properties.scope"


@pytest.mark.parametrize("principal", ["dan", "dan@example.org", "", "0f8fad5b-d9cb-469f-a165"])
def test_an_assignment_names_its_principal_by_object_id_not_by_name(api: httpx.Client, principal: str) -> None:
    # A name would be stored and never match a caller (who is looked up by object id), and
    # Entra ID's names can be changed: refused, saying what is wanted.
    path = f"/subscriptions/by-name/providers/Microsoft.Scheduler/roleAssignments/{uuid.uuid4()}"
    body = {"properties": {"principalId": principal, "roleName": "Scheduler.Reader", "scope": "/subscriptions/by-name"}}
    answer = api.put(path, json=body)
    assert answer.status_code == 400, answer.text
    [detail] = answer.json()["error"]["details"]
    assert detail["target"] == "properties.principalId" and "object id, a GUID" in detail["message"]
    assert api.get(path).status_code == 404


def test_an_assignment_of_an_unknown_role_is_refused(api: httpx.Client) -> None:
    body = {"properties": {"principalId": object_id_of("dan"), "roleName": "Owner", "scope": "/subscriptions/s"}}
    answer = api.put(f"/subscriptions/s/providers/Microsoft.Scheduler/roleAssignments/{uuid.uuid4()}", json=body)
    assert answer.status_code == 400
    assert "Scheduler.Reader" in answer.text


def test_the_principal_header_is_base64_json(service: Service) -> None:
    # What a platform sends, decoded: the shape the app reads (auth_typ, claims, name_typ, role_typ).
    header = forged("Scheduler.Reader")["X-MS-CLIENT-PRINCIPAL"]
    principal = json.loads(base64.b64decode(header))
    assert set(principal) == {"auth_typ", "claims", "name_typ", "role_typ"}
