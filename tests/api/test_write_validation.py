"""What the executor will send is checked when a job is saved (docs/behaviour.md#limits).

Inputs the API used to store failed on every run afterwards, most as "internal error": a lone
surrogate in a body, a URI with a line break or in a form the HTTP client cannot read, header
fields HTTP cannot carry. Each is now a 400 naming the field and the reason, and nothing is
stored. The in-process tests at the end show that each would indeed have failed in the executor.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.actions import Actions
from shared.actions.http import HttpActions
from shared.actions.oauth import TokenCache
from shared.actions.outbound import OutboundPolicy
from shared.actions.service_bus import ServiceBusActions
from shared.domain.attempts import Attempt
from shared.domain.collection import SkuName
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ActionType, JobBody, JobProperties
from shared.domain.job_rules import definition_problems
from shared.domain.sendable import uri_problem
from shared.settings import Settings
from tests.api.test_jobs import collection_path, in_a_day, job_path, new_collection, unique
from tests.conftest import Service
from tests.targets import Target

HTTP = ("http", "https")


def http(**request: Any) -> dict[str, Any]:
    """An Http action; keyword arguments replace fields of its request."""
    return {"type": "Http", "request": {"uri": "https://example.org/ping", "method": "POST"} | request}


def service_bus(**message: Any) -> dict[str, Any]:
    return {"type": "ServiceBusQueue", "serviceBusQueueMessage": {
        "namespace": "my-namespace", "queueName": "orders", "message": "hello",
        "authentication": {"sasKeyName": "send", "sasKey": "c2FzLWtleQ==", "type": "SharedAccessKey"},
    } | message}  # fmt: skip


def job(action: dict[str, Any]) -> dict[str, Any]:
    return {"properties": {"startTime": in_a_day(), "action": action, "recurrence": {"frequency": "Hour"}}}


def put(api: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    """PUT as JSON text with every non-ASCII character escaped: a lone surrogate travels as
    `"\\ud800"`, which JSON allows (httpx's own `json=` would fail to encode it as UTF-8)."""
    return api.put(path, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


# --- the URI rules, held against httpx ------------------------------------------------------

URIS_KEPT = [
    ("plain", "https://example.org/ping", "example.org"),
    ("port-path-query-fragment", "http://example.org:8080/a/b?c=d&e=%20f#g", "example.org"),
    ("user-info", "https://user:p%40ss@example.org/", "example.org"),
    ("dotted-decimal-ipv4", "http://192.0.2.1:8080/", "192.0.2.1"),
    ("ipv6-literal", "http://[2001:db8::1]:8080/", "2001:db8::1"),
    ("ipv4-mapped-literal", "http://[::ffff:192.0.2.1]/", "::ffff:192.0.2.1"),
    ("internationalised-name", "https://bücher.example/", "bücher.example"),
    ("punycode-name", "https://xn--bcher-kva.example/", "bücher.example"),
    ("fully-qualified-with-dot", "https://example.org./", "example.org."),
    ("single-label", "http://x/", "x"),
    ("underscore-in-a-label", "https://my_host.example.org/", "my_host.example.org"),
    ("number-inside-the-name", "https://1.2.3.4.example/", "1.2.3.4.example"),
    ("unicode-path", "https://example.org/päth", "example.org"),
    ("upper-case-scheme-and-host", "HTTPS://EXAMPLE.ORG/", "example.org"),
]  # fmt: skip


@pytest.mark.parametrize(("uri", "host"), [case[1:] for case in URIS_KEPT], ids=[case[0] for case in URIS_KEPT])
def test_uris_the_http_client_reads_as_written_are_kept(uri: str, host: str) -> None:
    assert uri_problem(uri, HTTP) is None
    assert httpx.URL(uri).host == host


# The pieces URIs are made of here: everything that has made a parser trip somewhere.
_TRICKY = st.sampled_from(["a", "x", "0", "1", "7", "0x", "f", ".", ":", "@", "[", "]", "%", "-", "_", "é", "。",
                           "xn--", "127", "255", "256", "0177", "::1", "/", "?", "#", " ", "\t", "\n", "\ud800"])  # fmt: skip


@given(st.sampled_from(["http://", "https://", "HTTP://", "ftp://", "http:/", "http:"]),
       st.lists(_TRICKY, max_size=12).map("".join), st.sampled_from(["", "/", "/p?q#f", ":80/", ":"]))  # fmt: skip
def test_every_uri_kept_is_read_by_httpx_and_names_one_address(scheme: str, authority: str, rest: str) -> None:
    uri = scheme + authority + rest
    if uri_problem(uri, HTTP) is not None:
        return
    url = httpx.URL(uri)  # does not raise: the executor reads it as the API did
    assert url.scheme in HTTP and url.host
    assert url.port is None or 1 <= url.port <= 65535
    host = url.raw_host.decode()
    try:
        socket.inet_aton(host)  # what the system resolver takes for an IPv4 address...
    except OSError:
        return
    assert str(ipaddress.IPv4Address(host)) == host  # ...is written in the one form all read alike


# --- refused at write time, through the API ---------------------------------------------------

REFUSED = [
    ("body-lone-surrogate", http(body="\ud800"),
     "properties.action.request.body: holds a lone surrogate (half of a UTF-16 pair), which UTF-8 cannot encode"),
    ("uri-not-a-url", http(uri="not a url"),
     "properties.action.request.uri: must be an absolute http or https URL, such as https://example.com/path"),
    ("uri-space", http(uri="https://example.org/a b"),
     "properties.action.request.uri: holds a space at character 22; a URI may not hold white space or control "
     "characters (percent-encode them: a space is %20)"),
    ("uri-line-break", http(uri="https://example.org/a\r\nHost: elsewhere"),
     "properties.action.request.uri: holds a line break at character 22"),
    ("uri-tab", http(uri="https://example.org/\tb"), "properties.action.request.uri: holds a tab at character 21"),
    ("uri-octal-ipv4", http(uri="http://0177.0.0.1/"),
     "properties.action.request.uri: the host 0177.0.0.1 reads as an IPv4 address but is not written as one: "
     "four numbers from 0 to 255 separated by dots, without leading zeros (192.0.2.1); clients read the other "
     "forms (octal, hexadecimal, fewer parts) differently"),
    ("uri-hexadecimal-ipv4", http(uri="http://0x7f.1/"),
     "properties.action.request.uri: the host 0x7f.1 reads as an IPv4 address but is not written as one"),
    ("uri-short-ipv4", http(uri="http://127.1/"),
     "properties.action.request.uri: the host 127.1 reads as an IPv4 address but is not written as one"),
    ("uri-integer-ipv4", http(uri="http://2130706433/"),
     "properties.action.request.uri: the host 2130706433 reads as an IPv4 address but is not written as one"),
    ("uri-port-out-of-range", http(uri="https://example.org:65536/"),
     'properties.action.request.uri: the port "65536" is not a number from 1 to 65535'),
    ("uri-unclosed-ipv6", http(uri="http://[::1/"),
     "properties.action.request.uri: must be an absolute http or https URL; its host cannot be read"),
    ("uri-text-after-ipv6", http(uri="http://[::1]x:80/"),
     "properties.action.request.uri: must be an absolute http or https URL; its host and port cannot be read"),
    ("uri-empty-label", http(uri="https://a..example/"),
     "properties.action.request.uri: the host a..example is not a host name: labels of 1 to 63 letters, digits, "
     "'-' and '_', separated by dots, 253 characters at most"),
    ("uri-invalid-idn", http(uri="https://\u2603.example/"),
     "properties.action.request.uri: the host \u2603.example is not a valid internationalised domain name"),
    ("uri-ipv6-zone", http(uri="http://[fe80::1%25eth0]/"),
     "properties.action.request.uri: the host [fe80::1%25eth0] names a network interface of this machine"),
    ("header-value-line-break", http(headers={"X-Trace": "abc\r\nX-Injected: 1"}),
     "properties.action.request.headers.X-Trace: the value contains a line break"),
    ("header-value-nul", http(headers={"X-Trace": "a\x00b"}),
     "properties.action.request.headers.X-Trace: the value contains a NUL character"),
    ("header-value-control", http(headers={"X-Trace": "a\x0bb"}),
     "properties.action.request.headers.X-Trace: the value contains a control character"),
    ("header-value-outside-ascii", http(headers={"X-Trace": "caf\u00e9"}),
     "properties.action.request.headers.X-Trace: the value contains a character outside ASCII, which header "
     "values are sent in"),
    ("header-value-padded", http(headers={"X-Trace": " abc"}),
     "properties.action.request.headers.X-Trace: the value starts or ends with a space or tab, which HTTP does "
     "not allow"),
    ("header-name-not-a-token", http(headers={"X Trace": "1"}),
     "properties.action.request.headers[\"X Trace\"]: the name is not an HTTP header name: it must be 1 or more "
     "letters, digits and !#$%&'*+-.^_`|~"),
    ("header-name-empty", http(headers={"": "1"}),
     "properties.action.request.headers[\"\"]: the name is not an HTTP header name"),
    ("method-not-a-token", http(method="GET /admin"),
     "properties.action.request.method: must be an HTTP method such as GET or POST: letters, digits and "
     "!#$%&'*+-.^_`|~"),
    ("basic-password-lone-surrogate", http(authentication={"type": "Basic", "username": "u", "password": "p\udc00"}),
     "properties.action.request.authentication.password: holds a lone surrogate"),
    ("oauth-tenant-lone-surrogate", http(authentication={"type": "ActiveDirectoryOAuth", "tenant": "\ud800",
                                                         "audience": "a", "clientId": "c", "secret": "s"}),
     "properties.action.request.authentication.tenant: holds a lone surrogate"),
    ("error-action-uri", http() | {"errorAction": http(uri="http://127.1/alarm")},
     "properties.action.errorAction.request.uri: the host 127.1 reads as an IPv4 address"),
    ("error-action-header", http() | {"errorAction": http(headers={"X-Alarm": "a\nb"})},
     "properties.action.errorAction.request.headers.X-Alarm: the value contains a line break"),
    ("storage-queue-message", {"type": "StorageQueue", "queueMessage": {
        "storageAccount": "contoso", "queueName": "jobs", "sasToken": "sv=1&sig=x", "message": "\ud800"}},
     "properties.action.queueMessage.message: holds U+D800, which the queue message's XML cannot carry"),
    ("storage-queue-sas-token", {"type": "StorageQueue", "queueMessage": {
        "storageAccount": "contoso", "queueName": "jobs", "sasToken": "sv=1&sig=\ud800", "message": "m"}},
     "properties.action.queueMessage.sasToken: holds a lone surrogate"),
    ("service-bus-message", service_bus(message="\ud800"),
     "properties.action.serviceBusQueueMessage.message: holds a lone surrogate"),
    ("service-bus-sas-key", service_bus(authentication={"sasKeyName": "send", "sasKey": "\ud800", "type": "SharedAccessKey"}),
     "properties.action.serviceBusQueueMessage.authentication.sasKey: holds a lone surrogate"),
    ("service-bus-label", service_bus(brokeredMessageProperties={"label": "\ud800"}),
     "properties.action.serviceBusQueueMessage.brokeredMessageProperties.label: holds a lone surrogate"),
    ("service-bus-custom-value", service_bus(customMessageProperties={"region": "\ud800"}),
     "properties.action.serviceBusQueueMessage.customMessageProperties.region: holds a lone surrogate"),
    ("service-bus-custom-name", service_bus(customMessageProperties={"\ud800": "west"}),
     'properties.action.serviceBusQueueMessage.customMessageProperties["\\ud800"]: the name holds a lone surrogate'),
    ("error-action-service-bus", http() | {"errorAction": service_bus(message="\udfff")},
     "properties.action.errorAction.serviceBusQueueMessage.message: holds a lone surrogate"),
]  # fmt: skip


@pytest.fixture(scope="module")
def collection(service: Service) -> Iterator[str]:
    with httpx.Client(base_url=service.base_url, headers={"x-functions-key": service.key},
                      params={"api-version": "2016-03-01"}, timeout=10.0) as client:  # fmt: skip
        yield new_collection(client)


@pytest.mark.parametrize(("action", "message"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_what_the_executor_could_not_send_is_400_and_nothing_is_stored(
    api: httpx.Client, collection: str, action: dict[str, Any], message: str
) -> None:
    name = unique("refused")
    response = put(api, job_path(collection, name), job(action))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "BadRequest"
    assert message in response.json()["error"]["message"]
    assert api.get(job_path(collection, name)).status_code == 404


def test_a_refused_replacement_leaves_the_old_definition(api: httpx.Client, collection: str) -> None:
    path = job_path(collection, unique("replaced"))
    created = put(api, path, job(http(headers={"X-Trace": "1"})))
    assert created.status_code == 201, created.text
    refused = put(api, path, job(http(uri="http://0177.0.0.1/", headers={"X-Trace": "1\r\n2"})))
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"] == (
        "properties.action.request.uri: the host 0177.0.0.1 reads as an IPv4 address but is not written as one: "
        "four numbers from 0 to 255 separated by dots, without leading zeros (192.0.2.1); clients read the other "
        "forms (octal, hexadecimal, fewer parts) differently; "
        "properties.action.request.headers.X-Trace: the value contains a line break"
    )  # every problem at once
    patched = api.patch(path, json={"properties": {"action": {"request": {"headers": {"X-Trace": "1\n"}}}}})
    assert patched.status_code == 400, patched.text
    assert "properties.action.request.headers.X-Trace: the value contains a line break" in patched.text
    assert api.get(path).json() == created.json()


def test_a_refused_header_value_is_never_quoted(api: httpx.Client, collection: str) -> None:
    """A header value may be a secret: the message says what is wrong, not what was sent."""
    action = http(headers={"Authorization": "Bearer s3cr3t-t0ken\r\nX-Injected: 1", "X-Key": "k3y-\u00e9"})
    response = put(api, job_path(collection, unique("secret")), job(action))
    assert response.status_code == 400, response.text
    assert "s3cr3t" not in response.text
    assert "k3y" not in response.text
    assert "Injected" not in response.text


def test_a_preview_refuses_what_a_put_refuses(api: httpx.Client, collection: str) -> None:
    path = f"{collection_path(collection)}/previewOccurrences"
    response = api.post(path, content=json.dumps(job(http(body="\ud800"))).encode(),
                        headers={"Content-Type": "application/json"})  # fmt: skip
    assert response.status_code == 400, response.text
    assert "properties.action.request.body: holds a lone surrogate" in response.text


KEPT = [
    ("internationalised-host", http(uri="https://bücher.example/ping")),
    ("ipv6-literal-with-port", http(uri="http://[2001:db8::1]:8080/ping")),
    ("user-info-and-query", http(uri="https://user@example.org/a?b=%20c#d")),
    ("fully-qualified-host", http(uri="https://example.org./ping")),
    ("header-values-with-inner-space-and-tab-and-empty", http(headers={"X-A": "a b\tc", "X-Empty": "", "X-Json": '{"k": [1]}'})),
    ("unusual-but-valid-header-name", http(headers={"X-Odd!#$%&'*+.^_`|~": "1"})),
    ("non-ascii-body-and-messages", http(body="caf\u00e9 \U0001f600") | {"errorAction": service_bus(message="\u00e9t\u00e9 \U0001f600",
        customMessageProperties={"r\u00e9gion": "\u00e9"}, brokeredMessageProperties={"label": "\u00e9"})}),
    ("patch-method", http(method="patch")),
]  # fmt: skip


@pytest.mark.parametrize("action", [case[1] for case in KEPT], ids=[case[0] for case in KEPT])
def test_what_the_executor_can_send_is_still_accepted(api: httpx.Client, collection: str, action: dict[str, Any]) -> None:
    response = put(api, job_path(collection, unique("kept")), job(action))
    assert response.status_code == 201, response.text
    assert response.json()["properties"]["action"]["request"]["uri"] == action["request"]["uri"]


# --- had they been stored: the executor, in process -------------------------------------------

JOB = JobId(CollectionId("sub", "group", "jc"), "job")
ATTEMPT = Attempt(datetime(2026, 11, 22, 10, 0, tzinfo=UTC))

# Each: what it was, the action with TARGET for a local server's address, what the executor made of
# it, and the field the API now refuses.
FAILED_EVERY_RUN = [
    ("body-lone-surrogate", http(uri="http://TARGET/run", body="\ud800"),
     "internal error (UnicodeEncodeError)", "properties.action.request.body"),
    ("uri-line-break", http(uri="http://TARGET/run\r\nHost: elsewhere"),
     "internal error (InvalidURL)", "properties.action.request.uri"),
    ("uri-tab", http(uri="http://TARGET/\trun"), "internal error (InvalidURL)", "properties.action.request.uri"),
    ("uri-octal-ipv4", http(uri="http://0177.0.0.1/run"), "internal error (InvalidURL)", "properties.action.request.uri"),
    ("uri-text-after-ipv6", http(uri="http://[::1]x:80/run"), "internal error (InvalidURL)", "properties.action.request.uri"),
    ("uri-invalid-idn", http(uri="http://\u2603.example/run"), "internal error (InvalidURL)", "properties.action.request.uri"),
    ("uri-bad-punycode", http(uri="http://xn--abc.example/run"), "internal error (InvalidCodepoint)",
     "properties.action.request.uri"),
    ("header-value-outside-ascii", http(uri="http://TARGET/run", headers={"X-Trace": "caf\u00e9"}),
     "internal error (UnicodeEncodeError)", "properties.action.request.headers.X-Trace"),
    # Not an internal error, but history kept the value, which may be a secret.
    ("header-value-line-break", http(uri="http://TARGET/run", headers={"X-Key": "s3cr3t\r\nX-Injected: 1"}),
     "Illegal header value b's3cr3t\\r\\nX-Injected: 1'", "properties.action.request.headers.X-Key"),
    ("header-value-padded", http(uri="http://TARGET/run", headers={"X-Trace": "abc "}),
     "Illegal header value", "properties.action.request.headers.X-Trace"),
    ("header-name-not-a-token", http(uri="http://TARGET/run", headers={"X Trace": "1"}),
     "Illegal header name", 'properties.action.request.headers["X Trace"]'),
    ("method-not-a-token", http(uri="http://TARGET/run", method="GET /admin"),
     "Illegal method characters", "properties.action.request.method"),
    ("method-outside-ascii", http(uri="http://TARGET/run", method="G\u00c9T"),
     "internal error (TypeError)", "properties.action.request.method"),
    ("service-bus-sas-key", service_bus(authentication={"sasKeyName": "send", "sasKey": "\ud800", "type": "SharedAccessKey"}),
     "internal error (UnicodeEncodeError)", "properties.action.serviceBusQueueMessage.authentication.sasKey"),
]  # fmt: skip


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    server = Target()
    server.answer("/run", 200)
    yield server
    server.close()


@pytest.fixture(scope="module")
def executor() -> Iterator[Actions]:
    """The executor's action performers, as the services build them, to a local allow-listed target."""
    tokens = TokenCache("https://login.invalid", httpx.Client(), lambda: datetime.now(UTC))
    settings = Settings(storage_connection="", lookahead=timedelta(0), outbound_allowlist="127.0.0.1/32",
                        outbound_ca_file=None, authority_host="https://login.invalid",
                        servicebus_endpoint="sb://127.0.0.1:9")  # fmt: skip
    performers = {ActionType.HTTP: HttpActions(OutboundPolicy.from_setting("127.0.0.1/32"), None, tokens),
                  ActionType.SERVICE_BUS_QUEUE: ServiceBusActions(settings, timeout=2)}  # fmt: skip
    actions = Actions(lambda: datetime.now(UTC), performers)
    yield actions
    actions.close()


def with_target(action: dict[str, Any], target: Target) -> dict[str, Any]:
    return json.loads(json.dumps(action).replace("TARGET", f"127.0.0.1:{target.port}"))


@pytest.mark.parametrize(("action", "failure", "field"), [case[1:] for case in FAILED_EVERY_RUN],
                         ids=[case[0] for case in FAILED_EVERY_RUN])  # fmt: skip
def test_had_it_been_stored_it_would_have_failed_on_every_run(
    executor: Actions, target: Target, action: dict[str, Any], failure: str, field: str
) -> None:
    action = with_target(action, target)
    outcome = executor.perform(JobProperties.model_validate({"action": action}), JOB, ATTEMPT)
    assert not outcome.succeeded
    assert failure in outcome.message
    assert target.received("/run") == []
    problems = definition_problems(JobBody.model_validate(job(action)).properties, sku=SkuName.STANDARD,
                                   now=datetime.now(UTC))  # fmt: skip
    assert [problem.field for problem in problems] == [field]


def test_a_short_ipv4_host_reached_an_address_its_text_does_not_show(executor: Actions, target: Target) -> None:
    """127.1 is 127.0.0.1 to the system resolver, and an error to httpx's IPv4 parser (0177.0.0.1)."""
    action = http(uri=f"http://127.1:{target.port}/run")
    outcome = executor.perform(JobProperties.model_validate({"action": action}), JOB, ATTEMPT)
    assert outcome.succeeded, outcome.message
    assert len(target.received("/run")) == 1
    problems = definition_problems(JobBody.model_validate(job(action)).properties, sku=SkuName.STANDARD,
                                   now=datetime.now(UTC))  # fmt: skip
    assert [problem.field for problem in problems] == ["properties.action.request.uri"]


# --- inputs that answered 500, or cost seconds (issue 30, L1 and L3) -----------------------

def retrying(interval: str) -> dict[str, Any]:
    return http() | {"retryPolicy": {"retryType": "Fixed", "retryInterval": interval, "retryCount": 2}}


def next_february() -> str:
    """February 1st of next year: less than 18 months away whenever the test runs."""
    return datetime(datetime.now(UTC).year + 1, 2, 1, 9, tzinfo=UTC).isoformat().replace("+00:00", "Z")


def recurring(action: dict[str, Any], recurrence: dict[str, Any]) -> dict[str, Any]:
    return {"properties": {"startTime": next_february(), "action": action, "recurrence": recurrence}}


# From a February: monthly on day 31 and the first Monday (the first Monday is one of days 1 to
# 7), and every twelfth month on the 30th (no February has one).
NEVER = [
    ("day-31-and-first-monday", {"frequency": "Month", "schedule": {"monthDays": [31], "monthlyOccurrences": [{"day": "Monday", "occurrence": 1}]}},
     "properties.recurrence.schedule: never occurs: no month the recurrence reaches (every month from its start) has a day "
     "among its monthDays and among its monthlyOccurrences"),
    ("february-30th", {"frequency": "Month", "interval": 12, "schedule": {"monthDays": [30]}},
     "properties.recurrence.schedule: never occurs: no month the recurrence reaches (every 12 months from its start) has "
     "a day among its monthDays"),
]  # fmt: skip
RETRY_INTERVAL = "properties.action.retryPolicy.retryInterval: "
TOO_LONG, FRACTION = "is longer than 18 months, the most allowed", "has a fraction of a year or a month"
ARABIC_INDIC = "\u0660\u0660:\u0660\u0661:\u0660\u0660"
REFUSED_INPUTS = [
    # A TimeSpan of .NET's largest value, and one of 3 million days: the date arithmetic overflowed.
    ("timespan-max-value", job(retrying("10675199.02:48:05.4775807")), RETRY_INTERVAL + TOO_LONG),
    ("three-million-days", job(retrying("3000000.00:00:00")), RETRY_INTERVAL + TOO_LONG),
    ("iso-three-million-days", job(retrying("P3000000D")), RETRY_INTERVAL + TOO_LONG),
    ("arabic-indic-timespan", job(retrying(ARABIC_INDIC)), f"{RETRY_INTERVAL}'{ARABIC_INDIC}' is not an ISO 8601 duration"),
    ("half-a-year", job(retrying("P0.5Y")), f"{RETRY_INTERVAL}'P0.5Y' {FRACTION}"),
    ("one-and-a-half-months", job(retrying("P1,5M")), f"{RETRY_INTERVAL}'P1,5M' {FRACTION}"),
    # Sent as milliseconds in an AMQP uint: failed on every run (tests/actions/test_message_actions.py).
    ("service-bus-time-to-live-beyond-amqp", job(service_bus(brokeredMessageProperties={"timeToLive": "10675199.02:48:05.4775807"})),
     "properties.action.serviceBusQueueMessage.brokeredMessageProperties.timeToLive: '10675199.02:48:05.4775807' is not "
     "between 0 and 49 days 17 hours"),
    ("half-a-second", job(retrying("PT0.5S")),
     "properties.action.retryPolicy.retryInterval: 0.5 seconds is too short: the least allowed is 15 seconds"),
    *[(name, recurring(http(), recurrence), message) for name, recurrence, message in NEVER],
]  # fmt: skip


@pytest.mark.parametrize(("body", "message"), [case[1:] for case in REFUSED_INPUTS], ids=[case[0] for case in REFUSED_INPUTS])
def test_inputs_that_answered_500_or_never_occur_are_400_on_put_and_preview(
    api: httpx.Client, collection: str, body: dict[str, Any], message: str
) -> None:
    name = unique("input")
    for response in (put(api, job_path(collection, name), body), api.post(f"{collection_path(collection)}/previewOccurrences", json=body)):
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "BadRequest"
        assert message in response.json()["error"]["message"]
    assert api.get(job_path(collection, name)).status_code == 404


def test_a_schedule_that_occurs_rarely_is_kept(api: httpx.Client, collection: str) -> None:
    """February 29th, every twelfth month from a February: every four years, and kept."""
    body = recurring(http(), {"frequency": "Month", "interval": 12, "schedule": {"monthDays": [29]}})
    answer = api.post(f"{collection_path(collection)}/previewOccurrences", json=body, params={"count": 2})
    assert answer.status_code == 200, answer.text
    found = [datetime.fromisoformat(instant.replace("Z", "+00:00")) for instant in answer.json()["value"]]
    assert [(moment.month, moment.day) for moment in found] == [(2, 29), (2, 29)]
    assert found[1].year - found[0].year in (4, 8)


@pytest.mark.parametrize("top", ["\u0663", "\u0665\u0660", "1_0", " 5"], ids=["arabic-indic-3", "arabic-indic-50", "underscore", "space"])
def test_page_sizes_are_ascii_digits_only(api: httpx.Client, collection: str, top: str) -> None:
    response = api.get(f"{collection_path(collection)}/jobs", params={"$top": top})
    assert response.status_code == 400, response.text
    assert "$top" in response.json()["error"]["message"]


TAGS_TOO_LARGE = [
    # A tag name had no bound: 40,000 characters outgrew the table property (32K) a collection is.
    ("name-over-arm-limit", {"t" * 40_000: "v"}, "at most 512 characters"),
    # ARM's own limits, each at its most: 38,701 characters as JSON, still more than it holds.
    ("fifty-tags-at-arm-maxima", {f"{i:03d}" + "n" * 509: "v" * 256 for i in range(50)},
     "tags: are 38701 characters written as JSON; at most 16384 are allowed"),
]  # fmt: skip


@pytest.mark.parametrize(("tags", "message"), [case[1:] for case in TAGS_TOO_LARGE], ids=[case[0] for case in TAGS_TOO_LARGE])
def test_tags_that_would_outgrow_a_table_property_are_400(api: httpx.Client, tags: dict[str, str], message: str) -> None:
    path = collection_path(unique("jc"))
    response = api.put(path, json={"location": "West Europe", "tags": tags, "properties": {"sku": {"name": "Standard"}}})
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]
    assert api.get(path).status_code == 404
