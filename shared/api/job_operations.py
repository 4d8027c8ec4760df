"""Job operations, each from an ApiRequest to an ApiResponse."""

from __future__ import annotations

from shared.api.arm import ApiRequest, ApiResponse
from shared.api.collection_operations import collection_id
from shared.api.paging import SKIPTOKEN, next_link, page, skiptoken
from shared.api.patch_secrets import secrets_staying
from shared.api.query import equality_filter, page_bounds, whole_number
from shared.domain.collection import CollectionState
from shared.domain.ids import HISTORY_TYPE, JOB_TYPE, JobId
from shared.domain.job_definition import HistoryStatus, JobBody, JobState
from shared.domain.job_document import occurrences_of
from shared.domain.job_rules import definition_problems
from shared.domain.problems import InvalidRequest
from shared.domain.schedule.exclusion_reasons import excluded_occurrences
from shared.domain.schedule.timezones import iana_name
from shared.domain.schedule.words import describe
from shared.domain.wire import JsonObject, iso, merge_patch
from shared.services import Services
from shared.storage.errors import NotFound
from shared.storage.interface import PageBounds, StoredJob

LARGEST_PREVIEW = 100
DEFAULT_PREVIEW = 10


def get_job(request: ApiRequest, services: Services) -> ApiResponse:
    return _job_response(200, services.storage.jobs.existing_job(_job_id(request)))


def put_job(request: ApiRequest, services: Services) -> ApiResponse:
    job = _job_id(request)
    body = request.parsed_body(JobBody)
    stored, created = services.scheduling.save_definition(
        job, body.properties, services.now(), preconditions=request.preconditions
    )
    return _job_response(201 if created else 200, stored)


def patch_job(request: ApiRequest, services: Services) -> ApiResponse:
    job = _job_id(request)
    slot = services.storage.jobs.job_slot(job)
    current = slot.current
    if current is None:
        raise NotFound(job)
    request.preconditions.check(current)
    patch = request.json_body()
    if not isinstance(patch, dict):
        raise InvalidRequest.because("", "the request body must be a JSON object")
    definition = current.document.properties.to_wire()  # a merge patch applies to JSON
    merged_body = merge_patch({"properties": definition}, patch)
    if isinstance(merged_body.get("properties"), dict):  # a secret goes only where it came from
        staying = secrets_staying(definition, merged_body["properties"])
        merged_body = merge_patch({"properties": staying}, patch)
    # What is stored holds only known properties: whatever is ignored came with the patch.
    merged = request.read(JobBody, merged_body)
    stored, created = services.scheduling.save_definition(
        current.id,
        merged.properties,
        services.now(),
        preconditions=request.preconditions,
        slot=slot,
    )
    return _job_response(201 if created else 200, stored)


def delete_job(request: ApiRequest, services: Services) -> ApiResponse:
    deleted = services.scheduling.delete_job(_job_id(request), request.preconditions)
    return ApiResponse(200 if deleted else 204)


def list_jobs(request: ApiRequest, services: Services) -> ApiResponse:
    """A collection's jobs in name order: one page, read from where the previous one ended.

    With a `$skiptoken` (from a nextLink) the page starts after the entry it names, and `$skip`
    only says how many entries came before it; without one, `$skip` entries are skipped.
    """
    collection = services.storage.collections.existing_collection(collection_id(request))
    state = equality_filter(request.query.get("$filter"), "state", JobState)
    skip, top = page_bounds(request.query)
    after = skiptoken(request.query)
    bounds = PageBounds(top, after, 0 if after else skip)
    found, next_after = services.storage.jobs.jobs_page(collection.id, bounds, state)
    following = None
    if next_after is not None:
        changes = {"$skip": str(skip + top), "$top": str(top), SKIPTOKEN: next_after}
        following = next_link(request, services.settings.public_base_url, changes)
    return page([_job_resource(stored) for stored in found], following)


def list_history(request: ApiRequest, services: Services) -> ApiResponse:
    """A job's executions, newest first: one page, read from where the previous one ended
    (see `list_jobs`)."""
    job = services.storage.jobs.existing_job(_job_id(request)).id
    status = equality_filter(request.query.get("$filter"), "status", HistoryStatus)
    skip, top = page_bounds(request.query)
    after = skiptoken(request.query)
    bounds = PageBounds(top, after, 0 if after else skip)
    found, more = services.storage.history.page(job, bounds, status)
    entries = [
        {
            "id": f"{job.arm_id}/history/{entry_id}",
            "type": HISTORY_TYPE,
            "name": f"{job.arm_name}/{entry_id}",
            "properties": entry,
        }
        for entry_id, entry in found
    ]
    following = None
    if more:
        changes = {"$skip": str(skip + top), "$top": str(top), SKIPTOKEN: found[-1][0]}
        following = next_link(request, services.settings.public_base_url, changes)
    return page(entries, following)


def run_job(request: ApiRequest, services: Services) -> ApiResponse:
    """Run now: an immediate execution through the same path as scheduled ones."""
    services.scheduling.run_now(_job_id(request), services.now())
    return ApiResponse(200)


def enable_collection(request: ApiRequest, services: Services) -> ApiResponse:
    return _switch_collection(request, services, CollectionState.ENABLED, JobState.ENABLED)


def disable_collection(request: ApiRequest, services: Services) -> ApiResponse:
    return _switch_collection(request, services, CollectionState.DISABLED, JobState.DISABLED)


def next_occurrences(request: ApiRequest, services: Services) -> ApiResponse:
    """Our extension: the next `count` occurrences of a saved job."""
    document = services.storage.jobs.existing_job(_job_id(request)).document
    upcoming = document.schedule.upcoming(
        _preview_count(request), after=services.now(), executions_done=document.occurrences
    )
    return ApiResponse(200, {"value": [iso(instant) for instant in upcoming]})


def preview_occurrences(request: ApiRequest, services: Services) -> ApiResponse:
    """Our extension: check a job body without saving it, and show when it would run: the
    times in UTC, the schedule in words, and the IANA name of its time zone (for local times)."""
    collection = services.storage.collections.existing_collection(collection_id(request))
    body = request.parsed_body(JobBody)
    sku = collection.document.sku
    defined_at = services.now()
    problems = definition_problems(body.properties, sku=sku, now=defined_at)
    if problems:
        raise InvalidRequest(problems)
    properties = body.properties
    schedule = occurrences_of(properties, defined_at)
    upcoming = schedule.upcoming(_preview_count(request))
    answer: JsonObject = {
        "value": [iso(instant) for instant in upcoming],
        "schedule": describe(properties.starts_at, properties.recurrence),
    }
    if upcoming and schedule.calendar is not None:  # our extension of an extension
        answer["excluded"] = excluded_occurrences(schedule, defined_at, upcoming[-1])
    zone = iana_name(properties.recurrence.time_zone if properties.recurrence else None)
    if zone is not None:  # a schedule in UTC has none
        answer["timeZone"] = zone
    return ApiResponse(200, answer)


# --- the steps ------------------------------------------------------------------------------


def _switch_collection(
    request: ApiRequest, services: Services, state: CollectionState, jobs_state: JobState
) -> ApiResponse:
    """The collection in `state`, as the real service showed it afterwards, and its jobs in
    `jobs_state` ("enables/disables all of the jobs in the job collection", says the API)."""
    services.scheduling.switch_collection(collection_id(request), state, jobs_state, services.now())
    return ApiResponse(200)


def _preview_count(request: ApiRequest) -> int:
    return whole_number(
        request.query, "count", default=DEFAULT_PREVIEW, least=1, most=LARGEST_PREVIEW
    )


def _job_id(request: ApiRequest) -> JobId:
    return JobId.of(collection_id(request), request.route["jobName"])


def _job_resource(stored: StoredJob) -> JsonObject:
    return {
        "id": stored.id.arm_id,
        "type": JOB_TYPE,
        "name": stored.id.arm_name,
        "properties": stored.document.public_properties(),
    }


def _job_response(status: int, stored: StoredJob) -> ApiResponse:
    return ApiResponse(status, _job_resource(stored), {"ETag": stored.etag})
