"""Jobs and their history in the classic API's JSON: the ARM job's properties at the top level,
with the job's name as `id`, as the first edition of the Scheduler concepts page and the 2015
recordings show them."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from shared.domain.job_definition import JobProperties
from shared.domain.problems import InvalidRequest, field_errors


def classic_spelling(value: str) -> str:
    """The classic API's spelling of an enum value: lower camel case (`http`, `storageQueue`,
    recorded and in the first concepts page; where neither shows a value, the same rule)."""
    return value[:1].lower() + value[1:]


def job_properties(sent: Any) -> JobProperties:
    """A classic job body read as the properties of an ARM job; `id` is read-only and ignored."""
    if not isinstance(sent, dict):
        raise InvalidRequest.because("", "the request body must be a JSON object")
    try:
        return JobProperties.model_validate(without_id(sent))
    except ValidationError as invalid:
        raise InvalidRequest(field_errors(invalid)) from None


def without_id(sent: dict[str, Any]) -> dict[str, Any]:
    """A classic job body without its read-only `id` (in any case)."""
    return {name: value for name, value in sent.items() if name.casefold() != "id"}


def classic_job(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """A job as the classic API answers it, from what the ARM API shows of it."""
    job = copy.deepcopy(properties)
    action = job["action"]
    for each in (action, action.get("errorAction")):
        if not each:
            continue
        each["type"] = classic_spelling(each["type"])
        request = each.get("request")
        if request is None:
            continue
        if "authentication" in request:
            request["authentication"]["type"] = classic_spelling(request["authentication"]["type"])
        if "headers" in request:
            # Recorded: the service echoed `Content-Type` as `content-Type` (header names are
            # case-insensitive, so nothing a target sees changes).
            request["headers"] = {
                classic_spelling(header): value for header, value in request["headers"].items()
            }
    return {"id": name, **job}


def classic_history_entry(job_name: str, entry_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One execution as the classic API lists it: flat, naming its job."""
    spelled = dict(entry)
    for name in ("status", "actionName"):
        if isinstance(spelled.get(name), str):
            spelled[name] = classic_spelling(spelled[name])
    return {"jobId": job_name, "id": entry_id, **spelled}
