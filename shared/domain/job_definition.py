"""A job's definition on the wire (docs/behaviour.md#jobs): actions, authentication, retry policy.

The models read every shape the 2016-03-01 API allows; `job_rules` checks the rules that join
several values, and `job_document` turns a definition into what is stored and what a client reads
back (secrets never among it).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated, Any, TypeVar

import isodate
from pydantic import BeforeValidator, Field, StrictBool, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from shared.domain.schedule.recurrence import Recurrence
from shared.domain.wire import Instant, SentInstant, WireEnum, WireModel, parse_iso

# A .NET TimeSpan as the .NET client and PowerShell write it: [d.]hh:mm[:ss[.fffffff]]. ASCII
# digits only: `\d` alone would take any script's digits, which int() reads as numbers too.
_TIMESPAN = re.compile(
    r"(?:(?P<days>\d+)\.)?(?P<hours>\d{1,2}):(?P<minutes>\d{1,2})"
    r"(?::(?P<seconds>\d{1,2})(?:\.(?P<fraction>\d{1,7}))?)?",
    re.ASCII,
)
# A fraction of a year or a month (P0.5Y, P1,5M), which isodate would silently drop.
_FRACTIONAL_YEARS_OR_MONTHS = re.compile(r"P[^T]*?[.,][0-9]*[YM]", re.IGNORECASE)
_BOTH_FORMS = "an ISO 8601 duration such as 'PT30S' or a TimeSpan such as '00:00:30'"


def read_duration(value: Any) -> timedelta:
    """An ISO 8601 duration (`PT30S`) or a .NET TimeSpan (`00:00:30`) as a timedelta."""
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("duration", f"must be {_BOTH_FORMS}")
    timespan = _TIMESPAN.fullmatch(value.strip())
    if timespan:
        return _timespan(value, timespan)
    if _FRACTIONAL_YEARS_OR_MONTHS.match(value.strip()):
        raise PydanticCustomError(
            "duration",
            "'{value}' has a fraction of a year or a month, which have no fixed length; "
            "give whole years and months, or the span in days (P182D), hours or seconds",
            {"value": value[:40]},
        )
    try:
        duration = isodate.parse_duration(value.strip())
    except (isodate.ISO8601Error, ValueError, OverflowError):
        raise PydanticCustomError(
            "duration",
            "'{value}' is not " + _BOTH_FORMS,
            {"value": value[:40]},
        ) from None
    if isinstance(duration, timedelta):
        return duration
    try:  # months or years (an isodate.Duration): as Azure does, 30 and 365 days
        days = 30 * int(duration.months) + 365 * int(duration.years)
        rest: timedelta = duration.tdelta
        return timedelta(days=days) + rest
    except OverflowError:
        raise _too_long(value) from None


def _timespan(value: str, parts: re.Match[str]) -> timedelta:
    days, hours, minutes, seconds, fraction = parts.group(
        "days", "hours", "minutes", "seconds", "fraction"
    )
    if int(hours) > 23 or int(minutes) > 59 or int(seconds or 0) > 59:
        raise PydanticCustomError(
            "duration",
            "'{value}' is not a TimeSpan: hours go up to 23, minutes and seconds up to 59",
            {"value": value[:40]},
        )
    try:
        return timedelta(
            days=int(days or 0), hours=int(hours), minutes=int(minutes), seconds=int(seconds or 0),
            microseconds=int((fraction or "0").ljust(7, "0")) / 10,
        )  # fmt: skip
    except OverflowError:
        raise _too_long(value) from None


def _too_long(value: str) -> PydanticCustomError:
    return PydanticCustomError(
        "duration", "'{value}' is longer than any duration allowed", {"value": value[:40]}
    )


def _checked_duration(value: Any) -> Any:
    read_duration(value)
    return value


# Both forms as one JSON Schema pattern, for the OpenAPI document (a sketch of the rules: the
# parsers above have the last word, on a fraction of a year for one).
_DURATION_PATTERN = (
    r"^(P([0-9]+Y)?([0-9]+M)?([0-9]+W)?([0-9]+D)?(T([0-9]+H)?([0-9]+M)?([0-9]+([.,][0-9]+)?S)?)?"
    r"|([0-9]+\.)?([01]?[0-9]|2[0-3]):[0-5]?[0-9](:[0-5]?[0-9](\.[0-9]{1,7})?)?)$"
)
SentDuration = Annotated[
    str,
    BeforeValidator(_checked_duration),
    WithJsonSchema({"type": "string", "pattern": _DURATION_PATTERN}),
]
"""A duration in either form, kept as sent: the real service echoed a TimeSpan as a TimeSpan.
Read it with `read_duration`."""


class JobState(WireEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"
    COMPLETED = "completed"
    FAULTED = "faulted"


FINAL_STATES = (JobState.COMPLETED, JobState.FAULTED)


def settable_state(state: JobState | None) -> JobState | None:
    """A state a client may set (a pydantic validator): enabled or disabled, as the final ones
    are the service's to set."""
    if state in FINAL_STATES:
        raise PydanticCustomError(
            "job_state",
            "only enabled or disabled can be set; {state} is set by the service",
            {"state": state.value if state else ""},
        )
    return state


class HistoryStatus(WireEnum):
    COMPLETED = "Completed"
    FAILED = "Failed"
    POSTPONED = "Postponed"


class ActionName(WireEnum):
    MAIN_ACTION = "MainAction"
    ERROR_ACTION = "ErrorAction"


class ActionType(WireEnum):
    HTTP = "Http"
    HTTPS = "Https"
    STORAGE_QUEUE = "StorageQueue"
    SERVICE_BUS_QUEUE = "ServiceBusQueue"
    SERVICE_BUS_TOPIC = "ServiceBusTopic"


class HttpAuthenticationType(WireEnum):
    NOT_SPECIFIED = "NotSpecified"
    CLIENT_CERTIFICATE = "ClientCertificate"
    ACTIVE_DIRECTORY_OAUTH = "ActiveDirectoryOAuth"
    BASIC = "Basic"
    # An extension, spelled as Logic Apps spells it: a token of the app's own managed identity.
    MANAGED_SERVICE_IDENTITY = "ManagedServiceIdentity"


class HttpAuthentication(WireModel):
    """Outbound authentication of an HTTP action; which fields apply depends on `type`.

    The certificate fields are read-only: the service fills them in from the pfx, and calls the
    expiry `certificateExpiration` as the real service did (the published API description's
    `certificateExpirationDate` is accepted and ignored too). ManagedServiceIdentity (an
    extension) takes `audience` and, for a user-assigned identity, its `clientId`.
    """

    type: HttpAuthenticationType
    # Basic
    username: str | None = None
    password: str | None = None  # also the pfx password
    # ClientCertificate
    pfx: str | None = None
    certificate_thumbprint: str | None = None
    certificate_expiration: str | None = None
    certificate_expiration_date: str | None = None  # the name in the published API description
    certificate_subject_name: str | None = None
    # ActiveDirectoryOAuth; ManagedServiceIdentity takes audience and, optionally, clientId
    tenant: str | None = None
    audience: str | None = None
    client_id: str | None = None
    secret: str | None = None


class HttpActionRequest(WireModel):
    uri: str
    method: Annotated[str, Field(min_length=1, max_length=16)]
    body: str | None = None
    headers: dict[str, str] | None = None
    authentication: HttpAuthentication | None = None


class StorageQueueMessage(WireModel):
    storage_account: str
    queue_name: str
    sas_token: str
    message: str


class ServiceBusAuthenticationType(WireEnum):
    NOT_SPECIFIED = "notSpecified"
    SHARED_ACCESS_KEY = "sharedAccessKey"


class ServiceBusAuthentication(WireModel):
    sas_key: str | None = None
    sas_key_name: str | None = None
    type: ServiceBusAuthenticationType | None = None


class TransportType(WireEnum):
    NOT_SPECIFIED = "notSpecified"
    NET_MESSAGING = "netMessaging"
    AMQP = "amqp"


class BrokeredMessageProperties(WireModel):
    content_type: str | None = None
    correlation_id: str | None = None
    force_persistence: StrictBool | None = None
    label: str | None = None
    message_id: str | None = None
    partition_key: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    scheduled_enqueue_time_utc: Instant | None = None
    session_id: str | None = None
    time_to_live: SentDuration | None = None
    to: str | None = None
    via_partition_key: str | None = None


class ServiceBusActionMessage(WireModel):
    authentication: ServiceBusAuthentication | None = None
    brokered_message_properties: BrokeredMessageProperties | None = None
    custom_message_properties: dict[str, str] | None = None
    message: str | None = None
    namespace: str | None = None
    transport_type: TransportType | None = None


class ServiceBusQueueMessage(ServiceBusActionMessage):
    queue_name: str | None = None


class ServiceBusTopicMessage(ServiceBusActionMessage):
    topic_path: str | None = None


class RetryType(WireEnum):
    NONE = "none"
    FIXED = "fixed"
    # An extension (docs/behaviour.md#exponential-retries), spelled like the recorded values.
    EXPONENTIAL = "exponential"


class RetryPolicy(WireModel):
    """How a failed try is retried. `maximumInterval` and `minimumInterval` are extensions that
    go with retryType exponential only (docs/behaviour.md#exponential-retries)."""

    retry_type: RetryType | None = None
    retry_interval: SentDuration | None = None
    retry_count: Annotated[int, Field(strict=True, ge=0)] | None = None
    maximum_interval: Annotated[
        SentDuration | None,
        Field(description="Exponential only: the longest wait between tries (default: 1 day)."),
    ] = None
    minimum_interval: Annotated[
        SentDuration | None,
        Field(description="Exponential only: Logic Apps' name for the first and shortest wait."),
    ] = None

    @property
    def interval(self) -> timedelta | None:
        return read_duration(self.retry_interval) if self.retry_interval else None

    @property
    def maximum(self) -> timedelta | None:
        return read_duration(self.maximum_interval) if self.maximum_interval else None

    @property
    def minimum(self) -> timedelta | None:
        return read_duration(self.minimum_interval) if self.minimum_interval else None


class ErrorAction(WireModel):
    """What runs when the main action has failed and its retries are spent."""

    type: ActionType
    request: HttpActionRequest | None = None
    queue_message: StorageQueueMessage | None = None
    service_bus_queue_message: ServiceBusQueueMessage | None = None
    service_bus_topic_message: ServiceBusTopicMessage | None = None
    retry_policy: RetryPolicy | None = None


class Action(ErrorAction):
    error_action: ErrorAction | None = None


# A function that takes an action or its errorAction gives back the same kind.
AnyAction = TypeVar("AnyAction", bound=ErrorAction)


class OverlapPolicy(WireEnum):
    """What happens to an occurrence that falls due while the job's previous one is still
    running or retrying (an extension: docs/behaviour.md#overlapping-occurrences)."""

    WAIT = "Wait"  # run it when the previous one is over; later ones meanwhile coalesce
    SKIP = "Skip"  # do not run it: history shows it Postponed, with the reason
    ALLOW = "Allow"  # run it on time, alongside


class JobProperties(WireModel):
    start_time: SentInstant | None = None
    action: Action
    recurrence: Recurrence | None = None
    state: JobState | None = None
    overlap_policy: Annotated[
        OverlapPolicy | None,
        Field(
            description="An extension: what happens to an occurrence that falls due while the "
            "previous one is still running or retrying. Wait (the default), Skip or Allow."
        ),
    ] = None
    status: dict[str, Any] | None = None
    """System-owned: accepted so that a GET's body can be sent back, and ignored."""

    @property
    def starts_at(self) -> datetime | None:
        return parse_iso(self.start_time) if self.start_time else None

    _settable_state = field_validator("state", mode="after")(settable_state)


class JobBody(WireModel):
    """A job as a client sends it with PUT. `id`, `type` and `name` are read-only and ignored."""

    id: str | None = None
    type: str | None = None
    name: str | None = None
    properties: JobProperties
