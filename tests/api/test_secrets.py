"""Secrets a client never reads back (docs/behaviour.md#secrets): keys in a job's URIs and
headers masked in every answer of both APIs while the stored job keeps them for its calls; a
job read and written back keeps its keys; and no error message quotes a secret, whatever type
it was sent as. The masking and restoring rules first, on their own; then through the local host."""

from __future__ import annotations

import base64
import copy
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest

from shared.api.patch_secrets import secrets_staying
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import JobProperties
from shared.domain.job_secrets import SECRETS, keeping_stored_secrets
from shared.domain.problems import is_secret_field
from shared.domain.redaction import masked_values, redact_text, redact_uri
from shared.domain.wire import merge_patch
from shared.storage.table_store import table_storage_from_connection_string
from tests.api.test_classic_api import XML_CLOUD_SERVICE, XML_COLLECTION
from tests.api.test_jobs import (
    SUBSCRIPTION,
    collection_path,
    http_job,
    job_path,
    new_collection,
    unique,
)
from tests.conftest import Service
from tests.pipeline import START, Pipeline
from tests.targets import Received, Target

# A Functions URL with its key, a Logic Apps-style SAS, and a password in the user-info.
KEYED_URI = "https://ops:Pa55-word@fn.example.org/api/run?code=Fn-Key-1&sp=%2Ftriggers%2Frun&sv=1.0&sig=Sig-Value-1"
SHOWN_URI = "https://ops:***@fn.example.org/api/run?code=***&sp=%2Ftriggers%2Frun&sv=1.0&sig=***"
ERROR_URI = "https://alerts.example.org/hook?sig=Err-Sig-2&se=2030-01-01"
HEADERS = {
    "Authorization": "Bearer Tok-3",
    "X-Api-Key": "Api-Key-4",
    "Content-Type": "application/json",
}
URI_SECRETS = ("Pa55-word", "Fn-Key-1", "Sig-Value-1", "Err-Sig-2", "Tok-3", "Api-Key-4")


def keyed_job() -> dict[str, Any]:
    """An HTTP job whose URIs and headers carry keys, in its main action and its errorAction."""
    body = http_job()
    action = body["properties"]["action"]
    action["request"] = {"uri": KEYED_URI, "method": "POST", "headers": dict(HEADERS), "body": "hi"}
    action["errorAction"] = {"type": "Http", "request": {"uri": ERROR_URI, "method": "POST"}}
    return body


def stored_properties(service: Service, collection: str, job: str) -> dict[str, Any]:
    """The definition as the store keeps it (what the job's calls use)."""
    store = table_storage_from_connection_string(service.storage)
    job_id = JobId.of(CollectionId.of(SUBSCRIPTION, "jobs-rg", collection), job)
    return store.jobs.existing_job(job_id).document.properties.to_wire()


def assert_stored_intact(service: Service, collection: str, job: str) -> None:
    request = stored_properties(service, collection, job)["action"]["request"]
    assert request["uri"] == KEYED_URI
    assert request["headers"] == HEADERS
    assert (
        stored_properties(service, collection, job)["action"]["errorAction"]["request"]["uri"]
        == ERROR_URI
    )


# --- the rules on their own ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        (KEYED_URI, SHOWN_URI),
        ("https://a.blob.example.org/c/b?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&st=2024-01-01&spr=https"
         "&skoid=o&sktid=t&skt=2024&ske=2030&sks=b&skv=2022&sig=abc%2Bdef%3D",
         "https://a.blob.example.org/c/b?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&st=2024-01-01&spr=https"
         "&skoid=o&sktid=t&skt=2024&ske=2030&sks=b&skv=2022&sig=***"),
        ("https://h.example.org/?client_secret=s&access_token=t&X-Api-Key=k&refreshToken=r&q=keep",
         "https://h.example.org/?client_secret=***&access_token=***&X-Api-Key=***&refreshToken=***&q=keep"),
        ("https://h.example.org/?Code=1&SIG=2&subscription-key=3&aeg-sas-key=4&pwd=5",
         "https://h.example.org/?Code=***&SIG=***&subscription-key=***&aeg-sas-key=***&pwd=***"),
        ("https://h.example.org/a%20b?x=a+b&y=%2F", "https://h.example.org/a%20b?x=a+b&y=%2F"),
    ],
    ids=["functions-and-logic-apps", "sas-only-sig", "named-by-fragment", "any-case", "untouched"],
)  # fmt: skip
def test_uris_show_their_keys_masked_and_everything_else_as_spelled(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown


def test_every_uri_quoted_in_a_text_is_masked() -> None:
    text = f"Traceback ...\nConnectError: cannot reach '{KEYED_URI}' (then {ERROR_URI}, then <http://h.example.org/?a=1>)"
    masked = f"Traceback ...\nConnectError: cannot reach '{SHOWN_URI}' (then {redact_uri(ERROR_URI)}, then <http://h.example.org/?a=1>)"
    assert redact_text(text) == masked
    assert redact_text("no address here: 10 s") == "no address here: 10 s"


def definition(
    uri: str = KEYED_URI, headers: dict[str, str] | None = None, error_uri: str = ERROR_URI
) -> dict[str, Any]:
    request = {"uri": uri, "method": "POST", "headers": HEADERS if headers is None else headers}
    return {"action": {"type": "Http", "request": request,
                       "errorAction": {"type": "Http", "request": {"uri": error_uri, "method": "GET"}}}}  # fmt: skip


def restored(sent: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """`sent` written over `stored`, as a write keeps the stored secrets."""
    kept = keeping_stored_secrets(JobProperties.model_validate(sent), JobProperties.model_validate(stored))
    return kept.to_wire()


MASKED_HEADERS = {"Authorization": "***", "X-Api-Key": "***", "Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (definition(SHOWN_URI, MASKED_HEADERS, redact_uri(ERROR_URI)), definition()),
        (definition(SHOWN_URI.replace("sv=1.0", "sv=2.0"), MASKED_HEADERS),
         definition(KEYED_URI.replace("sv=1.0", "sv=2.0"))),
        (definition(SHOWN_URI.replace("***", "%2A%2A%2A")), definition()),
        (definition(SHOWN_URI.replace("/api/run", "/api/other"), MASKED_HEADERS),
         definition(SHOWN_URI.replace("/api/run", "/api/other"), MASKED_HEADERS)),
        (definition(SHOWN_URI.replace("fn.example.org", "elsewhere.example.org"), MASKED_HEADERS),
         definition(SHOWN_URI.replace("fn.example.org", "elsewhere.example.org"), MASKED_HEADERS)),
        (definition(SHOWN_URI.replace("https:", "http:"), MASKED_HEADERS),
         definition(SHOWN_URI.replace("https:", "http:"), MASKED_HEADERS)),
        (definition(SHOWN_URI.replace("ops:", "other:")),
         definition(KEYED_URI.replace("ops:Pa55-word", "other:***"))),
        (definition("https://fn.example.org/?token=***"), definition("https://fn.example.org/?token=***")),
        (definition(KEYED_URI.replace("Fn-Key-1", "New-Key")), definition(KEYED_URI.replace("Fn-Key-1", "New-Key"))),
    ],
    ids=["read-and-written-back", "other-part-changed", "mask-percent-encoded", "other-path-keeps-nothing",
         "other-host-keeps-nothing", "other-scheme-keeps-nothing", "other-user-keeps-no-password",
         "nothing-stored-to-put-back", "a-new-key-replaces"],
)  # fmt: skip
def test_masks_sent_back_get_the_stored_values_only_for_the_same_endpoint(
    sent: dict[str, Any], kept: dict[str, Any]
) -> None:
    assert restored(sent, definition()) == JobProperties.model_validate(kept).to_wire()


def test_a_mask_in_the_error_action_is_filled_from_the_stored_error_action_only() -> None:
    sent = definition(error_uri=SHOWN_URI)
    assert (
        restored(sent, definition())["action"]["errorAction"]["request"]["uri"]
        == SHOWN_URI
    )
    stored = definition(error_uri=KEYED_URI)
    assert restored(sent, stored)["action"]["errorAction"]["request"]["uri"] == KEYED_URI


@pytest.mark.parametrize("secret", SECRETS, ids=[".".join(place) for place in SECRETS])
def test_every_secret_field_is_one_no_message_quotes(secret: tuple[str, ...]) -> None:
    assert is_secret_field(["properties", "action", *secret])
    assert is_secret_field(["action", "errorAction", *secret])


# --- through the host: what a client reads ------------------------------------------------------


def assert_masked(answer: httpx.Response) -> None:
    assert answer.status_code < 300, answer.text
    for secret in URI_SECRETS:
        assert secret not in answer.text


def test_keys_in_uris_and_headers_are_masked_in_every_answer_and_kept_for_the_call(
    api: httpx.Client, service: Service
) -> None:
    collection, name = new_collection(api), unique("keyed")
    created = api.put(job_path(collection, name), json=keyed_job())
    assert created.status_code == 201, created.text
    request = created.json()["properties"]["action"]["request"]
    assert request["uri"] == SHOWN_URI  # sp and sv, which grant nothing without sig, stay readable
    assert request["headers"] == MASKED_HEADERS
    assert created.json()["properties"]["action"]["errorAction"]["request"]["uri"] == (
        "https://alerts.example.org/hook?sig=***&se=2030-01-01"
    )
    for answer in (
        created,
        api.get(job_path(collection, name)),
        api.get(f"{collection_path(collection)}/jobs"),
        api.patch(job_path(collection, name), json={"properties": {"recurrence": {"interval": 3}}}),
        api.get(f"{job_path(collection, name)}/nextOccurrences"),
    ):
        assert_masked(answer)
    assert_stored_intact(service, collection, name)


def test_a_patch_of_only_the_state_keeps_every_key(api: httpx.Client, service: Service) -> None:
    collection, name = new_collection(api), unique("keyed")
    assert api.put(job_path(collection, name), json=keyed_job()).status_code == 201
    for state in ("Disabled", "Enabled"):
        assert_masked(api.patch(job_path(collection, name), json={"properties": {"state": state}}))
    assert_stored_intact(service, collection, name)


def test_a_put_of_what_get_returned_keeps_every_key(api: httpx.Client, service: Service) -> None:
    collection, name = new_collection(api), unique("keyed")
    assert api.put(job_path(collection, name), json=keyed_job()).status_code == 201
    read = api.get(job_path(collection, name)).json()
    written_back = api.put(job_path(collection, name), json=read)
    assert written_back.status_code == 200, written_back.text
    assert written_back.json()["properties"]["action"] == read["properties"]["action"]
    assert_stored_intact(service, collection, name)
    # Changing another part of the URI keeps the key too; the key goes nowhere else.
    changed = copy.deepcopy(read)
    changed["properties"]["action"]["request"]["uri"] = SHOWN_URI.replace("sv=1.0", "sv=2.0")
    assert api.put(job_path(collection, name), json=changed).status_code == 200
    assert stored_properties(service, collection, name)["action"]["request"][
        "uri"
    ] == KEYED_URI.replace("sv=1.0", "sv=2.0")
    moved = copy.deepcopy(read)
    moved["properties"]["action"]["request"]["uri"] = SHOWN_URI.replace(
        "fn.example.org", "elsewhere.example.org"
    )
    assert api.put(job_path(collection, name), json=moved).status_code == 200
    stored = stored_properties(service, collection, name)["action"]["request"]
    assert "Fn-Key-1" not in stored["uri"]
    assert (
        stored["headers"]["Authorization"] == "***"
    )  # a mask kept as sent: no key follows the job


def test_a_patch_that_sends_the_masked_uri_back_keeps_the_key(
    api: httpx.Client, service: Service
) -> None:
    collection, name = new_collection(api), unique("keyed")
    assert api.put(job_path(collection, name), json=keyed_job()).status_code == 201
    patch = {"properties": {"action": {"request": {"uri": SHOWN_URI, "headers": MASKED_HEADERS}}}}
    assert_masked(api.patch(job_path(collection, name), json=patch))
    assert_stored_intact(service, collection, name)


# --- through the host: the classic API ----------------------------------------------------------


@dataclass(frozen=True)
class ClassicJobs:
    """The classic API's client, and the jobs route of a Standard collection `jc` in a fresh
    cloud service (a resource group of SUBSCRIPTION)."""

    client: httpx.Client
    cloud_service: str

    @property
    def path(self) -> str:
        return f"/cloudservices/{self.cloud_service}/resources/scheduler/~/jobCollections/jc/jobs"


@pytest.fixture
def classic_jobs(service: Service) -> Iterator[ClassicJobs]:
    cloud_service = unique("cs")
    with httpx.Client(
        base_url=f"{service.base_url}/{SUBSCRIPTION}",
        headers={"x-functions-key": service.key, "x-ms-version": "2014-10-01"},
        timeout=10.0,
    ) as client:
        assert client.put(f"/cloudservices/{cloud_service}",
                          content=XML_CLOUD_SERVICE.format(label="l", region="West Europe")).status_code == 202  # fmt: skip
        assert client.put(f"/cloudservices/{cloud_service}/resources/scheduler/jobCollections/jc",
                          content=XML_COLLECTION.format(plan="Standard", quota="")).status_code == 202  # fmt: skip
        client.params = client.params.set("api-version", "2014-04-01")
        yield ClassicJobs(client, cloud_service)


def test_the_classic_api_masks_the_same_keys_and_keeps_them_when_written_back(
    classic_jobs: ClassicJobs, service: Service
) -> None:
    client, jobs = classic_jobs.client, classic_jobs.path
    created = client.put(f"{jobs}/keyed", json=keyed_job()["properties"])
    assert_masked(created)
    assert created.json()["action"]["request"]["uri"] == SHOWN_URI
    for answer in (client.get(f"{jobs}/keyed"), client.get(jobs),
                   client.patch(f"{jobs}/keyed", json={"state": "disabled"})):  # fmt: skip
        assert_masked(answer)
    read = client.get(f"{jobs}/keyed").json()
    assert_masked(client.put(f"{jobs}/keyed", json=read))
    store = table_storage_from_connection_string(service.storage)
    job_id = JobId.of(CollectionId.of(SUBSCRIPTION, classic_jobs.cloud_service, "jc"), "keyed")
    stored = store.jobs.existing_job(job_id).document.properties.to_wire()["action"]
    assert stored["request"]["uri"] == KEYED_URI
    assert {name.lower(): value for name, value in stored["request"]["headers"].items()} == {
        name.lower(): value for name, value in HEADERS.items()
    }  # the classic API spells header names its way (`x-Api-Key`); the values are the same
    assert stored["errorAction"]["request"]["uri"] == ERROR_URI


# --- through the host: no error message quotes a secret ------------------------------------------

SECRET_TEXT = "Sup3rSecret-77"
PIN = 987654321  # a secret that is a number


def authentication(**fields: Any) -> dict[str, Any]:
    return {
        "type": "Http",
        "request": {"uri": "https://example.org/", "method": "GET", "authentication": fields},
    }


def service_bus(kind: str, entity: str, sas_key: Any) -> dict[str, Any]:
    message = {"namespace": "orders-ns", entity: "orders", "message": "m",
               "authentication": {"type": "SharedAccessKey", "sasKeyName": "send", "sasKey": sas_key}}  # fmt: skip
    return {"type": kind, f"{kind[0].lower()}{kind[1:]}Message": message}


# Each way a secret can be placed: the action it makes from the value sent.
PLACES = {
    "basic-password": lambda value: authentication(type="Basic", username="u", password=value),
    "oauth-secret": lambda value: authentication(type="ActiveDirectoryOAuth", tenant="t", audience="a",
                                                 clientId="c", secret=value),
    "certificate-pfx": lambda value: authentication(type="ClientCertificate", pfx=value, password="pw"),
    "certificate-password": lambda value: authentication(type="ClientCertificate", pfx="AAAA", password=value),
    "queue-sas-token": lambda value: {"type": "StorageQueue", "queueMessage": {
        "storageAccount": "acct1", "queueName": "orders", "sasToken": value, "message": "m"}},
    "service-bus-queue-sas-key": lambda value: service_bus("ServiceBusQueue", "queueName", value),
    "service-bus-topic-sas-key": lambda value: service_bus("ServiceBusTopic", "topicPath", value),
    "error-action-password": lambda value: {
        "type": "Http", "request": {"uri": "https://example.org/", "method": "GET"},
        "errorAction": authentication(type="Basic", username="u", password=value)},
    "uri": lambda value: {"type": "Http", "request": {"uri": value, "method": "GET"}},
    "authorization-header": lambda value: {"type": "Http", "request": {
        "uri": "https://example.org/", "method": "GET", "headers": {"Authorization": value}}},
    "whole-authentication": lambda value: {"type": "Http", "request": {
        "uri": "https://example.org/", "method": "GET", "authentication": value}},
}  # fmt: skip
WRONG_TYPES = {
    "array": ([SECRET_TEXT], "an array"),
    "object": ({"value": SECRET_TEXT}, "an object"),
    "number": (PIN, "a number"),
    "boolean": (True, "a boolean"),
    "nested-array": ([[f"https://u:{SECRET_TEXT}@h/?sig={SECRET_TEXT}"]], "an array"),
}
# Where a string is right, sending one is no type error; the whole authentication takes an object.
STRING_IN_PLACE_OF_AN_OBJECT = ("whole-authentication", f"Basic {SECRET_TEXT}", "a string")
# null where a value is required (and so not simply absent): the queue's sasToken.
NULL_TOKEN = ("queue-sas-token", None, "null")
CASES = [
    pytest.param(place, value, sent, id=f"{place}-{kind}")
    for place in PLACES
    for kind, (value, sent) in WRONG_TYPES.items()
    if (place, kind) != ("whole-authentication", "object")  # an object is right there
] + [pytest.param(*STRING_IN_PLACE_OF_AN_OBJECT, id="whole-authentication-string"),
     pytest.param(*NULL_TOKEN, id="queue-sas-token-null")]  # fmt: skip


def assert_not_echoed(answer: httpx.Response, sent: str) -> None:
    assert answer.status_code == 400, answer.text
    assert SECRET_TEXT not in answer.text
    assert str(PIN) not in answer.text
    assert f"not {sent}" in answer.text


@pytest.mark.parametrize(("place", "value", "sent"), CASES)
def test_no_error_of_the_arm_api_quotes_a_secret_of_the_wrong_type(
    api: httpx.Client, arm_collection: str, place: str, value: Any, sent: str
) -> None:
    body = http_job(action=PLACES[place](value))
    answer = api.put(job_path(arm_collection, unique("bad")), json=body)
    assert_not_echoed(answer, sent)
    preview = api.post(f"{collection_path(arm_collection)}/previewOccurrences", json=body)
    assert_not_echoed(preview, sent)


@pytest.mark.parametrize(("place", "value", "sent"), CASES)
def test_no_error_of_the_classic_api_quotes_a_secret_of_the_wrong_type(
    classic_jobs: ClassicJobs, place: str, value: Any, sent: str
) -> None:
    job = http_job(action=PLACES[place](value))["properties"]
    answer = classic_jobs.client.put(f"{classic_jobs.path}/{unique('bad')}", content=json.dumps(job),
                                     headers={"content-type": "application/json"})  # fmt: skip
    assert_not_echoed(answer, sent)
    assert answer.headers["content-type"].startswith("application/xml")


def test_no_error_of_a_patch_quotes_a_secret(
    api: httpx.Client, arm_collection: str, classic_jobs: ClassicJobs
) -> None:
    name = unique("job")
    assert api.put(job_path(arm_collection, name), json=http_job()).status_code == 201
    patch = {"properties": {"action": {"request": {"authentication": {"type": "Basic", "username": "u",
                                                                      "password": [SECRET_TEXT]}}}}}  # fmt: skip
    assert_not_echoed(api.patch(job_path(arm_collection, name), json=patch), "an array")
    client, jobs = classic_jobs.client, classic_jobs.path
    assert client.put(f"{jobs}/patched", json=http_job()["properties"]).status_code == 201
    assert_not_echoed(client.patch(f"{jobs}/patched", json=patch["properties"]), "an array")


@pytest.fixture
def arm_collection(api: httpx.Client) -> str:
    return new_collection(api)


# --- a secret goes only where it came from -------------------------------------------------------

# A job whose actions carry secrets in every form: credential headers, a query key, a password.
MAIN_URI = "https://api.example.org/hook?code=Fn-Key-1"
MAIN_HEADERS = {
    "X-Api-Key": "Api-Key-4",
    "Cookie": "session=Cookie-5",
    "Content-Type": "text/plain",
}
ERROR_HEADERS = {"Ocp-Apim-Subscription-Key": "Apim-Key-6", "X-Trace": "t-1"}
BASIC = {"type": "Basic", "username": "ops", "password": "Err-Pass-7"}


def travelling_job() -> dict[str, Any]:
    request = {"uri": MAIN_URI, "method": "POST", "headers": dict(MAIN_HEADERS)}
    error_request = {"uri": "https://alerts.example.org/page", "method": "POST",
                     "headers": dict(ERROR_HEADERS), "authentication": dict(BASIC)}  # fmt: skip
    action = {"type": "Http", "request": request,
              "errorAction": {"type": "Http", "request": error_request}}  # fmt: skip
    return http_job(action=action)["properties"]


@dataclass(frozen=True)
class JobWrites:
    """One API's writes of a job's properties, and the definition the store then keeps."""

    put: Callable[[dict[str, Any]], httpx.Response]
    patch: Callable[[dict[str, Any]], httpx.Response]
    get: Callable[[], dict[str, Any]]
    stored: Callable[[], dict[str, Any]]


@pytest.fixture(params=["arm", "classic"])
def writes(request: pytest.FixtureRequest, api: httpx.Client, service: Service) -> JobWrites:
    store, name = table_storage_from_connection_string(service.storage), unique("travelling")
    if request.param == "arm":
        collection = new_collection(api)
        path = job_path(collection, name)
        job_id = JobId.of(CollectionId.of(SUBSCRIPTION, "jobs-rg", collection), name)
        return JobWrites(
            lambda properties: api.put(path, json={"properties": properties}),
            lambda patch: api.patch(path, json={"properties": patch}),
            lambda: api.get(path).json()["properties"],
            lambda: store.jobs.existing_job(job_id).document.properties.to_wire(),  # noqa: PLW0108 (read anew each call)
        )
    classic: ClassicJobs = request.getfixturevalue("classic_jobs")
    path = f"{classic.path}/{name}"
    job_id = JobId.of(CollectionId.of(SUBSCRIPTION, classic.cloud_service, "jc"), name)
    return JobWrites(
        lambda properties: classic.client.put(path, json=properties),
        lambda patch: classic.client.patch(path, json=patch),
        lambda: {
            name: value for name, value in classic.client.get(path).json().items() if name != "id"
        },
        lambda: store.jobs.existing_job(job_id).document.properties.to_wire(),  # noqa: PLW0108 (read anew each call)
    )


def headers_of(action: dict[str, Any]) -> dict[str, str]:
    """An action's headers, names in lower case (the classic API spells them its own way)."""
    return {name.lower(): value for name, value in action["request"].get("headers", {}).items()}


def test_a_patch_that_moves_the_request_to_another_host_leaves_its_secrets_behind(
    writes: JobWrites,
) -> None:
    """H2: only the host changes; the credential headers stay with the host they were for."""
    assert writes.put(travelling_job()).status_code < 300
    moved = writes.patch({"action": {"request": {"uri": "https://other-host.example.org/hook"}}})
    assert moved.status_code == 200, moved.text
    action = writes.stored()["action"]
    assert action["request"]["uri"] == "https://other-host.example.org/hook"
    assert headers_of(action) == {"content-type": "text/plain"}
    # The errorAction did not move: it keeps everything.
    assert headers_of(action["errorAction"]) == {k.lower(): v for k, v in ERROR_HEADERS.items()}
    assert action["errorAction"]["request"]["authentication"]["password"] == "Err-Pass-7"


@pytest.mark.parametrize(
    "uri",
    ["http://api.example.org/hook", "https://api.example.org:8443/hook", "https://api.example.org/other"],
    ids=["other-scheme", "other-port", "other-path"],
)  # fmt: skip
def test_any_other_scheme_port_or_path_is_another_place(writes: JobWrites, uri: str) -> None:
    assert writes.put(travelling_job()).status_code < 300
    assert writes.patch({"action": {"request": {"uri": uri}}}).status_code == 200
    assert headers_of(writes.stored()["action"]) == {"content-type": "text/plain"}


def test_a_patch_that_moves_the_error_action_needs_its_password_again(writes: JobWrites) -> None:
    assert writes.put(travelling_job()).status_code < 300
    elsewhere = {"uri": "https://other-host.example.org/page"}
    refused = writes.patch({"action": {"errorAction": {"request": elsewhere}}})
    assert refused.status_code == 400, refused.text
    assert "errorAction.request.authentication.password: is required for Basic" in refused.text
    assert writes.stored()["action"]["errorAction"]["request"]["authentication"] == BASIC
    password = {"authentication": {"password": "New-Pass-8"}}
    moved = writes.patch({"action": {"errorAction": {"request": elsewhere | password}}})
    assert moved.status_code == 200, moved.text
    action = writes.stored()["action"]
    assert action["errorAction"]["request"]["authentication"]["password"] == "New-Pass-8"
    assert headers_of(action["errorAction"]) == {"x-trace": "t-1"}
    assert headers_of(action) == {k.lower(): v for k, v in MAIN_HEADERS.items()}  # main stays


def test_a_patch_that_moves_the_request_keeps_what_it_sends_again(writes: JobWrites) -> None:
    assert writes.put(travelling_job()).status_code < 300
    sent = {"uri": "https://other-host.example.org/hook", "headers": {"X-Api-Key": "New-Key-9"}}
    assert writes.patch({"action": {"request": sent}}).status_code == 200
    assert headers_of(writes.stored()["action"]) == {
        "x-api-key": "New-Key-9",
        "content-type": "text/plain",
    }


def test_a_patch_that_keeps_the_endpoint_keeps_every_secret(writes: JobWrites) -> None:
    assert writes.put(travelling_job()).status_code < 300
    same = {"uri": "https://API.example.org:443/hook?code=***&page=2"}  # the masked key sent back
    assert writes.patch({"action": {"request": same}}).status_code == 200
    action = writes.stored()["action"]
    assert action["request"]["uri"] == "https://API.example.org:443/hook?code=Fn-Key-1&page=2"
    assert headers_of(action) == {k.lower(): v for k, v in MAIN_HEADERS.items()}


def test_a_job_put_back_with_another_path_on_the_same_host_gets_no_key_back(
    writes: JobWrites,
) -> None:
    """M1: the masks of what a read showed are put back only for the endpoint they came from."""
    assert writes.put(travelling_job()).status_code < 300
    read = writes.get()
    read["action"]["request"]["uri"] = "https://api.example.org/echo?code=***"
    read["action"]["errorAction"]["request"]["authentication"]["password"] = "Err-Pass-7"
    assert writes.put(read).status_code == 200
    action = writes.stored()["action"]
    assert action["request"]["uri"] == "https://api.example.org/echo?code=***"
    assert headers_of(action) == {"x-api-key": "***", "cookie": "***", "content-type": "text/plain"}
    # The errorAction, put back where it was, keeps its key.
    assert headers_of(action["errorAction"])["ocp-apim-subscription-key"] == "Apim-Key-6"


def test_a_job_put_back_for_another_host_gets_no_key_back(writes: JobWrites) -> None:
    assert writes.put(travelling_job()).status_code < 300
    read = writes.get()
    read["action"]["request"]["uri"] = "https://other-host.example.org/hook?code=***"
    read["action"]["errorAction"]["request"]["uri"] = "https://other-host.example.org/page"
    read["action"]["errorAction"]["request"]["authentication"]["password"] = "Err-Pass-7"
    assert writes.put(read).status_code == 200
    action = writes.stored()["action"]
    assert action["request"]["uri"] == "https://other-host.example.org/hook?code=***"
    assert headers_of(action) == {"x-api-key": "***", "cookie": "***", "content-type": "text/plain"}
    assert headers_of(action["errorAction"]) == {
        "ocp-apim-subscription-key": "***",
        "x-trace": "t-1",
    }


QUEUE = {"type": "StorageQueue", "queueMessage": {"storageAccount": "acct1", "queueName": "q",
                                                  "sasToken": "?sv=1&sig=Queue-Sig-1", "message": "m"}}  # fmt: skip


@pytest.mark.parametrize(
    ("patch", "kept"),
    [({"action": {"queueMessage": {"queueName": "other"}}}, True),
     ({"action": {"queueMessage": {"storageAccount": "ACCT1"}}}, True),
     ({"action": {"queueMessage": {"storageAccount": "acct2"}}}, False)],
    ids=["other-queue-same-account", "account-in-another-case", "other-account"],
)  # fmt: skip
def test_a_queue_message_keeps_its_token_only_for_its_storage_account(
    patch: dict[str, Any], kept: bool
) -> None:
    stored = {"action": QUEUE}
    staying = secrets_staying(stored, merge_patch(stored, patch))
    assert ("sasToken" in staying["action"]["queueMessage"]) is kept
    assert stored == {"action": QUEUE}  # the stored definition itself is left as it was


# --- what the job's calls record ----------------------------------------------------------------


def test_a_target_that_echoes_the_request_puts_no_secret_into_history_or_the_logs(
    pipeline: Pipeline, target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    def echo(received: Received) -> tuple[int, bytes, dict[str, str]]:
        shown = {"query": received.query, "headers": received.headers}
        return 500, json.dumps(shown).encode(), {}

    target.respond("/echo", echo)
    request = {"uri": target.url("/echo?code=Echo-Key-1&x=1"), "method": "GET",
               "headers": {"X-Api-Key": "Echo-Key-2"},
               "authentication": {"type": "Basic", "username": "ops", "password": "Echo-Pass-3"}}  # fmt: skip
    action = {"type": "Http", "request": request, "retryPolicy": {"retryType": "None"}}
    job = pipeline.put_job("echo", {"startTime": START.isoformat(), "action": action})
    with caplog.at_level(logging.INFO, logger="scheduler"):
        pipeline.advance(timedelta(minutes=1))
    [call] = target.received("/echo")
    assert call.headers["x-api-key"] == "Echo-Key-2"  # the target did get them, and echoed them
    [entry] = pipeline.history(job)
    basic = base64.b64encode(b"ops:Echo-Pass-3").decode()
    recorded = json.dumps(entry) + caplog.text
    assert "Body: {" in entry["message"] and "***" in entry["message"]
    for secret in ("Echo-Key-1", "Echo-Key-2", "Echo-Pass-3", basic):
        assert secret not in recorded
    assert "x=1" in entry["message"]  # what is no secret stays readable


@pytest.mark.parametrize(
    ("text", "shown"),
    [("key=Secret-1 and Secret-1", "key=*** and ***"),
     ("cut at the end: Secret-", "cut at the end: ***"),
     ("a short one: abc, abcd", "a short one: abc, ***")],
    ids=["every-occurrence", "cut-off-at-the-end", "shorter-than-four-left-alone"],
)  # fmt: skip
def test_secret_values_are_masked_wherever_they_stand(text: str, shown: str) -> None:
    assert masked_values(text, {"Secret-1", "abc", "abcd"}) == shown
