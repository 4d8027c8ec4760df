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

import functools
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import NotRequired, TypedDict

from shared.domain.attempts import Attempt, Claim, Pending
from shared.domain.certificates import read_pfx
from shared.domain.collection import SkuName
from shared.domain.history import KEPT_FOR, HistoryProperties
from shared.domain.job_definition import (
    FINAL_STATES,
    AnyAction,
    HttpAuthenticationType,
    JobProperties,
    JobState,
    OverlapPolicy,
    RetryPolicy,
    RetryType,
)
from shared.domain.job_secrets import public_properties
from shared.domain.schedule.occurrences import Occurrences
from shared.domain.wire import JsonObject, iso

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

    def to_wire(self) -> StatusWire:
        """The status as the API shows it and storage keeps it."""
        wire: StatusWire = {
            "executionCount": self.execution_count,
            "failureCount": self.failure_count,
            "faultedCount": self.faulted_count,
        }
        if self.last_execution_time is not None:
            wire["lastExecutionTime"] = iso(self.last_execution_time)
        if self.next_execution_time is not None:
            wire["nextExecutionTime"] = iso(self.next_execution_time)
        return wire


class StatusWire(TypedDict):
    """A job's status on the wire."""

    executionCount: int
    failureCount: int
    faultedCount: int
    lastExecutionTime: NotRequired[str]
    nextExecutionTime: NotRequired[str]


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


@dataclass(frozen=True)
class JobDocument:
    """A job as stored: its definition (secrets included) and all the service keeps."""

    # As the client sent it, with the state it is in and the facts its certificate's pfx gives
    # (`stored_properties`); validated where it came in, and again where storage reads it.
    properties: JobProperties
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
    last_attempt: HistoryProperties | None = None
    # Why the state was last changed, as the client said (the classic API's `stateDetails`);
    # None when it said nothing. It belongs to that change: the next change of state replaces it.
    state_reason: str | None = None

    @classmethod
    def defined(
        cls, properties: JobProperties, defined_at: datetime, *, sku: SkuName = SkuName.STANDARD,
        region: str = "", previous: JobDocument | None = None, state_reason: str | None = None,
    ) -> JobDocument:  # fmt: skip
        """The document of a stored definition (`stored_properties`) saved at `defined_at` in a
        collection of `sku`, waiting for its first occurrence if it is enabled. A new definition
        starts its schedule afresh; the counts of what already ran (`previous`, the document it
        replaces) stay, and so does the count of its history entries, which outlive the
        redefinition. `state_reason` is the reason sent with it (None: none was sent; see
        `reason_after`)."""
        status, history_count, last_attempt = JobStatus(), 0, None
        if previous is not None:
            status = replace(previous.status, next_execution_time=None)
            history_count, last_attempt = previous.history_count, previous.last_attempt
        document = cls(
            properties, defined_at, Retries.of(properties.action.retry_policy, sku), status,
            history_count=history_count, region=region, last_attempt=last_attempt,
            state_reason=reason_after(previous, properties.state or JobState.ENABLED, state_reason),
        )  # fmt: skip
        first = document.schedule.first if document.enabled else None
        return document.waiting_for([] if first is None else [Pending(Attempt(first), first)])

    @property
    def state(self) -> JobState:
        return self.properties.state or JobState.ENABLED

    @property
    def enabled(self) -> bool:
        return self.state is JobState.ENABLED

    @property
    def overlap(self) -> OverlapPolicy:
        """What an occurrence due while the previous one runs does; Wait when not set."""
        return self.properties.overlap_policy or OverlapPolicy.WAIT

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @functools.cached_property
    def schedule(self) -> Occurrences:
        """The occurrences of the definition (built once per document: the executor asks often;
        `replace` makes a new document, with nothing cached)."""
        return occurrences_of(self.properties, self.defined_at)

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
            properties=self.properties.model_copy(update={"state": state}),
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
        public = public_properties(self.properties)
        return {**public, "status": self.status.to_wire()} if shown else public


def reason_after(before: JobDocument | None, state: JobState, given: str | None) -> str | None:
    """The reason a job's state is `state` for, after a change that gave `given` (None: no
    reason given; empty: none, said explicitly). A change of state without a reason leaves
    none: the previous one explained a state the job is no longer in."""
    if given is not None:
        return given or None
    if before is not None and before.state is state:
        return before.state_reason
    return None


def stored_properties(properties: JobProperties) -> JobProperties:
    """The definition as kept: the client's, with the state it starts in and what its pfx says."""
    action = properties.action
    error_action = action.error_action
    if error_action is not None:
        action = action.model_copy(update={"error_action": _with_certificate_facts(error_action)})
    return properties.model_copy(
        update={
            "state": properties.state or JobState.ENABLED,
            "status": None,
            "action": _with_certificate_facts(action),
        }
    )


def occurrences_of(properties: JobProperties, defined_at: datetime) -> Occurrences:
    """The occurrences of a definition saved at `defined_at`."""
    return Occurrences(
        start_time=properties.starts_at, recurrence=properties.recurrence, created_at=defined_at
    )


def _with_certificate_facts(action: AnyAction) -> AnyAction:
    """`action` with what its client certificate's pfx says (thumbprint, subject, expiry), the
    read-only fields a client reads back; as sent when it has no client certificate."""
    request = action.request
    authentication = request.authentication if request is not None else None
    if (
        request is None
        or authentication is None
        or authentication.type is not HttpAuthenticationType.CLIENT_CERTIFICATE
        or authentication.pfx is None
    ):
        return action
    facts = read_pfx(authentication.pfx, authentication.password)
    read = authentication.model_copy(
        update={
            "certificate_thumbprint": facts.thumbprint,
            "certificate_subject_name": facts.subject,
            "certificate_expiration": facts.expires,
            "certificate_expiration_date": None,
        }
    )
    return action.model_copy(
        update={"request": request.model_copy(update={"authentication": read})}
    )
