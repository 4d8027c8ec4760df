"""Who may do what (pure): roles by rank, grants at scopes, and how a request's caller is read."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from shared.api.access import (
    AuthenticationFailed,
    InvalidAuthenticationToken,
    authenticate,
    caller_of_principal,
)
from shared.api.arm import ApiRequest
from shared.domain.access import (
    ADMINISTRATOR,
    Caller,
    Grant,
    Role,
    operates,
    reads,
    refusal_message,
    writes,
)
from shared.settings import Settings

GROUP = "/subscriptions/s/resourceGroups/team-a"
JOB = f"{GROUP}/providers/Microsoft.Scheduler/jobCollections/c/jobs/j"


def settings(*, platform_authentication: bool) -> Settings:
    local = Settings.from_environment({"AzureWebJobsStorage": "UseDevelopmentStorage=true"})
    return dataclasses.replace(local, platform_authentication=platform_authentication)


@pytest.mark.parametrize(("role", "may"), [
    (Role.READER, {"read"}), (Role.OPERATOR, {"read", "operate"}), (Role.CONTRIBUTOR, {"read", "operate", "write"}),
])  # fmt: skip
def test_each_role_may_what_the_ones_below_it_may_and_more(role: Role, may: set[str]) -> None:
    caller = Caller("oid", "alice", grants=(Grant(role),))
    actions = {"read": reads("jobCollections/jobs/read"), "operate": operates("jobCollections/jobs/run/action"),
               "write": writes("jobCollections/jobs/write")}  # fmt: skip
    assert {name for name, action in actions.items() if caller.may(action, JOB)} == may


def test_a_grant_holds_at_its_scope_and_below_only() -> None:
    caller = Caller("oid", "carol", grants=(Grant(Role.CONTRIBUTOR, GROUP),))
    write = writes("jobCollections/jobs/write")
    assert caller.may(write, JOB) and caller.may(write, GROUP)
    assert not caller.may(write, "/subscriptions/s/resourceGroups/team-b/providers/Microsoft.Scheduler/jobCollections/c")
    assert not caller.may(write, "/subscriptions/s/resourceGroups/team-ab")  # a prefix of letters is not a scope
    assert not caller.may(write, "/subscriptions/s")
    assert caller.strongest_role("/") is None and caller.strongest_role(JOB) is Role.CONTRIBUTOR


def test_the_administrator_may_everything_and_a_caller_without_grants_nothing() -> None:
    assert ADMINISTRATOR.may(writes("anything"), "/subscriptions/x")
    assert not Caller("oid", "nobody").may(reads("jobCollections/read"), "/subscriptions/x")


def test_the_refusal_reads_as_arms() -> None:
    message = refusal_message(Caller("oid-1", "alice"), writes("jobCollections/jobs/write"), JOB)
    assert message == (
        "The client 'alice' with object id 'oid-1' does not have authorization to perform action "
        f"'Microsoft.Scheduler/jobCollections/jobs/write' over scope '{JOB}' or the scope is invalid. "
        "If access was recently granted, please refresh your credentials."
    )


def principal(claims: list[dict[str, str]], **extra: str) -> str:
    return base64.b64encode(json.dumps({"auth_typ": "aad", "claims": claims, "name_typ": "name", "role_typ": "roles", **extra}).encode()).decode()


def request(**headers: str) -> ApiRequest:
    return ApiRequest("GET", "http://h/", {}, {}, {name.replace("_", "-"): value for name, value in headers.items()}, b"")


def test_the_platforms_principal_is_believed_only_when_its_authentication_is_on() -> None:
    header = principal([{"typ": "oid", "val": "oid-1"}, {"typ": "name", "val": "alice"}, {"typ": "roles", "val": "Scheduler.Operator"}])
    believed = authenticate(request(x_ms_client_principal=header), settings(platform_authentication=True))
    assert (believed.name, believed.grants) == ("alice", (Grant(Role.OPERATOR),))
    with pytest.raises(AuthenticationFailed):
        authenticate(request(x_ms_client_principal=header), settings(platform_authentication=False))


@pytest.mark.parametrize("header", ["not base64!", base64.b64encode(b"[1, 2]").decode(), principal([{"typ": "name", "val": "no oid"}]),
                                    base64.b64encode(b"{").decode(), "A" * 20_000])  # fmt: skip
def test_a_malformed_principal_is_no_caller(header: str) -> None:
    assert caller_of_principal(header) is None
    with pytest.raises(AuthenticationFailed):
        authenticate(request(x_ms_client_principal=header), settings(platform_authentication=True))


def test_unknown_roles_are_ignored_and_the_long_claim_names_are_read() -> None:
    header = principal([{"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": "oid-2"},
                        {"typ": "roles", "val": "Scheduler.Owner"}, {"typ": "roles", "val": "scheduler.reader"},
                        {"typ": "appid", "val": "app-9"}])  # fmt: skip
    caller = caller_of_principal(header)
    assert caller is not None
    assert (caller.object_id, caller.name, caller.grants) == ("oid-2", "app-9", (Grant(Role.READER),))


def test_the_key_is_the_administrators_unless_turned_off() -> None:
    on = Settings.from_environment({"AzureWebJobsStorage": "UseDevelopmentStorage=true", "SCHEDULER_FUNCTION_KEY": "k3y"})
    off = Settings.from_environment({"AzureWebJobsStorage": "UseDevelopmentStorage=true", "SCHEDULER_FUNCTION_KEY": "k3y",
                                     "SCHEDULER_FUNCTION_KEY_ACCESS": "off"})  # fmt: skip
    assert authenticate(request(x_functions_key="k3y"), on) is ADMINISTRATOR
    with pytest.raises(InvalidAuthenticationToken):
        authenticate(request(x_functions_key="k3y"), off)
    with pytest.raises(InvalidAuthenticationToken):
        authenticate(request(x_functions_key="wrong\u00e9"), on)
