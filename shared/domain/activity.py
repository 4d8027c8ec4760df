"""The activity log's events: what changed or was refused, by whom, when (pure).

Each event has the fields of an Azure Activity Log event (administrative category), so that
whoever reads Azure's log reads this one: `caller`, `operationName`, `status`, `subStatus`,
`correlationId`, `resourceId`, `eventTimestamp`, `httpRequest` with the client's address, and
`authorization` (the action and scope). Nothing in it comes from a request's body, so no secret
can reach it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.domain.access import Action, Caller
from shared.domain.ids import PROVIDER
from shared.domain.wire import JsonObject, iso, ticks

KEPT_FOR = timedelta(days=90)  # as Azure keeps its Activity Log
# The sub-statuses ARM names for the answers an administrative operation gets.
_SUB_STATUSES = {
    200: "OK", 201: "Created", 202: "Accepted", 204: "NoContent", 400: "BadRequest",
    401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
    412: "PreconditionFailed", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType",
    429: "TooManyRequests", 500: "InternalServerError", 503: "ServiceUnavailable",
}  # fmt: skip


@dataclass(frozen=True)
class Attempt:
    """One request that changed something, or tried to, as the activity log keeps it."""

    caller: Caller | None  # None: no valid credentials
    action: Action
    scope: str  # the resource's path
    method: str
    status: int
    correlation_id: str  # the request id the answer carried (x-ms-request-id)
    client_address: str
    client_request_id: str = ""


def event(attempt: Attempt, now: datetime, event_id: str) -> JsonObject:
    """The Activity Log event (its id `event_id`, a GUID) for an attempt made at `now`."""
    succeeded = attempt.status < 400
    caller = attempt.caller
    parts = attempt.scope.strip("/").split("/")
    return {
        "authorization": {"action": attempt.action.name, "scope": attempt.scope},
        "caller": _caller_name(caller),
        "callerObjectId": caller.object_id if caller else "",
        "channels": "Operation",
        "correlationId": attempt.correlation_id,
        "eventDataId": event_id,
        "eventName": {"value": "EndRequest", "localizedValue": "End request"},
        "category": {"value": "Administrative", "localizedValue": "Administrative"},
        "eventTimestamp": iso(now),
        "id": f"{attempt.scope}/events/{event_id}/ticks/{ticks(now)}",
        "level": "Informational" if succeeded else "Error",
        "operationId": attempt.correlation_id,
        "operationName": {"value": attempt.action.name, "localizedValue": attempt.action.name},
        "resourceGroupName": parts[3] if len(parts) > 3 and parts[2].lower() == "resourcegroups"
        else "",
        "resourceProviderName": {"value": PROVIDER, "localizedValue": PROVIDER},
        "resourceId": attempt.scope,
        "status": {"value": "Succeeded" if succeeded else "Failed",
                   "localizedValue": "Succeeded" if succeeded else "Failed"},
        "subStatus": {"value": _SUB_STATUSES.get(attempt.status, str(attempt.status)),
                      "localizedValue": _SUB_STATUSES.get(attempt.status, str(attempt.status))},
        "submissionTimestamp": iso(now),
        "subscriptionId": parts[1] if len(parts) > 1 else "",
        "httpRequest": {
            "clientRequestId": attempt.client_request_id,
            "clientIpAddress": attempt.client_address,
            "method": attempt.method,
        },
        "properties": {"statusCode": str(attempt.status)},
    }  # fmt: skip


def _caller_name(caller: Caller | None) -> str:
    """Who the log names: as Azure's log does, a user's name (here the token's), else the
    app's client id, else the object id; the function key's holder as `function key`."""
    if caller is None:
        return "unauthenticated"
    return caller.name or caller.client_id or caller.object_id
