"""Role assignments of this service: a principal given a role at a subscription or one of its
resource groups, managed by a contributor of the subscription.

    PUT .../subscriptions/{s}/providers/Microsoft.Scheduler/roleAssignments/{name}
        {"properties": {"principalId": "<object id>", "roleName": "Scheduler.Reader",
                        "scope": "/subscriptions/{s}/resourceGroups/{g}"}}

App roles in a caller's token hold over the whole service; an assignment holds only at its scope.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.api.arm import ApiRequest, ApiResponse
from shared.api.errors import ResourceNotFound
from shared.domain.access import Role
from shared.domain.ids import PROVIDER, valid_subscription
from shared.domain.problems import InvalidRequest
from shared.domain.wire import JsonObject
from shared.services import Services
from shared.storage.role_assignments import Assignment

_NAME = re.compile(r"[0-9A-Za-z-]{1,64}")
# An object id, as Entra ID gives every user, group and service principal: names are not taken,
# since they can be changed and shared, and an assignment to one would never match a caller.
_OBJECT_ID = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", re.IGNORECASE)
_RESOURCE_GROUP = re.compile(r"[-\w._()]{1,90}")


class AssignmentProperties(BaseModel):
    model_config = ConfigDict(extra="ignore")

    principal_id: str = Field(alias="principalId", max_length=128)
    role_name: Literal["Scheduler.Reader", "Scheduler.Operator", "Scheduler.Contributor"] = Field(
        alias="roleName"
    )
    scope: str = Field(pattern=r"^/subscriptions/[^/]{1,64}(/resourceGroups/[^/]{1,90})?$")

    @field_validator("principal_id")
    @classmethod
    def _an_object_id(cls, value: str) -> str:
        if not _OBJECT_ID.fullmatch(value.strip()):
            raise ValueError(
                "must be the principal's object id, a GUID such as "
                "0f8fad5b-d9cb-469f-a165-70867728950e (names are not matched: they can change)"
            )
        return value.strip()


class AssignmentBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    properties: AssignmentProperties


def put_role_assignment(request: ApiRequest, services: Services) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    name = _valid_name(request.route["roleAssignmentName"])
    body = request.parsed_body(AssignmentBody).properties
    role = Role.named(body.role_name)
    if role is None:
        raise InvalidRequest.because(
            "properties.roleName", f"must be one of {', '.join(each.value for each in Role)}"
        )
    scope = _valid_scope(body.scope, subscription)
    assignment = Assignment(name, body.principal_id, role.value, scope)
    existed = services.role_assignments.get(name) is not None
    services.role_assignments.save(assignment)
    return ApiResponse(200 if existed else 201, _wire(subscription, assignment))


def get_role_assignment(request: ApiRequest, services: Services) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    found = services.role_assignments.get(_valid_name(request.route["roleAssignmentName"]))
    if found is None or not _within(found.scope, subscription):
        raise ResourceNotFound(
            f"The role assignment '{request.route['roleAssignmentName'][:64]}' is not found."
        )
    return ApiResponse(200, _wire(subscription, found))


def delete_role_assignment(request: ApiRequest, services: Services) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    name = _valid_name(request.route["roleAssignmentName"])
    found = services.role_assignments.get(name)
    if found is None or not _within(found.scope, subscription):
        return ApiResponse(204)
    services.role_assignments.delete(name)
    return ApiResponse(200)


def list_role_assignments(request: ApiRequest, services: Services) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    assignments = sorted(
        (each for each in services.role_assignments.all() if _within(each.scope, subscription)),
        key=lambda each: each.name,
    )
    return ApiResponse(200, {"value": [_wire(subscription, each) for each in assignments]})


def _valid_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise InvalidRequest.because("name", "must be letters, digits and hyphens (a GUID)")
    return name.lower()


def _valid_scope(scope: str, subscription: str) -> str:
    """`/subscriptions/{s}` or `/subscriptions/{s}/resourceGroups/{g}`, of the path's one."""
    parts = scope.strip("/").split("/")
    if (
        len(parts) in (2, 4)
        and parts[0].lower() == "subscriptions"
        and parts[1].lower() == subscription.lower()
        and (len(parts) == 2 or (parts[2].lower() == "resourcegroups"
                                 and _RESOURCE_GROUP.fullmatch(parts[3]) is not None))
    ):  # fmt: skip
        path = f"/subscriptions/{parts[1]}"
        return path if len(parts) == 2 else f"{path}/resourceGroups/{parts[3]}"
    raise InvalidRequest.because(
        "properties.scope",
        f"must be /subscriptions/{subscription} or one of its resource groups, "
        f"/subscriptions/{subscription}/resourceGroups/<name>",
    )


def _within(scope: str, subscription: str) -> bool:
    return scope.lower().split("/")[2:3] == [subscription.lower()]


def _wire(subscription: str, assignment: Assignment) -> JsonObject:
    return {
        "id": f"/subscriptions/{subscription}/providers/{PROVIDER}/roleAssignments/"
        f"{assignment.name}",
        "name": assignment.name,
        "type": f"{PROVIDER}/roleAssignments",
        "properties": {
            "principalId": assignment.principal_id,
            "roleName": assignment.role,
            "scope": assignment.scope,
        },
    }
