"""The activity log: what every change and refused attempt leaves behind, and how it is read.

`GET /subscriptions/{s}/providers/Microsoft.Scheduler/activityLog?api-version=2016-03-01`
answers a subscription's events, newest first, in pages (`$top`, at most 100; `nextLink`), with
Azure Monitor's `$filter` grammar: `eventTimestamp ge '<instant>' and eventTimestamp le
'<instant>'` (the last 7 days when not given, never more than the 90 kept), and optionally
`resourceId eq '<path>'` (or `resourceUri`: the resource and everything below it),
`resourceGroupName eq '<name>'`, `caller eq '<name or object id>'`, `correlationId eq '<id>'`,
`status eq 'Succeeded'|'Failed'`, all joined with `and`.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from shared.api.arm import ApiRequest, ApiResponse
from shared.api.paging import next_link, page, skiptoken
from shared.api.query import LARGEST_PAGE, whole_number
from shared.domain.access import Action, Caller
from shared.domain.activity import KEPT_FOR, Attempt, event
from shared.domain.problems import InvalidRequest
from shared.domain.wire import JsonObject
from shared.services import Services

log = logging.getLogger("scheduler.api")
DEFAULT_SPAN = timedelta(days=7)
_CONDITION = re.compile(r"\s*(\w+)\s+(eq|ge|le|gt|lt)\s+'((?:[^']|'')*)'\s*", re.IGNORECASE)
_FILTERED = {"resourceid": "resourceId", "resourceuri": "resourceId", "caller": "caller",
             "resourcegroupname": "resourceGroupName", "correlationid": "correlationId",
             "status": "status"}  # fmt: skip


def record(
    services: Services,
    request: ApiRequest,
    *,
    caller: Caller | None,
    action: Action,
    scope: str,
    status: int,
    request_id: str,
) -> None:
    """Keep one event; a failure to keep it is logged, and the answer goes out regardless."""
    headers = request.headers
    attempt = Attempt(
        caller=caller,
        action=action,
        scope=scope,
        method=request.method,
        status=status,
        correlation_id=headers.get("x-ms-correlation-request-id") or request_id,
        client_address=_client_address(headers.get("x-forwarded-for", "")),
        client_request_id=headers.get("x-ms-client-request-id", "")[:100],
    )
    try:
        services.activity_log.add(event(attempt, services.now(), str(uuid.uuid4())))
    except Exception:
        log.exception("request %s: its activity log event was not kept", request_id)


def _client_address(forwarded: str) -> str:
    """The address the platform's front end saw, without its port, kept short.

    A proxy appends the address it was called from to X-Forwarded-For, so the entry the
    platform's front end wrote is the last one; anything before it came from the client (or from
    proxies in front of the platform) and may be made up.
    """
    last = forwarded.rsplit(",", 1)[-1].strip()[:64]
    if last.startswith("["):  # an IPv6 address with its port: [2001:db8::1]:443
        return last[1:].split("]", 1)[0]
    if last.count(":") == 1:  # an IPv4 address with its port, as App Service writes it
        return last.split(":", 1)[0]
    return last


def list_activity_log(request: ApiRequest, services: Services) -> ApiResponse:
    """A subscription's events, newest first, as the module's text describes."""
    now = services.now()
    since, until, matches = _filter(request.query.get("$filter", ""), now)
    subscription = f"/subscriptions/{request.route['subscriptionId']}".lower()
    top = whole_number(request.query, "$top", default=LARGEST_PAGE, least=1, most=LARGEST_PAGE)
    found: list[JsonObject] = []
    last = ""
    for place, each in services.activity_log.events(
        since, until, lambda e: _in(e, subscription) and matches(e), after=skiptoken(request.query)
    ):
        if len(found) == top:
            return page(found, next_link(request, services.settings.public_base_url,
                                         {"$skiptoken": last}))  # fmt: skip
        found.append(each)
        last = place
    return page(found, None)


def _in(found: JsonObject, subscription: str) -> bool:
    resource = str(found.get("resourceId", "")).lower()
    return resource == subscription or resource.startswith(subscription + "/")


def _filter(
    expression: str, now: datetime
) -> tuple[datetime, datetime, Callable[[JsonObject], bool]]:
    """The time range and the test of the other conditions of a `$filter`."""
    oldest_kept = now - KEPT_FOR
    since, until = now - DEFAULT_SPAN, now
    tests: list[Callable[[JsonObject], bool]] = []
    for condition in re.split(r"\s+and\s+", expression.strip(), flags=re.IGNORECASE):
        if not condition:
            continue
        parsed = _CONDITION.fullmatch(condition)
        if parsed is None:
            raise _unsupported(condition)
        name, operator, value = parsed.group(1).lower(), parsed.group(2).lower(), parsed.group(3)
        value = value.replace("''", "'")
        if name == "eventtimestamp" and operator in ("ge", "gt", "le", "lt"):
            instant = _instant(value)
            if operator in ("ge", "gt"):
                since = instant
            else:
                until = instant
        elif name in _FILTERED and operator == "eq":
            tests.append(_equals(_FILTERED[name], value))
        else:
            raise _unsupported(condition)
    if since > until:
        raise InvalidRequest.because("$filter", "the time range ends before it begins")
    return max(since, oldest_kept), min(until, now), lambda e: all(test(e) for test in tests)


def _equals(field: str, value: str) -> Callable[[JsonObject], bool]:
    wanted = value.lower().rstrip("/")

    def test(found: JsonObject) -> bool:
        if field == "resourceId":  # the resource and what lies below it
            resource = str(found.get("resourceId", "")).lower()
            return resource == wanted or resource.startswith(wanted + "/")
        if field == "caller":
            return wanted in (str(found.get("caller", "")).lower(),
                              str(found.get("callerObjectId", "")).lower())  # fmt: skip
        if field == "status":
            status = found.get("status")
            return isinstance(status, dict) and str(status.get("value", "")).lower() == wanted
        return str(found.get(field, "")).lower() == wanted

    return test


def _instant(text: str) -> datetime:
    try:
        instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequest.because(
            "$filter", f"'{text[:40]}' is not an ISO 8601 instant such as 2026-01-31T00:00:00Z"
        ) from None
    if instant.tzinfo is None:
        raise InvalidRequest.because("$filter", f"'{text[:40]}' needs an offset, such as Z")
    return instant


def _unsupported(condition: str) -> InvalidRequest:
    return InvalidRequest.because(
        "$filter",
        f"'{condition.strip()[:60]}' is not supported; use eventTimestamp ge/le '<instant>', "
        "resourceId, resourceGroupName, caller, correlationId or status eq '<value>', "
        "joined with 'and'",
    )
