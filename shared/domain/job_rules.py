"""The rules a job definition obeys beyond the shape of each value (docs/behaviour.md#limits).

`definition_problems` lists what is invalid (a 400, every problem named by its field);
`recurrence_conflict` says when a job recurs more often than its collection's quota (a 409);
the job-count quota is kept by the store, in the same transaction that adds a job.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

from dateutil.relativedelta import relativedelta

from shared.domain.certificates import UnreadableCertificate, read_pfx
from shared.domain.collection import MaxRecurrence, Quota, SkuName
from shared.domain.job_definition import (
    ActionType,
    ErrorAction,
    HttpAuthenticationType,
    JobProperties,
    RetryPolicy,
    RetryType,
    ServiceBusActionMessage,
    StorageQueueMessage,
)
from shared.domain.problems import FieldError
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
SHORTEST_RETRY = timedelta(seconds=15)
SHORTEST_RETRY_FREE = timedelta(hours=1)
LONGEST_RETRY = relativedelta(months=18)
MOST_RETRIES = 20
# Azure's naming rules. They also keep these names from steering a request to any host but one
# of the configured storage and Service Bus domains.
STORAGE_ACCOUNT = re.compile(r"[A-Za-z0-9]{3,24}")  # lower case in Azure; DNS ignores case
QUEUE_NAME = re.compile(r"(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9-]{4,48}[A-Za-z0-9]")
ENTITY_PATH = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._/-]{0,258}[A-Za-z0-9_])?")
# Characters XML 1.0 cannot carry, even escaped: a StorageQueue message travels inside XML.
NOT_IN_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
LONGEST_MESSAGE_PROPERTY = 128  # Service Bus: messageId, sessionId, partitionKey and the like
_LIMITED_PROPERTIES = ("messageId", "sessionId", "partitionKey", "replyToSessionId",
                       "viaPartitionKey")  # fmt: skip
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
    problems += [
        FieldError(f"properties.{problem.field}", problem.problem)
        for problem in timing_problems(properties.starts_at, properties.recurrence, now)
    ]
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
        f"The job would run every {_spoken(gap)} at its most frequent, more often than the "
        f"job collection's quota maxRecurrence allows (once every {_spoken(allowed)})."
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
        problems += _retry_problems(action.retry_policy, f"{path}.retryPolicy", sku, now)
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
    return problems


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
    session, partition = properties.get("sessionId"), properties.get("partitionKey")
    if session and partition and session != partition:
        problems.append(
            FieldError(
                f"{path}.brokeredMessageProperties.partitionKey",
                "must equal sessionId when both are set (Service Bus partitions by session)",
            )
        )
    return problems


def _retry_problems(
    policy: RetryPolicy, path: str, sku: SkuName, now: datetime
) -> list[FieldError]:
    if policy.retry_type is RetryType.NONE:
        return []
    problems = []
    shortest = SHORTEST_RETRY_FREE if sku is SkuName.FREE else SHORTEST_RETRY
    interval = policy.interval
    if interval is not None and interval < shortest:
        where = " in a Free job collection" if sku is SkuName.FREE else ""
        problems.append(
            FieldError(
                f"{path}.retryInterval",
                f"{_spoken(interval)} is too short{where}: "
                f"the least allowed is {_spoken(shortest)}",
            )
        )
    if interval is not None and now + interval > now + LONGEST_RETRY:
        problems.append(
            FieldError(f"{path}.retryInterval", "is longer than 18 months, the most allowed")
        )
    if policy.retry_count is not None and policy.retry_count > MOST_RETRIES:
        problems.append(
            FieldError(
                f"{path}.retryCount",
                f"{policy.retry_count} is too many: the most allowed is {MOST_RETRIES}",
            )
        )
    return problems


def _spoken(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    for unit, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= length and seconds % length == 0:
            count = seconds // length
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"
