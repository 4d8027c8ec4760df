"""The classic API's operations: cloud services, job collections, jobs and their history, and
the status of operations (docs/classic-api.md).

One store, two views: a cloud service is the resource group of that name. A job collection made
through either API is the same collection through the other; a resource group that holds
collections is a cloud service even without a record of its own (the real service listed such
groups as "Resource group based cloud service.").
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import Iterable
from xml.etree.ElementTree import Element

from pydantic import ValidationError

from shared.api.arm import ApiRequest, ApiResponse
from shared.api.classic import bodies
from shared.api.classic.jobs import (
    StateChange,
    classic_history_entry,
    classic_job,
    job_fields,
    job_properties,
    state_change,
)
from shared.api.errors import CloudServiceExists, OperationNotFound
from shared.api.patch_secrets import secrets_staying
from shared.api.query import equality_filter, page_bounds
from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CloudServiceId, CollectionId, JobId, valid_subscription
from shared.domain.job_definition import HistoryStatus, JobProperties, JobState
from shared.domain.problems import FieldError, InvalidRequest, field_errors
from shared.domain.wire import JsonObject, merge_patch
from shared.services import Services
from shared.storage.errors import NotFound
from shared.storage.interface import (
    PageBounds,
    Preconditions,
    Storage,
    StoredCloudService,
    StoredCollection,
    StoredJob,
)

_REQUEST_ID = re.compile(r"[0-9a-f]{32}")


# --- cloud services -------------------------------------------------------------------------


def list_cloud_services(request: ApiRequest, services: Services) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    records = {
        stored.id.name.casefold(): stored
        for stored in services.storage.classic.cloud_services(subscription)
    }
    groups: dict[str, list[StoredCollection]] = defaultdict(list)
    for collection in services.storage.collections.collections(subscription):
        groups[collection.id.resource_group.casefold()].append(collection)
    listed = []
    for key in sorted(records.keys() | groups.keys()):
        listed.append(_cloud_service(records.get(key), groups.get(key, [])))
    return ApiResponse(200, bodies.document("CloudServices", *listed))


def get_cloud_service(request: ApiRequest, services: Services) -> ApiResponse:
    cloud_service = _cloud_service_id(request)
    record, collections = _existing_parts(services.storage, cloud_service)
    shown = _cloud_service(record, collections)
    headers = {"ETag": record.etag} if record else {}
    return ApiResponse(200, bodies.document("CloudService", *shown), headers)


def put_cloud_service(request: ApiRequest, services: Services) -> ApiResponse:
    cloud_service = _cloud_service_id(request)
    document = bodies.cloud_service_document(cloud_service.name, request.body)
    record, collections = _parts(services.storage, cloud_service)
    if record is not None or collections:
        raise CloudServiceExists(cloud_service)
    stored = services.scheduling.create_cloud_service(cloud_service, document)
    return ApiResponse(202, headers={"ETag": stored.etag})


def delete_cloud_service(request: ApiRequest, services: Services) -> ApiResponse:
    """Delete a cloud service with every job collection in it (the legacy client's tests
    cleaned up by deleting only the cloud service)."""
    cloud_service = _cloud_service_id(request)
    _, collections = _existing_parts(services.storage, cloud_service)
    services.scheduling.delete_cloud_service(cloud_service, collections)
    return ApiResponse(202)


# --- job collections ------------------------------------------------------------------------


def check_name_availability(request: ApiRequest, services: Services) -> ApiResponse:
    cloud_service = _cloud_service_id(request)
    _, collections = _existing_parts(services.storage, cloud_service)
    operation, name = request.query.get("op", ""), request.query.get("resourcename")
    if operation.casefold() != "checknameavailability":
        raise InvalidRequest.because("op", "must be checknameavailability")
    if not name:
        raise InvalidRequest.because("resourceName", "is required")
    reason = ""
    try:
        collection = cloud_service.collection(name)
    except InvalidRequest as invalid:
        reason = invalid.errors[0].problem
    else:
        if _named(collections, collection) is not None:
            reason = f"a job collection named '{name}' exists in this cloud service"
    answer = bodies.availability(not reason, reason, dotnet=request.method == "GET")
    return ApiResponse(200, answer)


def get_job_collection(request: ApiRequest, services: Services) -> ApiResponse:
    stored = services.storage.collections.existing_collection(_collection_id(request))
    return ApiResponse(200, bodies.resource(stored.id.name, stored.document, stored.etag))


def put_job_collection(request: ApiRequest, services: Services) -> ApiResponse:
    """Create a collection in its cloud service's region, or change the plan and quota of one."""
    collection = _collection_id(request)
    record, collections = _existing_parts(services.storage, collection.cloud_service)
    properties = bodies.collection_body(request.body)
    previous = _named(collections, collection)
    if previous is None:
        region = record.document["geoRegion"] if record else collections[0].document.location
        body = _collection_body({"location": region, "properties": properties})
    else:
        body = _collection_body({"properties": properties})
    try:  # a quota beyond the plan's limits
        if previous is None:
            document = CollectionDocument.created(body)
        else:
            document = previous.document.patched(body)
    except InvalidRequest as invalid:
        raise _in_xml_terms(invalid.errors) from None
    stored, _ = services.scheduling.save_collection_with_jobs(
        collection, document, services.now(), preconditions=Preconditions(), previous=previous
    )
    return ApiResponse(202, headers={"ETag": stored.etag})


def delete_job_collection(request: ApiRequest, services: Services) -> ApiResponse:
    collection = _collection_id(request)
    if not services.scheduling.delete_collection(collection, Preconditions()):
        raise NotFound(collection)
    return ApiResponse(202)


# --- jobs -----------------------------------------------------------------------------------


def list_jobs(request: ApiRequest, services: Services) -> ApiResponse:
    collection = services.storage.collections.existing_collection(_collection_id(request))
    state = equality_filter(request.query.get("$filter"), "state", JobState)
    skip, top = page_bounds(request.query)
    found = services.storage.jobs.jobs(collection.id, state)[skip : skip + top]
    return ApiResponse(200, [_job(stored) for stored in found])


def get_job(request: ApiRequest, services: Services) -> ApiResponse:
    stored = services.storage.jobs.existing_job(_job_id(request))
    return ApiResponse(200, _job(stored))


def put_job(request: ApiRequest, services: Services) -> ApiResponse:
    return _save_job(request, services, _job_id(request))


def post_job(request: ApiRequest, services: Services) -> ApiResponse:
    """Create a job under a name the service makes up."""
    collection = _collection_id(request)
    return _save_job(request, services, JobId(collection, uuid.uuid4().hex))


def patch_job(request: ApiRequest, services: Services) -> ApiResponse:
    """Change a job (JSON merge patch); the Java client's change of state sends only `state`
    and the reason for it (`stateDetails`)."""
    job = _job_id(request)
    slot = services.storage.jobs.job_slot(job)
    if slot.current is None:
        raise NotFound(job)
    patch, reason = job_fields(request.json_body())
    definition = slot.current.document.properties.to_wire()  # a merge patch applies to JSON
    # A secret goes only where it came from (see job_operations.patch_job).
    staying = secrets_staying(definition, merge_patch(definition, patch))
    merged = job_properties(merge_patch(staying, patch))
    request.note_ignored(JobProperties, patch)
    stored, _ = services.scheduling.save_definition(
        slot.current.id, merged, services.now(), slot=slot, state_reason=reason
    )
    return ApiResponse(200, _job(stored))


def switch_jobs(request: ApiRequest, services: Services) -> ApiResponse:
    """Enable or disable every job of a collection (the Java client's PATCH of `.../jobs`); the
    jobs as they now are. Completed and faulted jobs stay as they are."""
    collection = _collection_id(request)
    sent = request.json_body()
    change = state_change(sent)
    request.note_ignored(StateChange, sent)
    jobs = services.scheduling.switch_jobs(
        collection, change.state, services.now(), reason=change.state_details
    )
    return ApiResponse(200, [_job(stored) for stored in jobs])


def delete_job(request: ApiRequest, services: Services) -> ApiResponse:
    job = _job_id(request)
    if not services.scheduling.delete_job(job, Preconditions()):
        raise NotFound(job)
    return ApiResponse(200)  # recorded: 200, where the collection's and cloud service's are 202


def list_history(request: ApiRequest, services: Services) -> ApiResponse:
    """A job's executions, newest first."""
    job = services.storage.jobs.existing_job(_job_id(request)).id
    status = equality_filter(request.query.get("$filter"), "status", HistoryStatus)
    skip, top = page_bounds(request.query)
    entries, _ = services.storage.history.page(job, PageBounds(top, skip=skip), status)
    return ApiResponse(200, [classic_history_entry(job.name, *entry) for entry in entries])


# --- operations -----------------------------------------------------------------------------


def get_operation_status(request: ApiRequest, services: Services) -> ApiResponse:
    subscription = valid_subscription(request.route["subscriptionId"])
    given = request.route["requestId"]
    request_id = given.replace("-", "").lower()
    if not (
        _REQUEST_ID.fullmatch(request_id)
        and services.storage.classic.operation_recorded(subscription, request_id)
    ):
        raise OperationNotFound(given)
    return ApiResponse(200, bodies.operation(request_id))


# --- the steps ------------------------------------------------------------------------------


def _save_job(request: ApiRequest, services: Services, job: JobId) -> ApiResponse:
    fields, reason = job_fields(request.json_body())
    properties = job_properties(fields)
    request.note_ignored(JobProperties, fields)
    stored, created = services.scheduling.save_definition(
        job, properties, services.now(), state_reason=reason
    )
    return ApiResponse(201 if created else 200, _job(stored))


def _job(stored: StoredJob) -> JsonObject:
    return classic_job(stored.id.name, stored.document.public_properties())


def _parts(
    storage: Storage, cloud_service: CloudServiceId
) -> tuple[StoredCloudService | None, list[StoredCollection]]:
    """A cloud service's own record (if any) and the job collections in it."""
    collections = storage.collections.collections(cloud_service.subscription, cloud_service.name)
    return storage.classic.cloud_service(cloud_service), collections


def _existing_parts(
    storage: Storage, cloud_service: CloudServiceId
) -> tuple[StoredCloudService | None, list[StoredCollection]]:
    """As `_parts`, or NotFound when there is neither a record nor a collection."""
    record, collections = _parts(storage, cloud_service)
    if record is None and not collections:
        raise NotFound(cloud_service)
    return record, collections


def _named(collections: list[StoredCollection], wanted: CollectionId) -> StoredCollection | None:
    """The one of a cloud service's collections that is `wanted` (names match in any case)."""
    folded = wanted.name.casefold()
    return next((found for found in collections if found.id.name.casefold() == folded), None)


def _cloud_service(
    record: StoredCloudService | None, collections: list[StoredCollection]
) -> Element:
    """A cloud service as XML, from its record or (without one) its resource group's collections."""
    name = record.id.name if record else collections[0].id.resource_group
    return bodies.cloud_service(
        name,
        record.document if record else None,
        [(stored.id.name, stored.document, stored.etag) for stored in collections],
    )


def _collection_body(sent: JsonObject) -> CollectionBody:
    try:
        return CollectionBody.model_validate(sent)
    except ValidationError as invalid:
        raise _in_xml_terms(field_errors(invalid)) from None


def _in_xml_terms(problems: Iterable[FieldError]) -> InvalidRequest:
    """Problems named as the XML names them: properties.quota.maxJobCount ->
    IntrinsicSettings.Quota.MaxJobCount."""
    return InvalidRequest([FieldError(_xml_path(problem.field), problem.problem)
                           for problem in problems])  # fmt: skip


def _xml_path(field: str) -> str:
    field = field.replace("properties.quota", "IntrinsicSettings.Quota")
    return ".".join(part[:1].upper() + part[1:] for part in field.split("."))


def _cloud_service_id(request: ApiRequest) -> CloudServiceId:
    return CloudServiceId.of(request.route["subscriptionId"], request.route["cloudServiceName"])


def _collection_id(request: ApiRequest) -> CollectionId:
    return _cloud_service_id(request).collection(request.route["jobCollectionName"])


def _job_id(request: ApiRequest) -> JobId:
    return JobId.of(_collection_id(request), request.route["jobId"])
