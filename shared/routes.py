"""Every operation of the management API with its method and route: what function_app.py registers.

Routes are ARM's paths below the host's root (host.json sets routePrefix to "").
"""

from __future__ import annotations

from dataclasses import dataclass

from shared import collection_api, job_api
from shared.arm import Operation
from shared.resources import PROVIDER

SUBSCRIPTION = "subscriptions/{subscriptionId}"
COLLECTIONS = (
    f"{SUBSCRIPTION}/resourceGroups/{{resourceGroupName}}/providers/{PROVIDER}/jobCollections"
)
COLLECTION = f"{COLLECTIONS}/{{jobCollectionName}}"
JOB = f"{COLLECTION}/jobs/{{jobName}}"


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    template: str
    operation: Operation


ROUTES = [
    Route("list_job_collections_in_subscription", "GET",
          f"{SUBSCRIPTION}/providers/{PROVIDER}/jobCollections",
          collection_api.list_collections_in_subscription),
    Route("list_job_collections", "GET", COLLECTIONS,
          collection_api.list_collections_in_resource_group),
    Route("get_job_collection", "GET", COLLECTION, collection_api.get_collection),
    Route("put_job_collection", "PUT", COLLECTION, collection_api.put_collection),
    Route("patch_job_collection", "PATCH", COLLECTION, collection_api.patch_collection),
    Route("delete_job_collection", "DELETE", COLLECTION, collection_api.delete_collection),
    Route("enable_job_collection", "POST", f"{COLLECTION}/enable", job_api.enable_collection),
    Route("disable_job_collection", "POST", f"{COLLECTION}/disable", job_api.disable_collection),
    Route("preview_occurrences", "POST", f"{COLLECTION}/previewOccurrences",
          job_api.preview_occurrences),
    Route("list_jobs", "GET", f"{COLLECTION}/jobs", job_api.list_jobs),
    Route("get_job", "GET", JOB, job_api.get_job),
    Route("put_job", "PUT", JOB, job_api.put_job),
    Route("patch_job", "PATCH", JOB, job_api.patch_job),
    Route("delete_job", "DELETE", JOB, job_api.delete_job),
    Route("run_job", "POST", f"{JOB}/run", job_api.run_job),
    Route("list_job_history", "GET", f"{JOB}/history", job_api.list_history),
    Route("next_occurrences", "GET", f"{JOB}/nextOccurrences", job_api.next_occurrences),
]  # fmt: skip
