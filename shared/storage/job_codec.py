"""The one place a job turns into the JSON storage keeps and back: its document (the `Document`
column of a job entity) and its deliveries (a queue message, a due-index row).

Reading is one of the two places a job's definition is validated (the other is where it comes
in: the API, an import); everything past it reads the typed model. Documents written by every
earlier version still read: the newer keys have defaults, and a document written before the
retries were kept apart has them worked out from its policy (tests/storage/stored_jobs/).
"""

from __future__ import annotations

from datetime import timedelta

from shared.domain.attempts import TRACE_CONTEXT_FIELDS, Attempt, Claim, Delivery, Pending
from shared.domain.collection import SkuName
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ActionName, JobProperties, JobState
from shared.domain.job_document import JobDocument, JobStatus, Retries
from shared.domain.wire import JsonObject, iso, parse_iso


def encode_job(document: JobDocument) -> JsonObject:
    """The document as JSON, as storage keeps it."""
    stored: JsonObject = {
        "definition": document.properties.to_wire(),
        "status": dict(document.status.to_wire()),
        "definedAt": iso(document.defined_at),
        "retries": _encode_retries(document.retries),
        "occurrences": document.occurrences,
        "pending": [_encode_pending(entry) for entry in document.pending],
        "historyCount": document.history_count,
        "region": document.region,
    }
    if document.ended_at is not None:
        stored["endedAt"] = iso(document.ended_at)
    if document.last_attempt is not None:
        stored["lastAttempt"] = document.last_attempt
    if document.state_reason is not None:
        stored["stateReason"] = document.state_reason
    return stored


def decode_job(stored: JsonObject) -> JobDocument:
    """The document storage keeps; pydantic's ValidationError, KeyError or ValueError if it is
    not one."""
    ended, retries = stored.get("endedAt"), stored.get("retries")
    properties = decode_properties(stored["definition"])
    return JobDocument(
        properties=properties,
        defined_at=parse_iso(stored["definedAt"]),
        # Documents written before retries were kept apart spelled out the whole policy.
        retries=(
            _decode_retries(retries)
            if retries
            else Retries.of(properties.action.retry_policy, SkuName.STANDARD)
        ),
        status=_decode_status(stored["status"]),
        pending=tuple(_decode_pending(entry) for entry in stored.get("pending", ())),
        occurrences=stored.get("occurrences", 0),
        history_count=stored.get("historyCount", 0),
        ended_at=parse_iso(ended) if ended else None,
        region=stored.get("region", ""),
        last_attempt=stored.get("lastAttempt"),
        state_reason=stored.get("stateReason"),
    )


def decode_properties(definition: JsonObject) -> JobProperties:
    """A stored definition, typed. Its state is read apart: the API's model lets a client set
    only Enabled or Disabled, and storage also keeps the Completed and Faulted the service sets."""
    state = definition.get("state")
    sent = {name: value for name, value in definition.items() if name != "state"}
    properties = JobProperties.model_validate(sent)
    return properties.model_copy(update={"state": JobState(state or JobState.ENABLED.value)})


def _decode_status(wire: JsonObject) -> JobStatus:
    last, following = wire.get("lastExecutionTime"), wire.get("nextExecutionTime")
    return JobStatus(
        execution_count=wire.get("executionCount", 0),
        failure_count=wire.get("failureCount", 0),
        faulted_count=wire.get("faultedCount", 0),
        last_execution_time=parse_iso(last) if last else None,
        next_execution_time=parse_iso(following) if following else None,
    )


def _encode_retries(retries: Retries) -> JsonObject:
    wire: JsonObject = {"count": retries.count, "intervalSeconds": retries.interval.total_seconds()}
    if retries.maximum is not None:
        wire["maximumSeconds"] = retries.maximum.total_seconds()
    return wire


def _decode_retries(wire: JsonObject) -> Retries:
    maximum = wire.get("maximumSeconds")
    return Retries(
        wire["count"],
        timedelta(seconds=wire["intervalSeconds"]),
        None if maximum is None else timedelta(seconds=maximum),
    )


def encode_delivery(delivery: Delivery) -> JsonObject:
    """The delivery as JSON, as a queue message or a due-index row carries it."""
    collection = delivery.job.collection
    sent = {} if delivery.sent_at is None else {"sentAt": iso(delivery.sent_at)}
    wire = sent | {
        "job": {
            "subscription": collection.subscription,
            "resourceGroup": collection.resource_group,
            "collection": collection.name,
            "job": delivery.job.name,
        },
        "definedAt": iso(delivery.defined_at),
        "attempt": _encode_pending(delivery.pending),
    }
    return wire | dict(delivery.trace_context) if delivery.trace_context else wire


def decode_delivery(wire: JsonObject) -> Delivery:
    """The delivery a message describes; KeyError, TypeError or ValueError if malformed."""
    job = wire["job"]
    collection = CollectionId(job["subscription"], job["resourceGroup"], job["collection"])
    sent_at = wire.get("sentAt")
    return Delivery(
        JobId(collection, job["job"]),
        parse_iso(str(wire["definedAt"])),
        _decode_pending(wire["attempt"]),
        parse_iso(sent_at) if sent_at else None,
        tuple(
            (name, value)
            for name in TRACE_CONTEXT_FIELDS
            if isinstance(value := wire.get(name), str)
        ),
    )


def encode_attempt(attempt: Attempt) -> JsonObject:
    wire = {
        "expected": iso(attempt.expected),
        "action": attempt.action.value,
        "retry": attempt.retry,
        "runNow": attempt.run_now,
    }
    return wire | {"repeat": attempt.repeat} if attempt.repeat else wire


def _decode_attempt(wire: JsonObject) -> Attempt:
    return Attempt(
        expected=parse_iso(wire["expected"]),
        action=ActionName(wire["action"]),
        retry=int(wire["retry"]),
        run_now=bool(wire["runNow"]),
        repeat=int(wire.get("repeat", 0)),
    )


def _encode_pending(pending: Pending) -> JsonObject:
    wire = {**encode_attempt(pending.attempt), "due": iso(pending.due)}
    if pending.began is not None:
        wire["began"] = encode_attempt(pending.began)
    if pending.claim is not None:
        wire["claim"] = {"holder": pending.claim.holder, "until": iso(pending.claim.until)}
    return wire


def _decode_pending(wire: JsonObject) -> Pending:
    began, claim = wire.get("began"), wire.get("claim")
    return Pending(
        _decode_attempt(wire),
        parse_iso(wire["due"]),
        None if began is None else _decode_attempt(began),
        None if claim is None else Claim(str(claim["holder"]), parse_iso(claim["until"])),
    )
