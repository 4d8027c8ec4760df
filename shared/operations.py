"""The management API's operations (SPEC.md section 1), each from an ApiRequest to an ApiResponse.

`ROUTES` is what function_app.py registers: one Azure Function per operation.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from shared.arm import ApiRequest, ApiResponse, Operation
from shared.collections import CollectionBody, new_collection, patched_collection
from shared.errors import InvalidRequest, NotFound
from shared.resources import (
    COLLECTION_TYPE,
    PROVIDER,
    CollectionId,
    valid_resource_group,
    valid_subscription,
)
from shared.store import Store, Stored

SUBSCRIPTION = "subscriptions/{subscriptionId}"
RESOURCE_GROUP = f"{SUBSCRIPTION}/resourceGroups/{{resourceGroupName}}"
COLLECTIONS = f"{RESOURCE_GROUP}/providers/{PROVIDER}/jobCollections"
COLLECTION = f"{COLLECTIONS}/{{jobCollectionName}}"


@functools.cache
def store() -> Store:
    """The one Store of this process, its tables created on first use."""
    connected = Store.from_connection_string(os.environ["AzureWebJobsStorage"])
    connected.create_tables()
    return connected


# --- job collections ----------------------------------------------------------------------


def get_collection(request: ApiRequest) -> ApiResponse:
    return _collection_response(200, _existing_collection(_collection_id(request)))


def put_collection(request: ApiRequest) -> ApiResponse:
    collection = _collection_id(request)
    body = request.parsed_body(CollectionBody)
    if body.location is None:
        raise InvalidRequest.because("location", "is required")
    stored, created = store().save_collection(
        collection, new_collection(body), request.preconditions
    )
    return _collection_response(201 if created else 200, stored)


def patch_collection(request: ApiRequest) -> ApiResponse:
    collection = _collection_id(request)
    patch = request.parsed_body(CollectionBody)
    current = _existing_collection(collection)
    request.preconditions.check(current)
    stored, _ = store().save_collection(
        current.id, patched_collection(current.document, patch), request.preconditions
    )
    return _collection_response(200, stored)


def delete_collection(request: ApiRequest) -> ApiResponse:
    deleted = store().delete_collection(_collection_id(request), request.preconditions)
    return ApiResponse(200 if deleted else 204)


def list_collections_in_subscription(request: ApiRequest) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    return _collection_list(store().collections(subscription))


def list_collections_in_resource_group(request: ApiRequest) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    resource_group = valid_resource_group(request.route["resourceGroupName"])
    return _collection_list(store().collections(subscription, resource_group))


def _collection_id(request: ApiRequest) -> CollectionId:
    route = request.route
    return CollectionId.of(
        route["subscriptionId"], route["resourceGroupName"], route["jobCollectionName"]
    )


def _existing_collection(collection: CollectionId) -> Stored:
    stored = store().collection(collection)
    if stored is None:
        raise NotFound("job collection", collection.name)
    return stored


def collection_resource(stored: Stored) -> dict[str, object]:
    document = stored.document
    return {
        "id": stored.id.arm_id,
        "type": COLLECTION_TYPE,
        "name": stored.id.name,
        "location": document.get("location"),
        "tags": document.get("tags") or {},
        "properties": document["properties"],
    }


def _collection_response(status: int, stored: Stored) -> ApiResponse:
    return ApiResponse(status, collection_resource(stored), {"ETag": stored.etag})


def _collection_list(found: list[Stored]) -> ApiResponse:
    return ApiResponse(200, {"value": [collection_resource(stored) for stored in found]})


# --- the routes function_app.py registers ------------------------------------------------


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    template: str
    operation: Operation


ROUTES = [
    Route("list_job_collections_in_subscription", "GET",
          f"{SUBSCRIPTION}/providers/{PROVIDER}/jobCollections", list_collections_in_subscription),
    Route("list_job_collections", "GET", COLLECTIONS, list_collections_in_resource_group),
    Route("get_job_collection", "GET", COLLECTION, get_collection),
    Route("put_job_collection", "PUT", COLLECTION, put_collection),
    Route("patch_job_collection", "PATCH", COLLECTION, patch_collection),
    Route("delete_job_collection", "DELETE", COLLECTION, delete_collection),
]  # fmt: skip
