"""Every operation of the management API with its method and route: what function_app.py registers.

Routes are ARM's paths, and the classic API's, below the host's root (host.json sets routePrefix
to ""), as they were below management.azure.com and management.core.windows.net.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shared.domain.ids import PROVIDER

if TYPE_CHECKING:
    from shared.api.arm import ApiRequest, ApiResponse, Operation
    from shared.services import Services

SUBSCRIPTION = "subscriptions/{subscriptionId}"
RESOURCE_GROUP_PROVIDER = (
    f"{SUBSCRIPTION}/resourceGroups/{{resourceGroupName}}/providers/{PROVIDER}"
)
COLLECTIONS = f"{RESOURCE_GROUP_PROVIDER}/jobCollections"
COLLECTION = f"{COLLECTIONS}/{{jobCollectionName}}"
JOB = f"{COLLECTION}/jobs/{{jobName}}"
SUBSCRIPTION_PROVIDER = f"{SUBSCRIPTION}/providers/{PROVIDER}"
ROLE_ASSIGNMENT = f"{SUBSCRIPTION_PROVIDER}/roleAssignments/{{roleAssignmentName}}"


@dataclass(frozen=True)
class Route:
    """An operation, where it is served, and what it reads and answers (for the OpenAPI
    document: the names of its request body's schema and of each success status's)."""

    name: str
    method: str
    template: str
    operation: Operation
    body: str | None = None
    answers: Mapping[str, str | None] = field(default_factory=lambda: {"200": None})
    query: tuple[str, ...] = ()  # the optional query parameters it reads


@dataclass(frozen=True)
class OnFirstRequest:
    """The operation `name` of the module `module`, imported on its first request.

    A cold start imports only what every invocation needs (issue 49): an instance that only
    delivers never loads the operations and the models behind them, and one that serves loads
    those of the routes it is asked for. The template operations are the largest (with the
    expression grammar, lark and the planner behind them, a fifth of a cold start's imports).
    """

    module: str
    name: str

    def resolved(self) -> Operation:
        operation: Operation = getattr(importlib.import_module(self.module), self.name)
        return operation

    def __call__(self, request: ApiRequest, services: Services) -> ApiResponse:
        return self.resolved()(request, services)


_collections = functools.partial(OnFirstRequest, "shared.api.collection_operations")
_jobs = functools.partial(OnFirstRequest, "shared.api.job_operations")
_templates = functools.partial(OnFirstRequest, "shared.api.template_operations")
_activity = functools.partial(OnFirstRequest, "shared.api.activity")
_assignments = functools.partial(OnFirstRequest, "shared.api.role_assignment_operations")
_classic = functools.partial(OnFirstRequest, "shared.api.classic.operations")


_COLLECTION_BODY, _JOB_BODY = "CollectionBody", "JobBody"
_SAVED = {"200": _COLLECTION_BODY, "201": _COLLECTION_BODY}
_DELETED = {"200": None, "204": None}
_PAGED = ("$top", "$skip", "$skiptoken", "$filter")

ROUTES = [
    Route("list_job_collections_in_subscription", "GET",
          f"{SUBSCRIPTION}/providers/{PROVIDER}/jobCollections",
          _collections("list_collections_in_subscription"),
          answers={"200": "CollectionList"}),
    Route("list_job_collections", "GET", COLLECTIONS,
          _collections("list_collections_in_resource_group"),
          answers={"200": "CollectionList"}),
    Route("get_job_collection", "GET", COLLECTION, _collections("get_collection"),
          answers={"200": _COLLECTION_BODY}),
    Route("put_job_collection", "PUT", COLLECTION, _collections("put_collection"),
          body=_COLLECTION_BODY, answers={"201": _COLLECTION_BODY}),
    Route("patch_job_collection", "PATCH", COLLECTION, _collections("patch_collection"),
          body=_COLLECTION_BODY, answers={"200": _COLLECTION_BODY}),
    Route("delete_job_collection", "DELETE", COLLECTION, _collections("delete_collection"),
          answers=_DELETED),
    Route("enable_job_collection", "POST", f"{COLLECTION}/enable",
          _jobs("enable_collection")),
    Route("disable_job_collection", "POST", f"{COLLECTION}/disable",
          _jobs("disable_collection")),
    Route("preview_occurrences", "POST", f"{COLLECTION}/previewOccurrences",
          _jobs("preview_occurrences"), body=_JOB_BODY, answers={"200": "Occurrences"},
          query=("count",)),
    Route("list_jobs", "GET", f"{COLLECTION}/jobs", _jobs("list_jobs"),
          answers={"200": "JobList"}, query=_PAGED),
    Route("get_job", "GET", JOB, _jobs("get_job"), answers={"200": _JOB_BODY}),
    Route("put_job", "PUT", JOB, _jobs("put_job"), body=_JOB_BODY,
          answers={"200": _JOB_BODY, "201": _JOB_BODY}),
    Route("patch_job", "PATCH", JOB, _jobs("patch_job"), body=_JOB_BODY,
          answers={"200": _JOB_BODY}),
    Route("delete_job", "DELETE", JOB, _jobs("delete_job"), answers=_DELETED),
    Route("run_job", "POST", f"{JOB}/run", _jobs("run_job")),
    Route("list_job_history", "GET", f"{JOB}/history", _jobs("list_history"),
          answers={"200": "HistoryList"}, query=_PAGED),
    Route("next_occurrences", "GET", f"{JOB}/nextOccurrences", _jobs("next_occurrences"),
          answers={"200": "Occurrences"}, query=("count",)),
    # Extensions: templates in and out (docs/templates.md).
    Route("import_template", "POST", f"{RESOURCE_GROUP_PROVIDER}/importTemplate",
          _templates("import_template"), body="ImportRequest",
          answers={"200": "ImportReport"}),
    Route("export_resource_group_template", "POST", f"{RESOURCE_GROUP_PROVIDER}/exportTemplate",
          _templates("export_resource_group"), answers={"200": "ExportedTemplate"}),
    Route("export_collection_template", "POST", f"{COLLECTION}/exportTemplate",
          _templates("export_collection"), answers={"200": "ExportedTemplate"}),
    # Extensions: who did what (the activity log) and who may (docs/security.md).
    Route("list_activity_log", "GET", f"{SUBSCRIPTION_PROVIDER}/activityLog",
          _activity("list_activity_log"), query=("$top", "$skiptoken", "$filter")),
    Route("list_role_assignments", "GET", f"{SUBSCRIPTION_PROVIDER}/roleAssignments",
          _assignments("list_role_assignments")),
    Route("get_role_assignment", "GET", ROLE_ASSIGNMENT,
          _assignments("get_role_assignment")),
    Route("put_role_assignment", "PUT", ROLE_ASSIGNMENT,
          _assignments("put_role_assignment"), body="AssignmentBody",
          answers={"200": None, "201": None}),
    Route("delete_role_assignment", "DELETE", ROLE_ASSIGNMENT,
          _assignments("delete_role_assignment"), answers=_DELETED),
]  # fmt: skip


@dataclass(frozen=True)
class ClassicRoute:
    """An operation of the classic API. None demands `?api-version=`: the version header is
    enough, as some clients sent it alone (the Java client's read of a collection and switch of
    its jobs, Azure PowerShell's job PUT in Microsoft's outbound-authentication page); given,
    it must be 2014-04-01."""

    name: str
    method: str
    template: str
    operation: Operation


CLOUD_SERVICES = "{subscriptionId}/cloudservices"
CLOUD_SERVICE = f"{CLOUD_SERVICES}/{{cloudServiceName}}"
# The collection's own resource route (PUT, DELETE, the name check) and the scheduler's routes
# below `~` (reading it, its jobs), as the classic API split them.
CLASSIC_COLLECTIONS = f"{CLOUD_SERVICE}/resources/scheduler/jobCollections"
CLASSIC_COLLECTION = f"{CLASSIC_COLLECTIONS}/{{jobCollectionName}}"
SCHEDULER_COLLECTION = f"{CLOUD_SERVICE}/resources/scheduler/~/jobCollections/{{jobCollectionName}}"
CLASSIC_JOBS = f"{SCHEDULER_COLLECTION}/jobs"
CLASSIC_JOB = f"{CLASSIC_JOBS}/{{jobId}}"

CLASSIC_ROUTES = [
    ClassicRoute("classic_list_cloud_services", "GET", CLOUD_SERVICES,
                 _classic("list_cloud_services")),
    ClassicRoute("classic_get_cloud_service", "GET", CLOUD_SERVICE, _classic("get_cloud_service")),
    ClassicRoute("classic_put_cloud_service", "PUT", CLOUD_SERVICE, _classic("put_cloud_service")),
    ClassicRoute("classic_delete_cloud_service", "DELETE", CLOUD_SERVICE,
                 _classic("delete_cloud_service")),
    # The Python client POSTs the name check, the .NET one GETs it.
    ClassicRoute("classic_check_name", "POST", CLASSIC_COLLECTIONS,
                 _classic("check_name_availability")),
    ClassicRoute("classic_check_name_get", "GET", CLASSIC_COLLECTIONS,
                 _classic("check_name_availability")),
    ClassicRoute("classic_put_job_collection", "PUT", CLASSIC_COLLECTION,
                 _classic("put_job_collection")),
    ClassicRoute("classic_delete_job_collection", "DELETE", CLASSIC_COLLECTION,
                 _classic("delete_job_collection")),
    ClassicRoute("classic_get_job_collection", "GET", SCHEDULER_COLLECTION,
                 _classic("get_job_collection")),
    ClassicRoute("classic_list_jobs", "GET", CLASSIC_JOBS, _classic("list_jobs")),
    ClassicRoute("classic_switch_jobs", "PATCH", CLASSIC_JOBS, _classic("switch_jobs")),
    ClassicRoute("classic_post_job", "POST", CLASSIC_JOBS, _classic("post_job")),
    ClassicRoute("classic_get_job", "GET", CLASSIC_JOB, _classic("get_job")),
    ClassicRoute("classic_put_job", "PUT", CLASSIC_JOB, _classic("put_job")),
    ClassicRoute("classic_patch_job", "PATCH", CLASSIC_JOB, _classic("patch_job")),
    ClassicRoute("classic_delete_job", "DELETE", CLASSIC_JOB, _classic("delete_job")),
    ClassicRoute("classic_list_job_history", "GET", f"{CLASSIC_JOB}/history",
                 _classic("list_history")),
    ClassicRoute("classic_get_operation_status", "GET", "{subscriptionId}/operations/{requestId}",
                 _classic("get_operation_status")),
]  # fmt: skip
