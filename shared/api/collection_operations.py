"""Job collection operations, each from an ApiRequest to an ApiResponse."""

from __future__ import annotations

from shared.api.arm import ApiRequest, ApiResponse
from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import (
    COLLECTION_TYPE,
    CollectionId,
    valid_resource_group,
    valid_subscription,
)
from shared.domain.problems import InvalidRequest
from shared.services import Services
from shared.storage.collection_codec import encode_collection
from shared.storage.interface import StoredCollection


def get_collection(request: ApiRequest, services: Services) -> ApiResponse:
    return _collection_response(
        200, services.storage.collections.existing_collection(collection_id(request))
    )


def put_collection(request: ApiRequest, services: Services) -> ApiResponse:
    collection = collection_id(request)
    body = request.parsed_body(CollectionBody)
    if body.location is None:
        raise InvalidRequest.because("location", "is required")
    previous = services.storage.collections.collection(collection)
    request.preconditions.check(previous)
    stored, _ = services.scheduling.save_collection_with_jobs(
        collection, CollectionDocument.created(body), services.now(),
        preconditions=request.preconditions, previous=previous,
    )  # fmt: skip
    # 201 whether it was created or replaced: so the real service answered both.
    return _collection_response(201, stored)


def patch_collection(request: ApiRequest, services: Services) -> ApiResponse:
    patch = request.parsed_body(CollectionBody)
    current = services.storage.collections.existing_collection(collection_id(request))
    request.preconditions.check(current)
    stored, _ = services.scheduling.save_collection_with_jobs(
        current.id, current.document.patched(patch), services.now(),
        preconditions=request.preconditions, previous=current,
    )  # fmt: skip
    return _collection_response(200, stored)


def delete_collection(request: ApiRequest, services: Services) -> ApiResponse:
    deleted = services.scheduling.delete_collection(collection_id(request), request.preconditions)
    return ApiResponse(200 if deleted else 204)


def list_collections_in_subscription(request: ApiRequest, services: Services) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    return _collection_list(services.storage.collections.collections(subscription))


def list_collections_in_resource_group(request: ApiRequest, services: Services) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    resource_group = valid_resource_group(request.route["resourceGroupName"])
    return _collection_list(services.storage.collections.collections(subscription, resource_group))


def collection_id(request: ApiRequest) -> CollectionId:
    route = request.route
    return CollectionId.of(
        route["subscriptionId"], route["resourceGroupName"], route["jobCollectionName"]
    )


def collection_resource(stored: StoredCollection) -> dict[str, object]:
    resource = {"id": stored.id.arm_id, "type": COLLECTION_TYPE, "name": stored.id.name}
    return {**resource, **encode_collection(stored.document)}


def _collection_response(status: int, stored: StoredCollection) -> ApiResponse:
    return ApiResponse(status, collection_resource(stored), {"ETag": stored.etag})


def _collection_list(found: list[StoredCollection]) -> ApiResponse:
    resources = [collection_resource(stored) for stored in found]
    return ApiResponse(200, {"value": resources, "nextLink": None})
