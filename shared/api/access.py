"""Who is calling, and whether they may: every route's action, the caller read from the request,
and the 401 and 403 answers ARM gives.

A request is the administrator's when it carries the function key (`x-functions-key` or
`?code=`, unless SCHEDULER_FUNCTION_KEY_ACCESS turns the key off). Otherwise its caller is the
principal the platform's authentication passes on in `X-MS-CLIENT-PRINCIPAL`, trusted only when
WEBSITE_AUTH_ENABLED says that authentication is on, since only then does the platform replace
whatever a client sent in that header. A principal's app roles (the token's `roles`) hold over
the whole service; role assignments of this service add roles at a subscription or resource group.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shared.api import activity
from shared.api.arm import ApiRequest
from shared.api.errors import (
    AuthenticationFailed,
    AuthorizationFailed,
    InvalidAuthenticationToken,
)
from shared.domain.access import (
    ADMINISTRATOR,
    Action,
    Caller,
    Grant,
    Role,
    operates,
    reads,
    writes,
)
from shared.domain.ids import PROVIDER
from shared.services import Services
from shared.settings import Settings

PRINCIPAL_HEADER = "x-ms-client-principal"
# Claim types Entra ID tokens carry, short and long (the platform passes either).
_OBJECT_ID_CLAIMS = ("oid", "http://schemas.microsoft.com/identity/claims/objectidentifier")
_CLIENT_ID_CLAIMS = ("appid", "azp")
_NAME_CLAIMS = ("name", "preferred_username", "upn")
MOST_PRINCIPAL_BYTES = 16 * 1024  # the platform's headers are far smaller


@dataclass(frozen=True)
class RouteGuard:
    """What a route's operation does (its action, which may depend on the request), and the
    scope it does it at: who may call it, and what the activity log keeps of it."""

    action: Action | Callable[[ApiRequest], Action]
    scope: Callable[[Mapping[str, str]], str]

    def action_for(self, request: ApiRequest) -> Action:
        return self.action(request) if callable(self.action) else self.action

    def admit(self, request: ApiRequest, services: Services) -> ApiRequest:
        caller = identify(request, services)
        authorize(caller, self.action_for(request), self.scope(request.route))
        return replace(request, caller=caller)

    def record(
        self,
        services: Services,
        request: ApiRequest,
        status: int,
        request_id: str,
        refusal: Exception | None,
    ) -> None:
        action = self.action_for(request)
        # Reads are not kept. Nor is a request refused for want of credentials (401): it names
        # nobody, and anyone on the internet could fill the log with them at no cost. Azure's
        # Activity Log, too, keeps only what a signed-in caller did or was refused; the 401s
        # stay in the host's request telemetry. A known caller's refusal (403) is kept.
        if status == 401 or not (action.changes or status == 403):
            return
        caller = request.caller or (refusal.caller if isinstance(refusal, AuthorizationFailed)
                                    else None)  # fmt: skip
        activity.record(services, request, caller=caller, action=action,
                        scope=self.scope(request.route), status=status,
                        request_id=request_id)  # fmt: skip


def identify(request: ApiRequest, services: Services) -> Caller:
    """The caller, with the roles assigned to them at scopes of this service."""
    caller = authenticate(request, services.settings)
    if caller.administrator:
        return caller
    assigned = services.role_assignments.of(caller.object_id)
    return caller.with_grants(
        Grant(role, assignment.scope)
        for assignment in assigned
        if (role := Role.named(assignment.role)) is not None
    )


def authenticate(request: ApiRequest, settings: Settings) -> Caller:
    """The caller of a request, or a 401 saying what is missing."""
    key = request.headers.get("x-functions-key") or request.query.get("code")
    if key is not None and settings.function_key and _same(key, settings.function_key):
        return ADMINISTRATOR
    principal = request.headers.get(PRINCIPAL_HEADER)
    if principal and settings.platform_authentication:
        caller = caller_of_principal(principal)
        if caller is not None:
            return caller
    if request.headers.get("authorization") or key is not None:
        raise InvalidAuthenticationToken(
            "The access token is invalid, expired or not for this service, or the key is wrong."
        )
    raise AuthenticationFailed(
        "Authentication failed. The 'Authorization' header is missing: send a bearer token "
        "or the function key."
    )


def _same(given: str, known: str) -> bool:
    # As bytes: compare_digest refuses str with characters beyond ASCII.
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), known.encode())


def caller_of_principal(header: str) -> Caller | None:
    """The caller the platform describes in `X-MS-CLIENT-PRINCIPAL` (base64 JSON of the token's
    claims), or None if the header is not one."""
    if len(header) > MOST_PRINCIPAL_BYTES:
        return None
    try:
        principal = json.loads(base64.b64decode(header, validate=True))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(principal, dict) or not isinstance(principal.get("claims"), list):
        return None
    role_type = str(principal.get("role_typ") or "roles")
    claims: dict[str, list[str]] = {}
    for claim in principal["claims"]:
        if isinstance(claim, dict) and isinstance(claim.get("typ"), str):
            claims.setdefault(claim["typ"], []).append(str(claim.get("val", "")))
    object_id = _first(claims, _OBJECT_ID_CLAIMS)
    if not object_id:
        return None
    roles = [Role.named(name) for name in claims.get(role_type, [])]
    return Caller(
        object_id=object_id,
        name=_first(claims, _NAME_CLAIMS) or _first(claims, _CLIENT_ID_CLAIMS) or object_id,
        client_id=_first(claims, _CLIENT_ID_CLAIMS),
        grants=tuple(Grant(role) for role in roles if role is not None),
    )


def _first(claims: Mapping[str, list[str]], types: tuple[str, ...]) -> str:
    return next((claims[each][0] for each in types if claims.get(each)), "")


def authorize(caller: Caller, action: Action, scope: str) -> None:
    """Nothing if the caller may, else the 403 ARM answers."""
    if not caller.may(action, scope):
        raise AuthorizationFailed(caller, action, scope)


# --- the scope of a request: the path of what it touches, from its route's parameters ---


def arm_scope(route: Mapping[str, str]) -> str:
    """`/subscriptions/{s}[/resourceGroups/{g}[/providers/Microsoft.Scheduler[/jobCollections/
    {c}[/jobs/{j}]]]]`, as far as the route names."""
    path = f"/subscriptions/{route.get('subscriptionId', '')}"
    if "resourceGroupName" in route:
        path += f"/resourceGroups/{route['resourceGroupName']}/providers/{PROVIDER}"
        if "jobCollectionName" in route:
            path += f"/jobCollections/{route['jobCollectionName']}"
            if "jobName" in route:
                path += f"/jobs/{route['jobName']}"
    return path


def classic_scope(route: Mapping[str, str]) -> str:
    """A classic route's subscription: cloud services have no resource group to scope by."""
    return f"/subscriptions/{route.get('subscriptionId', '')}"


def whole_service(route: Mapping[str, str]) -> str:
    return "/"


# --- every route's action ---


def _state_only(body: Any, *at: str) -> bool:
    """Whether a patch's body changes nothing but the state (at `at`, such as properties)."""
    for name in at:
        if not isinstance(body, dict) or set(body) != {name}:
            return False
        body = body[name]
    return isinstance(body, dict) and set(body) == {"state"}


def _patch_of_job(*at: str) -> Callable[[ApiRequest], Action]:
    """A job's patch: an operator's change of state when that is all it changes, else a write."""

    def action(request: ApiRequest) -> Action:
        try:
            body = json.loads(request.body or b"null")
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = None
        if _state_only(body, *at):
            return operates("jobCollections/jobs/write")
        return writes("jobCollections/jobs/write")

    return action


_COLLECTION_READ = reads("jobCollections/read")
_JOB_READ = reads("jobCollections/jobs/read")
_HISTORY_READ = reads("jobCollections/jobs/history/read")
_PREVIEW = Action(f"{PROVIDER}/jobCollections/previewOccurrences/action", Role.READER, False)
# Export writes secrets as parameters: a contributor's, though it changes nothing.
_EXPORT = Action(f"{PROVIDER}/exportTemplate/action", Role.CONTRIBUTOR, False)

ARM_ACTIONS: dict[str, Action | Callable[[ApiRequest], Action]] = {
    "list_job_collections_in_subscription": _COLLECTION_READ,
    "list_job_collections": _COLLECTION_READ,
    "get_job_collection": _COLLECTION_READ,
    "put_job_collection": writes("jobCollections/write"),
    "patch_job_collection": writes("jobCollections/write"),
    "delete_job_collection": writes("jobCollections/delete"),
    "enable_job_collection": operates("jobCollections/enable/action"),
    "disable_job_collection": operates("jobCollections/disable/action"),
    "preview_occurrences": _PREVIEW,
    "list_jobs": _JOB_READ,
    "get_job": _JOB_READ,
    "put_job": writes("jobCollections/jobs/write"),
    "patch_job": _patch_of_job("properties"),
    "delete_job": writes("jobCollections/jobs/delete"),
    "run_job": operates("jobCollections/jobs/run/action"),
    "list_job_history": _HISTORY_READ,
    "next_occurrences": _JOB_READ,
    "import_template": writes("importTemplate/action"),
    "export_resource_group_template": _EXPORT,
    "export_collection_template": _EXPORT,
    "list_activity_log": reads("activityLog/read"),
    "list_role_assignments": reads("roleAssignments/read"),
    "get_role_assignment": reads("roleAssignments/read"),
    "put_role_assignment": writes("roleAssignments/write"),
    "delete_role_assignment": writes("roleAssignments/delete"),
}

_CLOUD_SERVICE_READ = reads("cloudServices/read")
CLASSIC_ACTIONS: dict[str, Action | Callable[[ApiRequest], Action]] = {
    "classic_list_cloud_services": _CLOUD_SERVICE_READ,
    "classic_get_cloud_service": _CLOUD_SERVICE_READ,
    "classic_put_cloud_service": writes("cloudServices/write"),
    "classic_delete_cloud_service": writes("cloudServices/delete"),
    "classic_check_name": _COLLECTION_READ,
    "classic_check_name_get": _COLLECTION_READ,
    "classic_put_job_collection": writes("jobCollections/write"),
    "classic_delete_job_collection": writes("jobCollections/delete"),
    "classic_get_job_collection": _COLLECTION_READ,
    "classic_list_jobs": _JOB_READ,
    # Every job of the collection enabled or disabled at once: a change of state.
    "classic_switch_jobs": operates("jobCollections/jobs/write"),
    "classic_post_job": writes("jobCollections/jobs/write"),
    "classic_get_job": _JOB_READ,
    "classic_put_job": writes("jobCollections/jobs/write"),
    "classic_patch_job": _patch_of_job(),
    "classic_delete_job": writes("jobCollections/jobs/delete"),
    "classic_list_job_history": _HISTORY_READ,
    "classic_get_operation_status": reads("operations/read"),
}

CONSOLE_ACTIONS: dict[str, tuple[Action, Callable[[Mapping[str, str]], str]]] = {
    "console_collections": (_COLLECTION_READ, whole_service),
    "console_collection": (_COLLECTION_READ, arm_scope),
    "console_job": (_JOB_READ, arm_scope),
    "console_attention": (_COLLECTION_READ, whole_service),
    "console_me": (Action(f"{PROVIDER}/signedIn/read", Role.READER, False), whole_service),
    "console_holidays": (reads("holidayCalendars/read"), whole_service),
}


def arm_guard(route_name: str) -> RouteGuard:
    return RouteGuard(ARM_ACTIONS[route_name], arm_scope)


def classic_guard(route_name: str) -> RouteGuard:
    return RouteGuard(CLASSIC_ACTIONS[route_name], classic_scope)


def console_guard(route_name: str) -> RouteGuard:
    action, scope = CONSOLE_ACTIONS[route_name]
    return RouteGuard(action, scope)
