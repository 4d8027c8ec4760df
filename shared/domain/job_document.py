"""A job as stored (`JobDocument`), and as a client reads it back.

Stored: the definition as the client sent it (the state it starts in and the certificate facts
read from a pfx added), the system-owned status, `definedAt` (the moment the definition was
saved, from which its occurrences count), and what the service keeps to run it: the retries its
policy allows, defaults applied; the attempts it waits for; how many occurrences have passed;
how many history entries it has; why its state was last changed, if the client said. Read
back: the definition without any secret (its secret fields left out, the keys in its URIs and
headers masked), and the status (docs/behaviour.md#jobs says when it shows).
"""

from __future__ import annotations

import base64
import copy
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from shared.domain.attempts import Attempt, Claim, Pending
from shared.domain.certificates import read_pfx
from shared.domain.collection import SkuName
from shared.domain.history import KEPT_FOR
from shared.domain.job_definition import (
    FINAL_STATES,
    HttpAuthenticationType,
    JobProperties,
    JobState,
    OverlapPolicy,
    RetryPolicy,
    RetryType,
)
from shared.domain.redaction import (
    is_secret_header,
    redacted_definition,
    request_secret_values,
    restored_definition,
    same_endpoint,
)
from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import Recurrence
from shared.domain.wire import JsonObject, iso, parse_iso

# Where each secret lives in an action: (message, [sub-object], field).
SECRETS = (
    ("request", "authentication", "password"),
    ("request", "authentication", "pfx"),
    ("request", "authentication", "secret"),
    ("queueMessage", "sasToken"),
    ("serviceBusQueueMessage", "authentication", "sasKey"),
    ("serviceBusTopicMessage", "authentication", "sasKey"),
)
# Where the secrets of an action that sends no HTTP request go: (message, field naming the place).
_MESSAGE_DESTINATIONS = (
    ("queueMessage", "storageAccount"),
    ("serviceBusQueueMessage", "namespace"),
    ("serviceBusTopicMessage", "namespace"),
)
DEFAULT_RETRY_INTERVAL = timedelta(seconds=30)
DEFAULT_RETRY_INTERVAL_FREE = timedelta(hours=1)  # Free collections allow no shorter one
DEFAULT_RETRY_COUNT = 4
# Exponential retries without a maximumInterval wait at most this long (Logic Apps' default).
DEFAULT_LONGEST_RETRY_WAIT = timedelta(days=1)


@dataclass(frozen=True)
class JobStatus:
    """What the service says of a job's runs (the API's `status`, system-owned)."""

    execution_count: int = 0
    failure_count: int = 0
    faulted_count: int = 0
    last_execution_time: datetime | None = None
    next_execution_time: datetime | None = None

    def to_wire(self) -> JsonObject:
        wire: JsonObject = {
            "executionCount": self.execution_count,
            "failureCount": self.failure_count,
            "faultedCount": self.faulted_count,
        }
        if self.last_execution_time is not None:
            wire["lastExecutionTime"] = iso(self.last_execution_time)
        if self.next_execution_time is not None:
            wire["nextExecutionTime"] = iso(self.next_execution_time)
        return wire

    @classmethod
    def from_wire(cls, wire: JsonObject) -> JobStatus:
        last, following = wire.get("lastExecutionTime"), wire.get("nextExecutionTime")
        return cls(
            execution_count=wire.get("executionCount", 0),
            failure_count=wire.get("failureCount", 0),
            faulted_count=wire.get("faultedCount", 0),
            last_execution_time=parse_iso(last) if last else None,
            next_execution_time=parse_iso(following) if following else None,
        )


@dataclass(frozen=True)
class Retries:
    """How often, and how long apart, a failed try is retried: the job's retryPolicy with its
    defaults applied (docs/behaviour.md#retry-policy), which the definition echoes only as sent."""

    count: int = 0
    interval: timedelta = timedelta(0)  # Exponential: the first wait, and the shortest
    maximum: timedelta | None = None  # Exponential only: the longest wait; None for Fixed

    @property
    def exponential(self) -> bool:
        return self.maximum is not None

    @classmethod
    def of(cls, policy: RetryPolicy | None, sku: SkuName) -> Retries:
        # Decision: no policy at all means Fixed with the defaults.
        if policy is not None and policy.retry_type is RetryType.NONE:
            return cls()
        policy = policy or RetryPolicy()
        default = DEFAULT_RETRY_INTERVAL_FREE if sku is SkuName.FREE else DEFAULT_RETRY_INTERVAL
        count = DEFAULT_RETRY_COUNT if policy.retry_count is None else policy.retry_count
        if policy.retry_type is not RetryType.EXPONENTIAL:
            return cls(count, policy.interval or default)
        # minimumInterval is Logic Apps' name for the first wait (the rules refuse both at odds).
        first = policy.interval or policy.minimum or default
        return cls(count, first, policy.maximum or max(DEFAULT_LONGEST_RETRY_WAIT, first))

    def to_wire(self) -> JsonObject:
        wire: JsonObject = {
            "count": self.count,
            "intervalSeconds": self.interval.total_seconds(),
        }
        if self.maximum is not None:
            wire["maximumSeconds"] = self.maximum.total_seconds()
        return wire

    @classmethod
    def from_wire(cls, wire: JsonObject) -> Retries:
        maximum = wire.get("maximumSeconds")
        return cls(
            wire["count"],
            timedelta(seconds=wire["intervalSeconds"]),
            None if maximum is None else timedelta(seconds=maximum),
        )


@dataclass(frozen=True)
class JobDocument:
    """A job as stored: its definition (wire JSON, secrets included) and all the service keeps."""

    definition: JsonObject
    defined_at: datetime
    retries: Retries = Retries()
    status: JobStatus = JobStatus()
    pending: tuple[Pending, ...] = ()
    occurrences: int = 0  # of this definition, passed (run or postponed): what `count` bounds
    history_count: int = 0  # entries written, so the clean-up reads only jobs with too many
    ended_at: datetime | None = None  # when it became Completed or Faulted
    region: str = ""  # its collection's location, which StorageQueue messages name
    # The history entry of the latest attempt, without its message: what the console shows as
    # a job's last run, with no history query per job.
    last_attempt: JsonObject | None = None
    # Why the state was last changed, as the client said (the classic API's `stateDetails`);
    # None when it said nothing. It belongs to that change: the next change of state replaces it.
    state_reason: str | None = None

    @classmethod
    def defined(
        cls, definition: JsonObject, defined_at: datetime, *, sku: SkuName = SkuName.STANDARD,
        region: str = "", previous: JobDocument | None = None, state_reason: str | None = None,
    ) -> JobDocument:  # fmt: skip
        """The document of a definition saved at `defined_at` in a collection of `sku`, waiting
        for its first occurrence if it is enabled. A new definition starts its schedule afresh;
        the counts of what already ran (`previous`, the document it replaces) stay, and so does
        the count of its history entries, which outlive the redefinition. `state_reason` is the
        reason sent with it (None: none was sent; see `reason_after`)."""
        status, history_count, last_attempt = JobStatus(), 0, None
        if previous is not None:
            status = replace(previous.status, next_execution_time=None)
            history_count, last_attempt = previous.history_count, previous.last_attempt
        retries = Retries.of(_retry_policy_of(definition), sku)
        state = JobState(definition["state"])
        document = cls(
            definition, defined_at, retries, status,
            history_count=history_count, region=region, last_attempt=last_attempt,
            state_reason=reason_after(previous, state, state_reason),
        )  # fmt: skip
        first = document.schedule.first if document.enabled else None
        return document.waiting_for([] if first is None else [Pending(Attempt(first), first)])

    @property
    def state(self) -> JobState:
        return JobState(self.definition["state"])

    @property
    def enabled(self) -> bool:
        return self.state is JobState.ENABLED

    @property
    def overlap(self) -> OverlapPolicy:
        """What an occurrence due while the previous one runs does; Wait when not set."""
        return OverlapPolicy(self.definition.get("overlapPolicy") or OverlapPolicy.WAIT.value)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @functools.cached_property
    def schedule(self) -> Occurrences:
        """The occurrences of the definition (parsed once per document: the executor asks often;
        `replace` makes a new document, with nothing cached)."""
        return occurrences_of(self.definition, self.defined_at)

    @property
    def run_nows_in_flight(self) -> int:
        """The run-nows accepted and not yet recorded (pending or running)."""
        return sum(1 for entry in self.pending if entry.attempt.run_now)

    @property
    def series_finished(self) -> bool:
        """Whether every occurrence the definition allows has passed."""
        return self.schedule.count_reached(self.occurrences)

    def with_state(self, state: JobState, reason: str | None = None) -> JobDocument:
        """The document in `state`, changed for `reason` (None: none was given)."""
        changed = replace(
            self,
            definition={**self.definition, "state": state.value},
            state_reason=reason_after(self, state, reason),
        )
        return changed.waiting_for(self.pending)

    @property
    def claimed_until(self) -> datetime | None:
        """When the earliest claim on one of its tries runs out (None: no try is claimed)."""
        return min((entry.claim.until for entry in self.pending if entry.claim), default=None)

    def waiting_for(self, pending: Iterable[Pending]) -> JobDocument:
        """The document waiting for `pending`, its nextExecutionTime following the schedule."""
        pending = tuple(pending)
        scheduled = [entry.due for entry in pending if not entry.attempt.run_now]
        following = min(scheduled) if scheduled and self.enabled else None
        status = replace(self.status, next_execution_time=following)
        return replace(self, status=status, pending=pending)

    def claimed(self, delivered: Attempt, claim: Claim) -> JobDocument:
        """The document with the delivered try claimed: written, etag-checked, before its target
        is called (with the write of a `Begin`, where there is one, so that it costs no request).
        """
        pending = tuple(
            replace(entry, claim=claim) if entry.attempt == delivered else entry
            for entry in self.pending
        )
        return replace(self, pending=pending)

    def expired(self, now: datetime) -> bool:
        """Whether it ended (Completed or Faulted) longer ago than history is kept."""
        return self.final and self.ended_at is not None and self.ended_at <= now - KEPT_FOR

    def public_properties(self) -> JsonObject:
        """What a client reads: the definition without secrets, and the status if it shows."""
        # As the real service answered: a disabled job that never ran has no status.
        ran = self.status.execution_count > 0 or self.status.last_execution_time is not None
        shown = self.state is not JobState.DISABLED or ran
        return public_properties(self.definition, self.status.to_wire() if shown else None)

    def to_wire(self) -> JsonObject:
        """The document as JSON, as storage keeps it."""
        stored: JsonObject = {
            "definition": self.definition,
            "status": self.status.to_wire(),
            "definedAt": iso(self.defined_at),
            "retries": self.retries.to_wire(),
            "occurrences": self.occurrences,
            "pending": [entry.to_wire() for entry in self.pending],
            "historyCount": self.history_count,
            "region": self.region,
        }
        if self.ended_at is not None:
            stored["endedAt"] = iso(self.ended_at)
        if self.last_attempt is not None:
            stored["lastAttempt"] = self.last_attempt
        if self.state_reason is not None:
            stored["stateReason"] = self.state_reason
        return stored

    @classmethod
    def from_wire(cls, stored: JsonObject) -> JobDocument:
        ended, retries = stored.get("endedAt"), stored.get("retries")
        definition = stored["definition"]
        return cls(
            definition=definition,
            defined_at=parse_iso(stored["definedAt"]),
            # Documents written before retries were kept apart spelled out the whole policy.
            retries=(
                Retries.from_wire(retries)
                if retries
                else Retries.of(_retry_policy_of(definition), SkuName.STANDARD)
            ),
            status=JobStatus.from_wire(stored["status"]),
            pending=tuple(Pending.from_wire(entry) for entry in stored.get("pending", ())),
            occurrences=stored.get("occurrences", 0),
            history_count=stored.get("historyCount", 0),
            ended_at=parse_iso(ended) if ended else None,
            region=stored.get("region", ""),
            last_attempt=stored.get("lastAttempt"),
            state_reason=stored.get("stateReason"),
        )


def reason_after(before: JobDocument | None, state: JobState, given: str | None) -> str | None:
    """The reason a job's state is `state` for, after a change that gave `given` (None: no
    reason given; empty: none, said explicitly). A change of state without a reason leaves
    none: the previous one explained a state the job is no longer in."""
    if given is not None:
        return given or None
    if before is not None and before.state is state:
        return before.state_reason
    return None


def stored_definition(properties: JobProperties) -> JsonObject:
    """The definition as kept: the client's, with the state it starts in and what its pfx says."""
    defined = properties.model_copy(
        update={"state": properties.state or JobState.ENABLED, "status": None}
    ).to_wire()
    _add_certificate_facts(defined["action"])
    if "errorAction" in defined["action"]:
        _add_certificate_facts(defined["action"]["errorAction"])
    return defined


def occurrences_of(definition: JsonObject, defined_at: datetime) -> Occurrences:
    """The occurrences of a stored definition saved at `defined_at`."""
    recurrence, start = definition.get("recurrence"), definition.get("startTime")
    return Occurrences(
        start_time=parse_iso(start) if start else None,
        recurrence=Recurrence.model_validate(recurrence) if recurrence else None,
        created_at=defined_at,
    )


def public_properties(definition: JsonObject, status: JsonObject | None) -> JsonObject:
    """What a client reads: the definition without its secret fields, the keys in its URIs and
    headers masked (docs/behaviour.md#secrets), and the status if given."""
    public = copy.deepcopy(definition)
    for action in (public["action"], public["action"].get("errorAction")):
        for holder, secret in _secret_places(action) if action else ():
            holder.pop(secret, None)
    public = redacted_definition(public)
    return public if status is None else {**public, "status": status}


def keeping_stored_secrets(properties: JobProperties, stored: JsonObject) -> JobProperties:
    """`properties` sent to replace the `stored` definition, with the masked values a read
    showed (`***`) put back from `stored`: a client that reads a job and writes it back keeps
    its keys. Secret fields that a read leaves out are not put back; the client sends them."""
    sent = properties.to_wire()
    restored = restored_definition(sent, stored)
    return properties if restored == sent else JobProperties.model_validate(restored)


def secrets_staying(stored: JsonObject, merged: Any) -> JsonObject:
    """The `stored` definition without the secrets of each action (main or errorAction) that
    `merged`, the stored one with a PATCH applied, sends to another place: what the PATCH is
    applied to again, so that a secret it does not send itself goes only where it came from
    (docs/behaviour.md#secrets). The secrets are the secret fields and the credential headers;
    an HTTP request's place is its endpoint (`same_endpoint`), a queue message's its storage
    account, a Service Bus message's its namespace."""
    kept = copy.deepcopy(stored)
    action = kept.get("action")
    after = merged.get("action") if isinstance(merged, dict) else None
    if not isinstance(action, dict):
        return kept
    after_error = after.get("errorAction") if isinstance(after, dict) else None
    for before, now in ((action, after), (action.get("errorAction"), after_error)):
        if isinstance(before, dict) and not _goes_where_it_went(before, now):
            _drop_secrets(before)
    return kept


def secret_values(definition: JsonObject) -> set[str]:
    """Every secret value a stored definition holds, in the forms a target could echo back:
    the secret fields, a Basic authentication's header value, the keys in URIs and headers.
    What history and the logs keep of an action's outcome has them masked."""
    values: set[str] = set()
    action = definition.get("action")
    for each in (action, action.get("errorAction")) if isinstance(action, dict) else ():
        if not isinstance(each, dict):
            continue
        values |= {
            holder[secret]
            for holder, secret in _secret_places(each)
            if isinstance(holder.get(secret), str)
        }
        request = each.get("request")
        if isinstance(request, dict):
            values |= request_secret_values(request)
            values |= _basic_credentials(request.get("authentication"))
    return values


def _goes_where_it_went(before: JsonObject, after: Any) -> bool:
    if not isinstance(after, dict):
        return False
    request, request_after = before.get("request"), after.get("request")
    if isinstance(request, dict):
        uri = request.get("uri")
        uri_after = request_after.get("uri") if isinstance(request_after, dict) else None
        if not (isinstance(uri, str) and isinstance(uri_after, str)):
            return False
        if not same_endpoint(uri, uri_after):
            return False
    for message, place in _MESSAGE_DESTINATIONS:
        sent = before.get(message)
        if not isinstance(sent, dict):
            continue
        sent_after = after.get(message)
        where = sent_after.get(place) if isinstance(sent_after, dict) else None
        if not isinstance(where, str) or where.casefold() != str(sent.get(place)).casefold():
            return False
    return True


def _drop_secrets(action: JsonObject) -> None:
    for holder, secret in _secret_places(action):
        holder.pop(secret, None)
    request = action.get("request")
    headers = request.get("headers") if isinstance(request, dict) else None
    if isinstance(headers, dict):
        for name in [name for name in headers if is_secret_header(name)]:
            del headers[name]


def _secret_places(action: JsonObject) -> Iterator[tuple[JsonObject, str]]:
    """Each (object, name) of an action where a secret field may be (the object may be empty)."""
    for *place, secret in SECRETS:
        holder = action
        for step in place:
            inner = holder.get(step)
            holder = inner if isinstance(inner, dict) else {}
        yield holder, secret


def _basic_credentials(authentication: Any) -> set[str]:
    """A Basic authentication's `Authorization` value as sent (base64 of `user:password`)."""
    if not isinstance(authentication, dict):
        return set()
    user, password = authentication.get("username"), authentication.get("password")
    if authentication.get("type") != HttpAuthenticationType.BASIC.value:
        return set()
    if not isinstance(user, str) or not isinstance(password, str):
        return set()
    return {base64.b64encode(f"{user}:{password}".encode()).decode()}


def _retry_policy_of(definition: JsonObject) -> RetryPolicy | None:
    policy = definition["action"].get("retryPolicy")
    return None if policy is None else RetryPolicy.model_validate(policy)


def _add_certificate_facts(action: JsonObject) -> None:
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
        "certificateExpiration": facts.expires,
    }
    authentication.pop("certificateExpirationDate", None)
