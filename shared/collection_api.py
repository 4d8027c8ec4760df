"""Job collection operations (SPEC.md section 1), each from an ApiRequest to an ApiResponse."""

from __future__ import annotations

from typing import Any

from shared.arm import ApiRequest, ApiResponse
from shared.collection_jobs import set_job_states
from shared.collections import (
    CollectionBody,
    CollectionState,
    new_collection,
    patched_collection,
)
from shared.errors import InvalidRequest, NotFound
from shared.resources import (
    COLLECTION_TYPE,
    CollectionId,
    valid_resource_group,
    valid_subscription,
)
from shared.runtime import dispatcher, now, store
from shared.store import Stored


def get_collection(request: ApiRequest) -> ApiResponse:
    return _collection_response(200, existing_collection(collection_id(request)))


def put_collection(request: ApiRequest) -> ApiResponse:
    collection = collection_id(request)
    body = request.parsed_body(CollectionBody)
    if body.location is None:
        raise InvalidRequest.because("location", "is required")
    previous = store().collection(collection)
    request.preconditions.check(previous)
    stored, created = _save(collection, new_collection(body), request, previous)
    return _collection_response(201 if created else 200, stored)


def patch_collection(request: ApiRequest) -> ApiResponse:
    collection = collection_id(request)
    patch = request.parsed_body(CollectionBody)
    current = existing_collection(collection)
    request.preconditions.check(current)
    stored, _ = _save(current.id, patched_collection(current.document, patch), request, current)
    return _collection_response(200, stored)


def delete_collection(request: ApiRequest) -> ApiResponse:
    deleted = store().delete_collection(collection_id(request), request.preconditions)
    return ApiResponse(200 if deleted else 204)


def list_collections_in_subscription(request: ApiRequest) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    return _collection_list(store().collections(subscription))


def list_collections_in_resource_group(request: ApiRequest) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    resource_group = valid_resource_group(request.route["resourceGroupName"])
    return _collection_list(store().collections(subscription, resource_group))


def collection_id(request: ApiRequest) -> CollectionId:
    route = request.route
    return CollectionId.of(
        route["subscriptionId"], route["resourceGroupName"], route["jobCollectionName"]
    )


def existing_collection(collection: CollectionId) -> Stored[CollectionId]:
    stored = store().collection(collection)
    if stored is None:
        raise NotFound("job collection", collection.name)
    return stored


def collection_resource(stored: Stored[CollectionId]) -> dict[str, object]:
    document = stored.document
    return {
        "id": stored.id.arm_id,
        "type": COLLECTION_TYPE,
        "name": stored.id.name,
        "location": document.get("location"),
        "tags": document.get("tags") or {},
        "properties": document["properties"],
    }


def _save(
    collection: CollectionId,
    document: dict[str, Any],
    request: ApiRequest,
    previous: Stored[CollectionId] | None,
) -> tuple[Stored[CollectionId], bool]:
    """Save a collection; its jobs' executor sees its state change, and jobs resume with it."""
    state = document["properties"]["state"]
    enabled = CollectionState.ENABLED.value
    if state != enabled:  # off before the document says so: nothing runs in between
        store().set_collection_state(collection, state)
    stored, created = store().save_collection(collection, document, request.preconditions)
    if state == enabled:
        store().set_collection_state(collection, state)
        if previous is not None and previous.document["properties"]["state"] != enabled:
            set_job_states(stored.id, None, now(), store=store(), dispatcher=dispatcher())
    return stored, created


def _collection_response(status: int, stored: Stored[CollectionId]) -> ApiResponse:
    return ApiResponse(status, collection_resource(stored), {"ETag": stored.etag})


def _collection_list(found: list[Stored[CollectionId]]) -> ApiResponse:
    return ApiResponse(200, {"value": [collection_resource(stored) for stored in found]})
