"""Jobs and their history in the classic API's JSON: the ARM job's properties at the top level,
with the job's name as `id`, as the first edition of the Scheduler concepts page and the 2015
recordings show them."""

from __future__ import annotations

import copy
from typing import Annotated, Any, TypeVar

from pydantic import StringConstraints, ValidationError, field_validator

from shared.domain.history import HistoryProperties
from shared.domain.job_definition import JobProperties, JobState, settable_state
from shared.domain.problems import InvalidRequest, field_errors
from shared.domain.wire import JsonObject, WireModel

# The reason a client gives for a change of state (the Java client's `updateStateReason`, sent
# as `stateDetails`): kept with the job and shown in the console, so a short text.
LONGEST_STATE_REASON = 1024
StateReason = Annotated[str, StringConstraints(max_length=LONGEST_STATE_REASON)]
_NOT_JOB_FIELDS = ("id", "statedetails")  # folded: names match in any case
_Model = TypeVar("_Model", bound=WireModel)


class StateChange(WireModel):
    """A change of state of every job of a collection: enabled or disabled, and why."""

    state: JobState
    state_details: StateReason | None = None

    _settable_state = field_validator("state", mode="after")(settable_state)


class _StateReasonSent(WireModel):
    state_details: StateReason | None = None


def classic_spelling(value: str) -> str:
    """The classic API's spelling of an enum value: lower camel case (`http`, `storageQueue`,
    recorded and in the first concepts page; where neither shows a value, the same rule)."""
    return value[:1].lower() + value[1:]


def job_fields(sent: Any) -> tuple[JsonObject, str | None]:
    """A classic job body as the job's own fields and the reason sent for its state
    (`stateDetails`; None when none was sent). `id` is read-only and ignored."""
    if not isinstance(sent, dict):
        raise InvalidRequest.because("", "the request body must be a JSON object")
    fields = {name: value for name, value in sent.items() if name.casefold() not in _NOT_JOB_FIELDS}
    given = {name: value for name, value in sent.items() if name.casefold() == "statedetails"}
    return fields, _validated(_StateReasonSent, given).state_details


def job_properties(fields: JsonObject) -> JobProperties:
    """A classic job's fields read as the properties of an ARM job."""
    return _validated(JobProperties, fields)


def state_change(sent: Any) -> StateChange:
    """The body of a change of state of a collection's jobs."""
    if not isinstance(sent, dict):
        raise InvalidRequest.because("", "the request body must be a JSON object")
    return _validated(StateChange, sent)


def _validated(model: type[_Model], sent: JsonObject) -> _Model:
    try:
        return model.model_validate(sent)
    except ValidationError as invalid:
        raise InvalidRequest(field_errors(invalid)) from None


def classic_job(name: str, properties: JsonObject) -> JsonObject:
    """A job as the classic API answers it, from what the ARM API shows of it."""
    job = copy.deepcopy(properties)
    action = job["action"]
    for each in (action, action.get("errorAction")):
        if not each:
            continue
        each["type"] = classic_spelling(each["type"])
        request = each.get("request")
        # An authentication's type keeps ARM's spelling (`Basic`, `ClientCertificate`): so the
        # 2014 captures on Microsoft's outbound-authentication page show it.
        if request is not None and "headers" in request:
            # Recorded: the service echoed `Content-Type` as `content-Type` (header names are
            # case-insensitive, so nothing a target sees changes).
            request["headers"] = {
                classic_spelling(header): value for header, value in request["headers"].items()
            }
    return {"id": name, **job}


def classic_history_entry(job_name: str, entry_id: str, entry: HistoryProperties) -> JsonObject:
    """One execution as the classic API lists it: flat, naming its job."""
    spelled: JsonObject = dict(entry)
    for name in ("status", "actionName"):
        if isinstance(spelled.get(name), str):
            spelled[name] = classic_spelling(spelled[name])
    return {"jobId": job_name, "id": entry_id, **spelled}
