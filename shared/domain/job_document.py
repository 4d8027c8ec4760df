"""A job as stored, and as a client reads it back.

Stored: the definition with every default made explicit (state, retry policy, the certificate
facts read from a pfx), the system-owned status, and `definedAt`, the moment the definition was
saved, from which its occurrences are counted. Read back: the same without any secret.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

from shared.domain.certificates import read_pfx
from shared.domain.collection import SkuName
from shared.domain.history import KEPT_FOR
from shared.domain.job_definition import (
    FINAL_STATE_VALUES,
    HttpAuthenticationType,
    JobProperties,
    JobState,
    RetryPolicy,
    RetryType,
)
from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import Recurrence
from shared.domain.wire import iso, parse_iso

# Where each secret lives in an action: (message, [sub-object], field).
SECRETS = (
    ("request", "authentication", "password"),
    ("request", "authentication", "pfx"),
    ("request", "authentication", "secret"),
    ("queueMessage", "sasToken"),
    ("serviceBusQueueMessage", "authentication", "sasKey"),
    ("serviceBusTopicMessage", "authentication", "sasKey"),
)
DEFAULT_RETRY_INTERVAL = timedelta(seconds=30)
DEFAULT_RETRY_INTERVAL_FREE = timedelta(hours=1)  # Free collections allow no shorter one
DEFAULT_RETRY_COUNT = 4


def stored_definition(properties: JobProperties, *, sku: SkuName) -> dict[str, Any]:
    """The definition as kept: the client's, with every default spelled out."""
    action = properties.action
    defined = properties.model_copy(
        update={
            "state": properties.state or JobState.ENABLED,
            "status": None,
            "action": action.model_copy(
                update={"retry_policy": _retry_policy(action.retry_policy, sku)}
            ),
        }
    ).to_wire()
    _add_certificate_facts(defined["action"])
    if "errorAction" in defined["action"]:
        _add_certificate_facts(defined["action"]["errorAction"])
    return defined


def occurrences_of(definition: dict[str, Any], defined_at: datetime) -> Occurrences:
    """The occurrences of a stored definition."""
    recurrence = definition.get("recurrence")
    start = definition.get("startTime")
    return Occurrences(
        start_time=parse_iso(start) if start else None,
        recurrence=Recurrence.model_validate(recurrence) if recurrence else None,
        created_at=defined_at,
    )


def fresh_status(definition: dict[str, Any], defined_at: datetime) -> dict[str, Any]:
    """The status of a definition that has not run yet."""
    status: dict[str, Any] = {"executionCount": 0, "failureCount": 0, "faultedCount": 0}
    if definition.get("state") == JobState.ENABLED.value:
        first = occurrences_of(definition, defined_at).first
        if first is not None:
            status["nextExecutionTime"] = iso(first)
    return status


def public_properties(definition: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """What a client reads: the definition without secrets, and the status."""
    public = copy.deepcopy(definition)
    for action in (public["action"], public["action"].get("errorAction")):
        for *place, secret in SECRETS if action else ():
            holder = action
            for step in place:
                holder = holder.get(step) or {}
            holder.pop(secret, None)
    return {**public, "status": status}


def _retry_policy(policy: RetryPolicy | None, sku: SkuName) -> RetryPolicy:
    # Decision (SPEC.md): no policy at all means Fixed with the defaults.
    if policy is not None and policy.retry_type is RetryType.NONE:
        return RetryPolicy(retry_type=RetryType.NONE)
    policy = policy or RetryPolicy()
    default_interval = (
        DEFAULT_RETRY_INTERVAL_FREE if sku is SkuName.FREE else DEFAULT_RETRY_INTERVAL
    )
    return RetryPolicy(
        retry_type=RetryType.FIXED,
        retry_interval=policy.retry_interval or default_interval,
        retry_count=DEFAULT_RETRY_COUNT if policy.retry_count is None else policy.retry_count,
    )


def _add_certificate_facts(action: dict[str, Any]) -> None:
    authentication = action.get("request", {}).get("authentication")
    if (
        not authentication
        or authentication.get("type") != HttpAuthenticationType.CLIENT_CERTIFICATE.value
    ):
        return
    facts = read_pfx(authentication["pfx"], authentication.get("password"))
    authentication |= {
        "certificateThumbprint": facts.thumbprint,
        "certificateSubjectName": facts.subject,
        "certificateExpirationDate": facts.expires,
    }


def expired(document: dict[str, Any], now: datetime) -> bool:
    """Whether a job ended (Completed or Faulted) longer ago than history is kept."""
    if document["definition"]["state"] not in FINAL_STATE_VALUES:
        return False
    ended = document.get("endedAt")
    return ended is not None and parse_iso(ended) <= now - KEPT_FOR
