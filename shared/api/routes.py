"""Every operation of the management API with its method and route: what function_app.py registers.

Routes are ARM's paths below the host's root (host.json sets routePrefix to "").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.api import collection_operations, job_operations
from shared.api.arm import Operation
from shared.domain.ids import PROVIDER

SUBSCRIPTION = "subscriptions/{subscriptionId}"
COLLECTIONS = (
    f"{SUBSCRIPTION}/resourceGroups/{{resourceGroupName}}/providers/{PROVIDER}/jobCollections"
)
COLLECTION = f"{COLLECTIONS}/{{jobCollectionName}}"
JOB = f"{COLLECTION}/jobs/{{jobName}}"


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


_COLLECTION_BODY, _JOB_BODY = "CollectionBody", "JobBody"
_SAVED = {"200": _COLLECTION_BODY, "201": _COLLECTION_BODY}
_DELETED = {"200": None, "204": None}
_PAGED = ("$top", "$skip", "$filter")

ROUTES = [
    Route("list_job_collections_in_subscription", "GET",
          f"{SUBSCRIPTION}/providers/{PROVIDER}/jobCollections",
          collection_operations.list_collections_in_subscription,
          answers={"200": "CollectionList"}),
    Route("list_job_collections", "GET", COLLECTIONS,
          collection_operations.list_collections_in_resource_group,
          answers={"200": "CollectionList"}),
    Route("get_job_collection", "GET", COLLECTION, collection_operations.get_collection,
          answers={"200": _COLLECTION_BODY}),
    Route("put_job_collection", "PUT", COLLECTION, collection_operations.put_collection,
          body=_COLLECTION_BODY, answers={"201": _COLLECTION_BODY}),
    Route("patch_job_collection", "PATCH", COLLECTION, collection_operations.patch_collection,
          body=_COLLECTION_BODY, answers={"200": _COLLECTION_BODY}),
    Route("delete_job_collection", "DELETE", COLLECTION, collection_operations.delete_collection,
          answers=_DELETED),
    Route("enable_job_collection", "POST", f"{COLLECTION}/enable",
          job_operations.enable_collection),
    Route("disable_job_collection", "POST", f"{COLLECTION}/disable",
          job_operations.disable_collection),
    Route("preview_occurrences", "POST", f"{COLLECTION}/previewOccurrences",
          job_operations.preview_occurrences, body=_JOB_BODY, answers={"200": "Occurrences"},
          query=("count",)),
    Route("list_jobs", "GET", f"{COLLECTION}/jobs", job_operations.list_jobs,
          answers={"200": "JobList"}, query=_PAGED),
    Route("get_job", "GET", JOB, job_operations.get_job, answers={"200": _JOB_BODY}),
    Route("put_job", "PUT", JOB, job_operations.put_job, body=_JOB_BODY,
          answers={"200": _JOB_BODY, "201": _JOB_BODY}),
    Route("patch_job", "PATCH", JOB, job_operations.patch_job, body=_JOB_BODY,
          answers={"200": _JOB_BODY}),
    Route("delete_job", "DELETE", JOB, job_operations.delete_job, answers=_DELETED),
    Route("run_job", "POST", f"{JOB}/run", job_operations.run_job),
    Route("list_job_history", "GET", f"{JOB}/history", job_operations.list_history,
          answers={"200": "HistoryList"}, query=_PAGED),
    Route("next_occurrences", "GET", f"{JOB}/nextOccurrences", job_operations.next_occurrences,
          answers={"200": "Occurrences"}, query=("count",)),
]  # fmt: skip
