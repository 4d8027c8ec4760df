"""Job operations (SPEC.md sections 1 and 2), each from an ApiRequest to an ApiResponse.

A stored job document holds `definition` (the client's definition, every default spelled out,
secrets included), `status` (system-owned) and `definedAt` (when the definition was saved: its
occurrences count from there).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import ValidationError

from shared.arm import ApiRequest, ApiResponse
from shared.collection_api import collection_id, existing_collection
from shared.collection_jobs import set_job_states
from shared.collections import Quota, SkuName
from shared.errors import Conflict, InvalidRequest, NotFound, field_errors
from shared.execution import (
    Attempt,
    Delivery,
    Pending,
    defined_document,
    pending_of,
    with_pending,
)
from shared.job_documents import occurrences_of, public_properties, stored_definition
from shared.job_rules import definition_problems, recurrence_conflict
from shared.jobs import FINAL_STATE_VALUES, HistoryStatus, JobBody, JobProperties, JobState
from shared.resources import HISTORY_TYPE, JOB_TYPE, JobId
from shared.runtime import dispatcher, now, store
from shared.store import JobSlot, QuotaExceeded, Stored
from shared.wire import WireEnum, iso, merge_patch, parse_iso

LARGEST_PAGE = 100
_WRITE_ATTEMPTS = 8
LARGEST_PREVIEW = 100
DEFAULT_PREVIEW = 10


def get_job(request: ApiRequest) -> ApiResponse:
    return _job_response(200, _existing_job(_job_id(request)))


def put_job(request: ApiRequest) -> ApiResponse:
    job = _job_id(request)
    body = request.parsed_body(JobBody)
    return _save(job, body.properties, request)


def patch_job(request: ApiRequest) -> ApiResponse:
    job = _job_id(request)
    slot = store().job_slot(job)
    current = slot.current
    if current is None:
        raise NotFound("job", job.arm_name)
    request.preconditions.check(current)
    patch = request.json_body()
    if not isinstance(patch, dict):
        raise InvalidRequest.because("", "the request body must be a JSON object")
    stored_body = {"properties": current.document["definition"]}
    try:
        merged = JobBody.model_validate(merge_patch(stored_body, patch))
    except ValidationError as invalid:
        raise InvalidRequest(field_errors(invalid)) from None
    return _save(current.id, merged.properties, request, slot)


def delete_job(request: ApiRequest) -> ApiResponse:
    deleted = store().delete_job(_job_id(request), request.preconditions)
    return ApiResponse(200 if deleted else 204)


def list_jobs(request: ApiRequest) -> ApiResponse:
    collection = existing_collection(collection_id(request))
    state = _equality_filter(request.query.get("$filter"), "state", JobState)
    found = store().jobs(collection.id, state)
    return _page(request, [_job_resource(stored) for stored in found])


def list_history(request: ApiRequest) -> ApiResponse:
    """A job's executions, newest first."""
    job = _existing_job(_job_id(request)).id
    status = _equality_filter(request.query.get("$filter"), "status", HistoryStatus)
    entries = [
        {
            "id": f"{job.arm_id}/history/{entry_id}",
            "type": HISTORY_TYPE,
            "name": f"{job.arm_name}/{entry_id}",
            "properties": entry,
        }
        for entry_id, entry in store().history(job, status)
    ]
    return _page(request, entries)


def run_job(request: ApiRequest) -> ApiResponse:
    """Run now: an immediate execution through the same path as scheduled ones."""
    job = _job_id(request)
    stored = _existing_job(job)
    requested = now()
    entry = Pending(Attempt(requested, run_now=True), requested)
    # Sent before it is written down: the executor waits a moment for the write (NotYet).
    dispatcher().dispatch([Delivery(stored.id, stored.document["definedAt"], entry)], requested)
    for _ in range(_WRITE_ATTEMPTS):
        document = with_pending(stored.document, [*pending_of(stored.document), entry])
        if store().settle_job(stored, document, []):
            return ApiResponse(200)
        stored = _existing_job(job)
    raise Conflict("The job is being changed by other requests; try again.")


def enable_collection(request: ApiRequest) -> ApiResponse:
    return _set_all_states(request, JobState.ENABLED)


def disable_collection(request: ApiRequest) -> ApiResponse:
    return _set_all_states(request, JobState.DISABLED)


def next_occurrences(request: ApiRequest) -> ApiResponse:
    """Our extension: the next `count` occurrences of a saved job."""
    stored = _existing_job(_job_id(request))
    document = stored.document
    occurrences = occurrences_of(document["definition"], parse_iso(document["definedAt"]))
    upcoming = occurrences.upcoming(
        _preview_count(request), after=now(), executions_done=document.get("occurrences", 0)
    )
    return ApiResponse(200, {"value": [iso(instant) for instant in upcoming]})


def preview_occurrences(request: ApiRequest) -> ApiResponse:
    """Our extension: check a job body without saving it, and show when it would run."""
    collection = existing_collection(collection_id(request))
    body = request.parsed_body(JobBody)
    sku = SkuName(collection.document["properties"]["sku"]["name"])
    defined_at = now()
    problems = definition_problems(body.properties, sku=sku, now=defined_at)
    if problems:
        raise InvalidRequest(problems)
    occurrences = occurrences_of(stored_definition(body.properties, sku=sku), defined_at)
    upcoming = occurrences.upcoming(_preview_count(request))
    return ApiResponse(200, {"value": [iso(instant) for instant in upcoming]})


# --- the steps ------------------------------------------------------------------------------


def _save(
    job: JobId, properties: JobProperties, request: ApiRequest, slot: JobSlot | None = None
) -> ApiResponse:
    collection = existing_collection(job.collection)
    sku = SkuName(collection.document["properties"]["sku"]["name"])
    defined_at = now()
    problems = definition_problems(properties, sku=sku, now=defined_at)
    if problems:
        raise InvalidRequest(problems)
    slot = slot or store().job_slot(job)
    current = slot.current
    if current is not None and current.document["definition"]["state"] in FINAL_STATE_VALUES:
        raise Conflict(
            f"The job '{job.name}' is {current.document['definition']['state']}, a final state: "
            "it can no longer be changed, only deleted."
        )
    definition = stored_definition(properties, sku=sku)
    quota = Quota.model_validate(collection.document["properties"]["quota"])
    conflict = recurrence_conflict(occurrences_of(definition, defined_at), quota)
    if conflict:
        raise Conflict(conflict)
    document, pending = defined_document(
        definition, defined_at, current.document if current else None
    )
    document["region"] = collection.document.get("location") or ""  # StorageQueue messages say it
    # Sent before the write, so that no crash can leave the job waiting for a message never
    # sent; until the write lands the executor waits (NotYet), and if it fails, skips it.
    dispatcher().dispatch([Delivery(job, iso(defined_at), entry) for entry in pending], defined_at)
    try:
        stored, created = store().save_job(
            job, document, request.preconditions, slot, max_jobs=quota.max_job_count
        )
    except QuotaExceeded as full:
        raise Conflict(
            f"The job collection already holds {full.jobs} jobs, its quota maxJobCount; "
            "delete a job or raise the quota."
        ) from None
    return _job_response(201 if created else 200, stored)


def _set_all_states(request: ApiRequest, state: JobState) -> ApiResponse:
    collection = existing_collection(collection_id(request))
    set_job_states(collection.id, state, now(), store=store(), dispatcher=dispatcher())
    return ApiResponse(200)


def _page(request: ApiRequest, items: list[dict[str, Any]]) -> ApiResponse:
    top = _whole_number(request.query, "$top", default=LARGEST_PAGE, least=1, most=LARGEST_PAGE)
    skip = _whole_number(request.query, "$skip", default=0, least=0, most=None)
    body: dict[str, Any] = {"value": items[skip : skip + top]}
    if skip + top < len(items):
        body["nextLink"] = _link_with(request.url, {"$skip": str(skip + top), "$top": str(top)})
    return ApiResponse(200, body)


def _link_with(url: str, changes: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
             if name.lower() not in {change.lower() for change in changes}]  # fmt: skip
    query += list(changes.items())
    return urlunsplit(parts._replace(query=urlencode(query, safe="$'")))


def _whole_number(query: Any, name: str, *, default: int, least: int, most: int | None) -> int:
    given = query.get(name.lower())
    if given is None:
        return default
    try:
        value = int(given)
    except ValueError:
        raise InvalidRequest.because(name, f"'{given[:20]}' is not a whole number") from None
    if value < least or (most is not None and value > most):
        allowed = f"{least}..{most}" if most is not None else f"at least {least}"
        raise InvalidRequest.because(name, f"{value} is out of range: {allowed}")
    return value


def _equality_filter(expression: str | None, field: str, values: type[WireEnum]) -> str | None:
    """`<field> eq '<value>'`, the one kind of $filter that listing supports."""
    if not expression:
        return None
    words = expression.split(None, 2)
    if len(words) == 3 and words[0].lower() == field and words[1].lower() == "eq":
        try:
            return values(words[2].strip().strip("'")).value
        except ValueError:
            pass
    allowed = ", ".join(member.value for member in values)
    raise InvalidRequest.because(
        "$filter", f"'{expression[:60]}' is not supported; use {field} eq '<one of {allowed}>'"
    )


def _preview_count(request: ApiRequest) -> int:
    return _whole_number(
        request.query, "count", default=DEFAULT_PREVIEW, least=1, most=LARGEST_PREVIEW
    )


def _job_id(request: ApiRequest) -> JobId:
    return JobId.of(collection_id(request), request.route["jobName"])


def _existing_job(job: JobId) -> Stored[JobId]:
    stored = store().job(job)
    if stored is None:
        raise NotFound("job", job.arm_name)
    return stored


def _job_resource(stored: Stored[JobId]) -> dict[str, Any]:
    return {
        "id": stored.id.arm_id,
        "type": JOB_TYPE,
        "name": stored.id.arm_name,
        "properties": public_properties(stored.document["definition"], stored.document["status"]),
    }


def _job_response(status: int, stored: Stored[JobId]) -> ApiResponse:
    return ApiResponse(status, _job_resource(stored), {"ETag": stored.etag})
