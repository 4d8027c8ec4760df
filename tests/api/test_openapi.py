"""The served OpenAPI document. Requests generated from it are in test_fuzz.py."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.api import openapi
from shared.api.routes import ROUTES
from shared.domain.ids import CollectionId, JobId
from shared.domain.problems import InvalidRequest
from tests.conftest import Service

LONGEST = {"subscriptionId": 64, "resourceGroupName": 90, "jobCollectionName": 100, "jobName": 100}
EVERY_LONGEST = LONGEST | {"roleAssignmentName": 64}  # a role assignment's name: a GUID


def path_parameters() -> dict[str, dict[str, Any]]:
    """Every path parameter's schema, by name, each the same in every operation that has it."""
    found: dict[str, dict[str, Any]] = {}
    for item in openapi.document()["paths"].values():
        for operation in item.values():
            for parameter in operation["parameters"]:
                if parameter["in"] == "path":
                    assert found.setdefault(parameter["name"], parameter["schema"]) == parameter["schema"]
    return found


def valid_names(subscription: str, resource_group: str, collection: str, job: str) -> bool:
    try:
        JobId.of(CollectionId.of(subscription, resource_group, collection), job)
    except InvalidRequest:
        return False
    return True


def test_the_document_is_served_to_anyone_and_lists_every_operation(service: Service) -> None:
    response = httpx.get(f"{service.base_url}/openapi.json", timeout=5)
    assert response.status_code == 200
    served = response.json()
    operations = {(method.upper(), path) for path, item in served["paths"].items() for method in item}
    assert operations == {(route.method, "/" + route.template) for route in ROUTES}
    assert served["info"]["version"] == "2016-03-01"


def test_every_path_parameter_has_its_naming_rule_as_pattern_and_lengths() -> None:
    parameters = path_parameters()
    assert set(parameters) == set(EVERY_LONGEST)
    for name, schema in parameters.items():
        assert (schema["type"], schema["minLength"], schema["maxLength"]) == ("string", 1, EVERY_LONGEST[name])
        pattern = re.compile(schema["pattern"])  # JSON Schema's: unanchored, hence its ^ and $
        assert schema["pattern"].startswith("^") and schema["pattern"].endswith("$")
        assert pattern.search("a" * EVERY_LONGEST[name]) and not pattern.search("a" * (EVERY_LONGEST[name] + 1))
        assert not pattern.search("") and not pattern.search("a/b") and not pattern.search("n\u00e4me")


@given(st.data())
def test_names_made_from_the_documented_patterns_are_valid_names(data: st.DataObject) -> None:
    names = {name: data.draw(st.from_regex(schema["pattern"], fullmatch=True), label=name) for name, schema in path_parameters().items()}
    assert valid_names(names["subscriptionId"], names["resourceGroupName"], names["jobCollectionName"], names["jobName"])


@pytest.mark.parametrize(
    ("names", "valid"),
    [
        (("s", "rg", "jc", "j"), True),
        (("-s", "rg", "jc", "j"), False),
        (("s", "rg.", "jc", "j"), False),
        (("s", "(rg)", "jc", "j"), True),
        (("s", "rg", "j.c", "j"), False),
        (("s", "rg", "jc", "j" * 101), False),
    ],
    ids=["plain", "subscription-starting-with-dash", "group-ending-in-dot", "group-in-parentheses", "collection-with-dot", "job-too-long"],
)
def test_the_patterns_and_the_domain_agree(names: tuple[str, str, str, str], valid: bool) -> None:
    documented = path_parameters()
    follow = all(re.search(documented[name]["pattern"], value) for name, value in zip(LONGEST, names, strict=True))
    assert (follow, valid_names(*names)) == (valid, valid)


def test_a_put_of_a_collection_needs_a_location_and_a_patch_does_not() -> None:
    path = openapi.document()["paths"]["/" + next(route.template for route in ROUTES if route.name == "put_job_collection")]
    put, patch = (path[method]["requestBody"]["content"]["application/json"]["schema"] for method in ("put", "patch"))
    assert put == {"allOf": [{"$ref": "#/components/schemas/SentCollectionBody"}], "required": ["location"], "properties": {"location": {"type": "string"}}}
    assert patch == {"$ref": "#/components/schemas/SentCollectionBody"}


# --- what the document allows, the rules accept (issue 30) ----------------------------------


def resolved(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = schemas[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def request_body(operation: str) -> dict[str, Any]:
    route = next(route for route in ROUTES if route.name == operation)
    schema = openapi.document()["paths"]["/" + route.template][route.method.lower()]["requestBody"]["content"]["application/json"]["schema"]
    return schema["allOf"][0] if "allOf" in schema else schema


@pytest.mark.parametrize(("operation", "settable"), [
    ("put_job", ["enabled", "disabled"]), ("patch_job", ["enabled", "disabled"]), ("preview_occurrences", ["enabled", "disabled"]),
    ("put_job_collection", ["Enabled", "Disabled", "Suspended"]), ("patch_job_collection", ["Enabled", "Disabled", "Suspended"]),
])  # fmt: skip
def test_a_request_body_offers_only_the_states_a_client_may_set(operation: str, settable: list[str]) -> None:
    """`state: Deleted` (a collection) and completed or faulted (a job) are the service's own."""
    schemas = openapi.document()["components"]["schemas"]
    properties = resolved(resolved(request_body(operation), schemas)["properties"]["properties"], schemas)
    assert resolved(properties["properties"]["state"], schemas)["enum"] == settable


def test_what_the_service_answers_still_holds_every_state() -> None:
    schemas = openapi.document()["components"]["schemas"]
    assert resolved(schemas["JobProperties"]["properties"]["state"], schemas)["enum"] == ["enabled", "disabled", "completed", "faulted"]


def test_no_schema_offers_null() -> None:
    """A null `action.request` was described as valid; the rules refuse it for an Http action."""
    document = openapi.document()
    schemas = document["components"]["schemas"]
    action = resolved(resolved(resolved(request_body("put_job"), schemas)["properties"]["properties"], schemas)["properties"]["action"], schemas)
    assert action["properties"]["request"] == {"$ref": "#/components/schemas/HttpActionRequest"}
    assert '"null"' not in json.dumps(schemas | {"paths": document["paths"]}).replace('"nextLink": {"type": ["string", "null"]}', "")


@pytest.mark.parametrize(("operation", "kept", "refused"), [
    ("list_jobs", ["state eq 'enabled'", "state eq 'faulted'"], ["", "state eq 'sleeping'", "name eq 'x'", "state eq 'enabled' or 1 eq 1"]),
    ("list_job_history", ["status eq 'Failed'"], ["status eq 'Lost'", "state eq 'enabled'"]),
])  # fmt: skip
def test_a_filter_is_described_as_the_one_comparison_it_may_be(operation: str, kept: list[str], refused: list[str]) -> None:
    route = next(route for route in ROUTES if route.name == operation)
    parameters = openapi.document()["paths"]["/" + route.template]["get"]["parameters"]
    pattern = next(parameter["schema"]["pattern"] for parameter in parameters if parameter["name"] == "$filter")
    assert [value for value in kept if re.search(pattern, value)] == kept
    assert [value for value in refused if re.search(pattern, value)] == []
