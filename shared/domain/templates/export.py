"""Collections and their jobs written as a deployment template that the import applies
unchanged (docs/templates.md#export).

Every secret of a job (a password, a pfx, an OAuth secret, a SAS token or key, and a URI or a
header that carries a key) becomes a `securestring` parameter of the template: its value is
never written. Completed and faulted jobs are written disabled, since a client cannot set a
final state. Pure: the stored documents in, the template out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import COLLECTION_TYPE
from shared.domain.job_definition import FINAL_STATES, JobState
from shared.domain.job_document import JobDocument
from shared.domain.job_secrets import public_properties
from shared.domain.templates.expressions import escaped
from shared.domain.wire import JsonObject

API_VERSION = "2016-03-01"
SCHEMA = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"
# What a pfx shows, read from it again at the import: never written into a template.
_CERTIFICATE_FACTS = ("certificateThumbprint", "certificateSubjectName", "certificateExpiration")
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_]+")


@dataclass(frozen=True)
class ExportedCollection:
    name: str
    document: CollectionDocument
    jobs: Sequence[tuple[str, JobDocument]]


def exported_template(collections: Sequence[ExportedCollection]) -> JsonObject:
    """The template of `collections`, with their jobs nested under each."""
    parameters: JsonObject = {}
    resources = []
    for collection in collections:
        jobs = [
            _job_resource(collection.name, name, document, parameters)
            for name, document in collection.jobs
        ]
        resource: JsonObject = {
            "type": COLLECTION_TYPE,
            "apiVersion": API_VERSION,
            "name": escaped(collection.name),
            "location": collection.document.location,
        }
        if collection.document.tags:
            resource["tags"] = _literal(collection.document.tags)
        resource["properties"] = _literal(collection.document.properties().to_wire())
        if jobs:
            resource["resources"] = jobs
        resources.append(resource)
    return {
        "$schema": SCHEMA,
        "contentVersion": "1.0.0.0",
        "parameters": parameters,
        "resources": resources,
    }


def _job_resource(
    collection: str, name: str, document: JobDocument, parameters: JsonObject
) -> JsonObject:
    state = document.state
    kept = document.properties.model_copy(
        update={"state": JobState.DISABLED if state in FINAL_STATES else state}
    )
    definition = kept.to_wire()
    for action in (definition["action"], definition["action"].get("errorAction")):
        authentication = (action or {}).get("request", {}).get("authentication") or {}
        for fact in _CERTIFICATE_FACTS:
            authentication.pop(fact, None)
    shown = public_properties(kept)
    properties = _with_parameters(definition, shown, f"{collection}_{name}", parameters, ())
    return {
        "type": "jobs",
        "apiVersion": API_VERSION,
        "name": escaped(name),
        "dependsOn": [f"[resourceId('{COLLECTION_TYPE}', {_quoted(collection)})]"],
        "properties": properties,
    }


def _with_parameters(
    value: Any,
    shown: Any,
    prefix: str,
    parameters: JsonObject,
    path: tuple[str, ...],
) -> Any:
    """`value` (a stored definition) as a template writes it: where what a client reads
    (`shown`) leaves a string out or masks it, a securestring parameter in its place."""
    if isinstance(value, dict):
        within = shown if isinstance(shown, dict) else {}
        return {
            key: _with_parameters(item, within.get(key), prefix, parameters, (*path, key))
            for key, item in value.items()
        }
    if isinstance(value, list):
        items = shown if isinstance(shown, list) else []
        return [
            _with_parameters(
                item,
                items[index] if index < len(items) else None,
                prefix,
                parameters,
                (*path, str(index)),
            )
            for index, item in enumerate(value)
        ]
    if isinstance(value, str) and value != shown:
        name = _parameter_name(prefix, path, parameters)
        parameters[name] = {
            "type": "securestring",
            "metadata": {"description": f"{'.'.join(path)} of the job {prefix}: a secret"},
        }
        return f"[parameters('{name}')]"
    return _literal(value)


def _parameter_name(prefix: str, path: tuple[str, ...], taken: JsonObject) -> str:
    base = _NOT_A_NAME.sub("_", f"{prefix}_{'_'.join(path)}").strip("_") or "secret"
    name, number = base, 2
    while name in taken:
        name, number = f"{base}_{number}", number + 1
    return name


def _literal(value: Any) -> Any:
    """A value written so that the import reads it back as itself, never as an expression."""
    if isinstance(value, dict):
        return {key: _literal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_literal(item) for item in value]
    return escaped(value) if isinstance(value, str) else value


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
