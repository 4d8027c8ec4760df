"""The rules a job definition obeys beyond the shape of each value (docs/behaviour.md#limits).

`definition_problems` lists what is invalid (a 400, every problem named by its field);
`recurrence_conflict` says when a job recurs more often than its collection's quota (a 409);
the job-count quota is kept by the store, in the same transaction that adds a job. A retry
policy's rules are in `retry_rules`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from shared.domain.audiences import audience_refusal
from shared.domain.certificates import UnreadableCertificate, read_pfx
from shared.domain.collection import MaxRecurrence, Quota, SkuName
from shared.domain.job_definition import (
    ActionType,
    ErrorAction,
    HttpAuthentication,
    HttpAuthenticationType,
    JobProperties,
    ServiceBusActionMessage,
    StorageQueueMessage,
    read_duration,
)
from shared.domain.problems import FieldError
from shared.domain.retry_rules import retry_problems, spoken
from shared.domain.schedule.occurrences import Occurrences
from shared.domain.schedule.recurrence import Frequency, timing_problems
from shared.domain.sendable import (
    header_name_problem,
    header_value_problem,
    member_path,
    method_problem,
    unencodable_text,
    uri_problem,
)

LARGEST_JOB = 16 * 1024  # characters of the serialized definition
LONGEST_URL = 2048
MOST_HEADERS = 50
LARGEST_HEADERS = 4096  # characters of all names and values together
LARGEST_BODY = 8192
# Azure's naming rules. They also keep these names from steering a request to any host but one
# of the configured storage and Service Bus domains.
STORAGE_ACCOUNT = re.compile(r"[A-Za-z0-9]{3,24}")  # lower case in Azure; DNS ignores case
QUEUE_NAME = re.compile(r"(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9-]{4,48}[A-Za-z0-9]")
ENTITY_PATH = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._/-]{0,258}[A-Za-z0-9_])?")
# Characters XML 1.0 cannot carry, even escaped: a StorageQueue message travels inside XML.
NOT_IN_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# A message's time to live travels as milliseconds in an AMQP uint: a longer one (.NET's
# TimeSpan.MaxValue among them) failed to encode on every run.
LONGEST_MESSAGE_LIFE = timedelta(milliseconds=2**32 - 1)
LONGEST_MESSAGE_PROPERTY = 128  # Service Bus: messageId, sessionId, partitionKey and the like
_LIMITED_PROPERTIES = ("messageId", "sessionId", "partitionKey", "replyToSessionId",
                       "viaPartitionKey")  # fmt: skip
GUID = re.compile(r"[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")
# What a ManagedServiceIdentity authentication may hold; the other fields belong to other types.
MANAGED_IDENTITY_FIELDS = ("type", "audience", "clientId")
_SPAN_OF = {
    Frequency.MINUTE: timedelta(minutes=1),
    Frequency.HOUR: timedelta(hours=1),
    Frequency.DAY: timedelta(days=1),
    Frequency.WEEK: timedelta(weeks=1),
    Frequency.MONTH: timedelta(days=28),  # the shortest month: a monthly job is never "too often"
    Frequency.YEAR: timedelta(days=365),
}


def definition_problems(
    properties: JobProperties, *, sku: SkuName, now: datetime
) -> list[FieldError]:
    """Every rule the definition breaks, each naming its field as a JSON path."""
    problems = []
    size = len(json.dumps(properties.to_wire(), separators=(",", ":")))
    if size > LARGEST_JOB:
        problems.append(
            FieldError(
                "properties",
                f"the job definition is {size} characters; at most {LARGEST_JOB} are allowed",
            )
        )
    timing = timing_problems(properties.starts_at, properties.recurrence, now)
    problems += [FieldError(f"properties.{problem.field}", problem.problem) for problem in timing]
    if not timing:
        problems += _never_occurring(properties, now)
    action = properties.action
    problems += _action_problems(action, "properties.action", sku, now)
    if action.error_action is not None:
        problems += _action_problems(action.error_action, "properties.action.errorAction", sku, now)
    # Every text an action sends must encode as UTF-8, secrets and message properties included;
    # a field already refused for it (a header value, the URI) is not named twice. The action is
    # dumped as Python values: a JSON dump would have replaced the names UTF-8 cannot encode.
    as_sent = action.model_dump(by_alias=True, exclude_none=True)
    named = {problem.field for problem in problems}
    problems += [
        problem
        for problem in unencodable_text(as_sent, "properties.action")
        if problem.field not in named
    ]
    return problems


def _never_occurring(properties: JobProperties, now: datetime) -> list[FieldError]:
    """A schedule that selects no day at all: a job that would never run, and whose every next
    occurrence would be looked for up to the end of the calendar."""
    recurrence = properties.recurrence
    if recurrence is None or recurrence.schedule is None:
        return []
    if not Occurrences(properties.starts_at, recurrence, now).never_match:
        return []
    schedule = recurrence.schedule
    selected = " and ".join(
        f"among its {name}"
        for name, values in (
            ("monthDays", schedule.month_days),
            ("monthlyOccurrences", schedule.monthly_occurrences),
        )
        if values
    )
    every = "every month" if recurrence.interval == 1 else f"every {recurrence.interval} months"
    return [
        FieldError(
            "properties.recurrence.schedule",
            f"never occurs: no month the recurrence reaches ({every} from its start) has a day "
            f"{selected}",
        )
    ]


def recurrence_conflict(occurrences: Occurrences, quota: Quota) -> str | None:
    """Why the job recurs more often than the collection's quota allows, or None."""
    if quota.max_recurrence is None:
        return None
    allowed = span_of(quota.max_recurrence)
    if allowed <= timedelta(minutes=1):
        return None  # no grid runs more often than once a minute
    gap = occurrences.shortest_gap()
    if gap is None or gap >= allowed:
        return None
    return (
        f"The job would run every {spoken(gap)} at its most frequent, more often than the "
        f"job collection's quota maxRecurrence allows (once every {spoken(allowed)})."
    )


def span_of(recurrence: MaxRecurrence) -> timedelta:
    return _SPAN_OF[recurrence.frequency] * recurrence.interval


def _action_problems(
    action: ErrorAction, path: str, sku: SkuName, now: datetime
) -> list[FieldError]:
    wanted = {
        ActionType.HTTP: "request",
        ActionType.HTTPS: "request",
        ActionType.STORAGE_QUEUE: "queueMessage",
        ActionType.SERVICE_BUS_QUEUE: "serviceBusQueueMessage",
        ActionType.SERVICE_BUS_TOPIC: "serviceBusTopicMessage",
    }[action.type]
    present = {
        "request": action.request,
        "queueMessage": action.queue_message,
        "serviceBusQueueMessage": action.service_bus_queue_message,
        "serviceBusTopicMessage": action.service_bus_topic_message,
    }
    problems = [
        FieldError(
            f"{path}.{name}", f"does not go with action type {action.type.value}; it needs {wanted}"
        )
        for name, value in present.items()
        if value is not None and name != wanted
    ]
    message = present[wanted]
    if message is None:
        problems.append(
            FieldError(f"{path}.{wanted}", f"is required for action type {action.type.value}")
        )
    elif wanted == "request":
        problems += _request_problems(action, f"{path}.request")
    elif isinstance(message, StorageQueueMessage):
        problems += _storage_queue_problems(message, f"{path}.queueMessage")
    elif isinstance(message, ServiceBusActionMessage):
        entity = "queueName" if wanted == "serviceBusQueueMessage" else "topicPath"
        problems += _service_bus_problems(message, f"{path}.{wanted}", entity)
    if action.retry_policy is not None:
        problems += retry_problems(action.retry_policy, f"{path}.retryPolicy", sku, now)
    return problems


def _request_problems(action: ErrorAction, path: str) -> list[FieldError]:
    request = action.request
    assert request is not None
    problems = []
    schemes = ("https",) if action.type is ActionType.HTTPS else ("http", "https")
    unusable_uri = uri_problem(request.uri, schemes)
    if unusable_uri is not None:
        problems.append(FieldError(f"{path}.uri", unusable_uri))
    if len(request.uri) > LONGEST_URL:
        problems.append(
            FieldError(
                f"{path}.uri",
                f"is {len(request.uri)} characters; at most {LONGEST_URL} are allowed",
            )
        )
    unusable_method = method_problem(request.method)
    if unusable_method is not None:
        problems.append(FieldError(f"{path}.method", unusable_method))
    headers = request.headers or {}
    for name, value in headers.items():
        problems += [
            FieldError(member_path(f"{path}.headers", name), problem)
            for problem in (header_name_problem(name), header_value_problem(value))
            if problem is not None
        ]
    if len(headers) > MOST_HEADERS:
        problems.append(
            FieldError(
                f"{path}.headers", f"has {len(headers)} headers; at most {MOST_HEADERS} are allowed"
            )
        )
    header_size = sum(len(name) + len(value) for name, value in headers.items())
    if header_size > LARGEST_HEADERS:
        problems.append(
            FieldError(
                f"{path}.headers",
                f"are {header_size} characters together; at most {LARGEST_HEADERS} are allowed",
            )
        )
    if request.body is not None and len(request.body) > LARGEST_BODY:
        problems.append(
            FieldError(
                f"{path}.body",
                f"is {len(request.body)} characters; at most {LARGEST_BODY} are allowed",
            )
        )
    authentication = request.authentication
    if authentication is not None:
        required = {
            HttpAuthenticationType.BASIC: ("username", "password"),
            HttpAuthenticationType.CLIENT_CERTIFICATE: ("pfx",),
            HttpAuthenticationType.ACTIVE_DIRECTORY_OAUTH: (
                "tenant",
                "audience",
                "clientId",
                "secret",
            ),
            HttpAuthenticationType.MANAGED_SERVICE_IDENTITY: ("audience",),
            HttpAuthenticationType.NOT_SPECIFIED: (),
        }[authentication.type]
        given = authentication.to_wire()
        problems += [
            FieldError(
                f"{path}.authentication.{name}",
                f"is required for {authentication.type.value} authentication",
            )
            for name in required
            if not given.get(name)
        ]
        if authentication.type is HttpAuthenticationType.CLIENT_CERTIFICATE and authentication.pfx:
            try:
                read_pfx(authentication.pfx, authentication.password)
            except UnreadableCertificate as unreadable:
                problems.append(FieldError(f"{path}.authentication.pfx", str(unreadable)))
        if authentication.type is HttpAuthenticationType.MANAGED_SERVICE_IDENTITY:
            problems += _managed_identity_problems(
                authentication, f"{path}.authentication", request.uri
            )
    return problems


def _managed_identity_problems(
    authentication: HttpAuthentication, path: str, uri: str
) -> list[FieldError]:
    given = authentication.to_wire()
    # A secret or a tenant sent along would suggest it is used; it is not, so it is refused.
    problems = [
        FieldError(
            f"{path}.{name}",
            "does not go with ManagedServiceIdentity authentication, "
            "which takes only audience and clientId",
        )
        for name in given
        if name not in MANAGED_IDENTITY_FIELDS
    ]
    audience = authentication.audience
    # Not quoted: what stands in a malformed audience may be a key (`https://u:pw@h/?sig=`).
    if audience and not _is_audience(audience):
        problems.append(
            FieldError(
                f"{path}.audience",
                "is neither an absolute https URI without user-info, query or fragment "
                "(https://management.azure.com/) nor an app ID URI (api://...)",
            )
        )
    elif audience:
        refusal = audience_refusal(audience, uri)
        if refusal is not None:
            problems.append(FieldError(f"{path}.audience", refusal))
    client_id = authentication.client_id
    if client_id is not None and not GUID.fullmatch(client_id):
        problems.append(
            FieldError(
                f"{path}.clientId",
                f"'{client_id[:100]}' is not a GUID: it is the client id of a user-assigned "
                "managed identity, such as 0e6a6a6b-3c0f-4a5e-9f5d-2a7c3b1d9e8f",
            )
        )
    return problems


def _is_audience(audience: str) -> bool:
    """An absolute https URI with a host, or an app ID URI, as a token's resource."""
    if audience != audience.strip() or any(ord(char) < 0x21 for char in audience):
        return False
    try:
        parts = urlsplit(audience)
    except ValueError:
        return False
    if parts.scheme.lower() == "api":
        return bool(parts.netloc or parts.path.strip("/"))
    return (
        parts.scheme.lower() == "https"
        and bool(parts.hostname)
        and "@" not in parts.netloc
        and not parts.query
        and not parts.fragment
    )


def _storage_queue_problems(message: StorageQueueMessage, path: str) -> list[FieldError]:
    problems = []
    if not STORAGE_ACCOUNT.fullmatch(message.storage_account):
        problems.append(FieldError(f"{path}.storageAccount", "must be 3 to 24 letters and digits"))
    if not QUEUE_NAME.fullmatch(message.queue_name):
        problems.append(
            FieldError(
                f"{path}.queueName",
                "must be 3 to 63 lower-case letters, digits and single hyphens, "
                "starting and ending with a letter or digit",
            )
        )
    unfit = NOT_IN_XML.search(message.message)
    if unfit:
        problems.append(
            FieldError(
                f"{path}.message",
                f"holds U+{ord(unfit.group()):04X}, which the queue message's XML cannot carry",
            )
        )
    if not message.sas_token.strip().lstrip("?"):
        problems.append(FieldError(f"{path}.sasToken", "is required"))
    return problems


def _service_bus_problems(
    message: ServiceBusActionMessage, path: str, entity: str
) -> list[FieldError]:
    given = message.to_wire()
    problems = [
        FieldError(f"{path}.{name}", "is required")
        for name in (entity, "namespace", "message")
        if not given.get(name)
    ]
    if given.get("namespace") and not NAMESPACE.fullmatch(given["namespace"]):
        problems.append(
            FieldError(
                f"{path}.namespace",
                "must be 6 to 50 letters, digits and hyphens, starting with a letter "
                "and ending with a letter or digit",
            )
        )
    if given.get(entity) and not ENTITY_PATH.fullmatch(given[entity]):
        problems.append(
            FieldError(
                f"{path}.{entity}",
                "must be at most 260 letters, digits, '.', '-', '_' and '/', "
                "starting with a letter or digit",
            )
        )
    authentication = message.authentication
    if authentication is None or not authentication.sas_key_name or not authentication.sas_key:
        problems.append(
            FieldError(f"{path}.authentication", "needs sasKeyName and sasKey (SharedAccessKey)")
        )
    properties = given.get("brokeredMessageProperties") or {}
    problems += [
        FieldError(
            f"{path}.brokeredMessageProperties.{name}",
            f"is {len(properties[name])} characters; at most {LONGEST_MESSAGE_PROPERTY} "
            "are allowed",
        )
        for name in _LIMITED_PROPERTIES
        if len(properties.get(name) or "") > LONGEST_MESSAGE_PROPERTY
    ]
    time_to_live = properties.get("timeToLive")
    if time_to_live and not timedelta(0) < read_duration(time_to_live) <= LONGEST_MESSAGE_LIFE:
        problems.append(
            FieldError(
                f"{path}.brokeredMessageProperties.timeToLive",
                f"'{time_to_live[:40]}' is not between 0 and 49 days 17 hours (2^32 - 1 "
                "milliseconds), the longest a message's AMQP header can say; leave it out for "
                "the entity's own default",
            )
        )
    session, partition = properties.get("sessionId"), properties.get("partitionKey")
    if session and partition and session != partition:
        problems.append(
            FieldError(
                f"{path}.brokeredMessageProperties.partitionKey",
                "must equal sessionId when both are set (Service Bus partitions by session)",
            )
        )
    return problems
