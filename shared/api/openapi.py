"""The service's own OpenAPI document: the 2016-03-01 operations plus our extensions.

It is built from what the code really uses, the route table and the wire models, so it cannot
drift from them. Served at `/openapi.json`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from pydantic.json_schema import models_json_schema

from shared.api.api_versions import CURRENT
from shared.api.paging import SKIPTOKEN, TOKEN_PATTERN
from shared.api.role_assignment_operations import AssignmentBody
from shared.api.routes import ROUTES, Route
from shared.domain.collection import CollectionBody, CollectionState
from shared.domain.ids import NAME_PATTERN, RESOURCE_GROUP_PATTERN, SUBSCRIPTION_PATTERN
from shared.domain.job_definition import FINAL_STATES, HistoryStatus, JobBody, JobState
from shared.domain.wire import JsonObject, WireEnum

_REF = "#/components/schemas/{model}"


def _name(pattern: str, longest: int) -> JsonObject:
    """The schema of a name that follows `pattern`, a rule of shared/domain/ids.py."""
    return {"type": "string", "pattern": f"^{pattern}$", "minLength": 1, "maxLength": longest}


# What a PUT needs that its model, shared with PATCH, leaves optional.
_REQUIRED_BY_PUT: dict[str, JsonObject] = {
    "SentCollectionBody": {"required": ["location"], "properties": {"location": {"type": "string"}}}
}

# Each path parameter's naming rule, so that generated clients and fuzzers make valid names.
_PATH_PARAMETERS = {
    "subscriptionId": _name(SUBSCRIPTION_PATTERN, 64),
    "resourceGroupName": _name(RESOURCE_GROUP_PATTERN, 90),
    "jobCollectionName": _name(NAME_PATTERN, 100),
    "jobName": _name(NAME_PATTERN, 100),
    "roleAssignmentName": _name("[0-9A-Za-z-]{1,64}", 64),  # a GUID, as ARM names them
}

# What a client sends is described more tightly than what it reads back: a state only the
# service sets (a job's completed or faulted, a collection's Deleted) is left out, and a
# request body's schemas are these copies, each `$ref` renamed (see `_sent_schemas`).
_SENT = {
    "JobBody": "SentJobBody",
    "JobProperties": "SentJobProperties",
    "JobState": "SettableJobState",
    "CollectionBody": "SentCollectionBody",
    "CollectionProperties": "SentCollectionProperties",
    "CollectionState": "SettableCollectionState",
}
_SETTABLE: dict[str, list[str]] = {
    "SettableJobState": [state.value for state in JobState if state not in FINAL_STATES],
    "SettableCollectionState": [
        state.value for state in CollectionState if state is not CollectionState.DELETED
    ],
}
# The one $filter each listing reads (shared/api/query.py's equality_filter), spelled as the
# service spells its values.
_FILTERS: dict[str, tuple[str, type[WireEnum]]] = {
    "list_jobs": ("state", JobState),
    "list_job_history": ("status", HistoryStatus),
}

_ERRORS = {
    "400": "The request is invalid: the message names every field that is wrong and why.",
    "404": "The collection or job does not exist.",
    "409": (
        "A quota or a bound would be exceeded (run-nows in flight), the job is in a final "
        "state, or a concurrent change won."
    ),
    "412": "If-Match or If-None-Match did not hold.",
    "415": "The body's Content-Type is neither application/json nor text/json.",
}


@functools.cache
def document() -> JsonObject:
    """The OpenAPI 3.1 document of the management API."""
    schemas = _schemas()
    paths: dict[str, JsonObject] = {}
    for route in ROUTES:
        paths.setdefault("/" + route.template, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Azure Scheduler, re-implemented: management API",
            "version": CURRENT,
            "description": (
                "The Microsoft.Scheduler API (api-version 2016-03-01) on Azure Functions, with "
                "two extensions: nextOccurrences of a job and previewOccurrences of a job body."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "functionKey": {"type": "apiKey", "in": "header", "name": "x-functions-key"},
                "entraId": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            },
        },
        "security": [{"functionKey": []}, {"entraId": []}],
    }


def _schemas() -> JsonObject:
    # Imported here, as the routes import it on first use (shared/api/routes.py says why).
    from shared.api.template_operations import SCHEMAS as TEMPLATE_SCHEMAS  # noqa: PLC0415
    from shared.api.template_operations import ImportRequest  # noqa: PLC0415

    _, definitions = models_json_schema(
        [
            (CollectionBody, "validation"),
            (JobBody, "validation"),
            (ImportRequest, "validation"),
            (AssignmentBody, "validation"),
        ],
        ref_template=_REF,
    )
    # A member left out and one sent as null read the same (null removes one in a PATCH, as
    # JSON Merge Patch has it); an answer never holds null. So the document has no nulls: a
    # null `action.request` of a PUT, which the rules refuse, is not described as valid.
    schemas = {
        name: _rewritten(schema, _without_nulls) for name, schema in definitions["$defs"].items()
    }
    schemas |= _sent_schemas(schemas) | TEMPLATE_SCHEMAS
    resource_list = {
        "type": "object",
        "required": ["value"],
        "properties": {"value": {"type": "array"}, "nextLink": {"type": ["string", "null"]}},
    }
    schemas["CollectionList"] = _list_of("CollectionBody", resource_list)
    schemas["JobList"] = _list_of("JobBody", resource_list)
    schemas["HistoryList"] = resource_list
    instants = {"type": "array", "items": {"type": "string", "format": "date-time"}}
    schemas["Occurrences"] = {
        "type": "object",
        "required": ["value"],
        "properties": {
            "value": instants,
            # previewOccurrences only: the schedule in words, the zone's IANA name (absent: UTC)
            "schedule": {"type": "string"},
            "timeZone": {"type": "string"},
            # and, for a recurrence with exclusions, the occurrences it skips or moves
            "excluded": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["scheduled", "reason"],
                    "properties": {
                        "scheduled": {"type": "string", "format": "date-time"},
                        "movedTo": {"type": "string", "format": "date-time"},
                        "reason": {"type": "string"},
                    },
                },
            },
        },
    }
    text = {"type": "string"}
    # A 400 for input that breaks rules names each problem's field (a JSON path) in `target`.
    detail = {
        "type": "object",
        "required": ["code", "target", "message"],
        "properties": {"code": text, "target": text, "message": text},
    }
    error = {
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": text,
            "message": text,
            "details": {"type": "array", "items": detail},
        },
    }
    schemas["Error"] = {"type": "object", "required": ["error"], "properties": {"error": error}}
    return schemas


def _rewritten(schema: Any, rewrite: Callable[[JsonObject], Any]) -> Any:
    """`schema` with `rewrite` applied to each object in it, the innermost first."""
    if isinstance(schema, list):
        return [_rewritten(item, rewrite) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return rewrite({name: _rewritten(value, rewrite) for name, value in schema.items()})


def _without_nulls(schema: JsonObject) -> Any:
    """An object of a schema without its `{"type": "null"}` alternative or its null default."""
    tightened = {
        name: value for name, value in schema.items() if not (name == "default" and value is None)
    }
    alternatives = [option for option in tightened.get("anyOf", ()) if option != {"type": "null"}]
    if "anyOf" in tightened and len(alternatives) == 1:
        del tightened["anyOf"]
        return alternatives[0] | tightened
    if "anyOf" in tightened:
        tightened["anyOf"] = alternatives
    return tightened


def _sent_schemas(schemas: JsonObject) -> JsonObject:
    """The request bodies' copies of the models (`_SENT`), with the settable states only."""
    sent = {
        _SENT[name]: _rewritten(schemas[name], _renamed_ref)
        for name in _SENT
        if _SENT[name] not in _SETTABLE
    }
    for name, states in _SETTABLE.items():
        sent[name] = {"type": "string", "enum": states}
    return sent


def _renamed_ref(schema: JsonObject) -> JsonObject:
    if "$ref" not in schema:
        return schema
    model = schema["$ref"].rsplit("/", 1)[-1]
    return schema | {"$ref": _REF.format(model=_SENT.get(model, model))}


def _list_of(model: str, base: JsonObject) -> JsonObject:
    listed = {**base["properties"], "value": {"type": "array", "items": _ref(model)}}
    return {**base, "properties": listed}


def _operation(route: Route) -> JsonObject:
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": _PATH_PARAMETERS[name]}
        for name in re.findall(r"\{(\w+)\}", route.template)
    ]
    # 2016-03-01 alone: 2016-01-01 is taken for the clients written against it, and answers
    # one spelling differently (shared/api/api_versions.py), which this document does not show.
    api_version = {"type": "string", "enum": [CURRENT]}
    parameters.append(_query("api-version", api_version) | {"required": True})
    responses: JsonObject = {
        code: {"description": text, "content": _json_body("Error")}
        for code, text in _ERRORS.items()
    }
    queries: dict[str, JsonObject] = {
        "$top": {"type": "integer", "minimum": 1, "maximum": 100},
        "$skip": {"type": "integer", "minimum": 0},
        SKIPTOKEN: {"type": "string", "pattern": f"^{TOKEN_PATTERN}$"},
        "$filter": _filter_of(route.name),
        "count": {"type": "integer", "minimum": 1, "maximum": 100},
    }
    parameters += [_query(name, queries[name]) for name in route.query]
    responses["401"] = {
        "description": "No valid credentials: neither a good bearer token nor the function key.",
        "content": _json_body("Error"),
    }
    responses["403"] = {
        "description": "AuthorizationFailed: the caller's roles do not allow the action here.",
        "content": _json_body("Error"),
    }
    for status, model in route.answers.items():
        content = {"content": _json_body(model)} if model else {}
        responses[status] = {"description": "Success", **content}
    operation: JsonObject = {
        "operationId": route.name,
        "parameters": parameters,
        "responses": responses,
    }
    if route.body:
        body: JsonObject = _ref(_SENT.get(route.body, route.body))
        if route.method == "PUT" and _SENT.get(route.body) in _REQUIRED_BY_PUT:
            body = {"allOf": [body], **_REQUIRED_BY_PUT[_SENT[route.body]]}
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    return operation


def _filter_of(operation: str) -> JsonObject:
    """`<field> eq '<value>'`, the one $filter a listing reads, as a pattern."""
    if operation not in _FILTERS:
        return {"type": "string"}
    field, values = _FILTERS[operation]
    choices = "|".join(re.escape(value.value) for value in values)
    return {"type": "string", "pattern": f"^{field} eq '({choices})'$"}


def _ref(model: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=model)}


def _json_body(model: str) -> JsonObject:
    return {"application/json": {"schema": _ref(model)}}


def _query(name: str, schema: JsonObject) -> JsonObject:
    return {"name": name, "in": "query", "schema": schema}
