"""A job's definition on the wire (docs/behaviour.md#jobs): actions, authentication, retry policy.

The models read every shape the 2016-03-01 API allows; `job_rules` checks the rules that join
several values, and `job_document` turns a definition into what is stored and what a client reads
back (secrets never among it).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

import isodate
from pydantic import BeforeValidator, Field, StrictBool, field_validator
from pydantic_core import PydanticCustomError

from shared.domain.schedule.recurrence import Recurrence
from shared.domain.wire import Instant, WireEnum, WireModel


def read_duration(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("iso_duration", "must be an ISO 8601 duration such as 'PT30S'")
    try:
        duration = isodate.parse_duration(value.strip())
    except (isodate.ISO8601Error, ValueError, OverflowError):
        raise PydanticCustomError(
            "iso_duration",
            "'{value}' is not an ISO 8601 duration such as 'PT30S'",
            {"value": value[:40]},
        ) from None
    if isinstance(duration, timedelta):
        return duration
    try:  # months or years (an isodate.Duration): as Azure does, 30 and 365 days
        days = 30 * int(duration.months) + 365 * int(duration.years)
        rest: timedelta = duration.tdelta
        return timedelta(days=days) + rest
    except OverflowError:
        raise PydanticCustomError(
            "iso_duration", "'{value}' is longer than any duration allowed", {"value": value[:40]}
        ) from None


Duration = Annotated[timedelta, BeforeValidator(read_duration)]
"""An ISO 8601 duration (`PT30S`, `P1D`), read as a timedelta."""


class JobState(WireEnum):
    ENABLED = "Enabled"
    DISABLED = "Disabled"
    COMPLETED = "Completed"
    FAULTED = "Faulted"


FINAL_STATES = (JobState.COMPLETED, JobState.FAULTED)


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


class HttpAuthentication(WireModel):
    """Outbound authentication of an HTTP action; which fields apply depends on `type`.

    The certificate fields are read-only: the service fills them in from the pfx.
    """

    type: HttpAuthenticationType
    # Basic
    username: str | None = None
    password: str | None = None  # also the pfx password
    # ClientCertificate
    pfx: str | None = None
    certificate_thumbprint: str | None = None
    certificate_expiration_date: str | None = None
    certificate_subject_name: str | None = None
    # ActiveDirectoryOAuth
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
    NOT_SPECIFIED = "NotSpecified"
    SHARED_ACCESS_KEY = "SharedAccessKey"


class ServiceBusAuthentication(WireModel):
    sas_key: str | None = None
    sas_key_name: str | None = None
    type: ServiceBusAuthenticationType | None = None


class TransportType(WireEnum):
    NOT_SPECIFIED = "NotSpecified"
    NET_MESSAGING = "NetMessaging"
    AMQP = "AMQP"


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
    time_to_live: Duration | None = None
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
    NONE = "None"
    FIXED = "Fixed"


class RetryPolicy(WireModel):
    retry_type: RetryType | None = None
    retry_interval: Duration | None = None
    retry_count: Annotated[int, Field(strict=True, ge=0)] | None = None


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


class JobProperties(WireModel):
    start_time: Instant | None = None
    action: Action
    recurrence: Recurrence | None = None
    state: JobState | None = None
    status: dict[str, Any] | None = None
    """System-owned: accepted so that a GET's body can be sent back, and ignored."""

    @field_validator("state", mode="after")
    @classmethod
    def _settable_state(cls, state: JobState | None) -> JobState | None:
        if state in FINAL_STATES:
            raise PydanticCustomError(
                "job_state",
                "only Enabled or Disabled can be set; {state} is set by the service",
                {"state": state.value if state else ""},
            )
        return state


class JobBody(WireModel):
    """A job as a client sends it with PUT. `id`, `type` and `name` are read-only and ignored."""

    id: str | None = None
    type: str | None = None
    name: str | None = None
    properties: JobProperties
