"""A template's resources walked as ARM walks them: nested resources, `copy` loops and
conditions, down to the Microsoft.Scheduler resources it holds, each evaluated into the body a PUT
sends. Resources of other providers are skipped and listed, without evaluating any more of them
than their type and name. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shared.domain.ids import COLLECTION_TYPE, JOB_TYPE
from shared.domain.problems import json_type as kind
from shared.domain.templates.deployment import (
    Deployment,
    PlannedResource,
    SkippedResource,
    TemplateError,
    resource_key,
)
from shared.domain.templates.evaluation import copy_count, evaluated
from shared.domain.templates.expressions import Scope
from shared.domain.templates.limits import (
    LARGEST_RESOURCE,
    LARGEST_TEMPLATE,
    MOST_RESOURCES,
    json_size,
)
from shared.domain.wire import JsonObject


def flattened(
    resources: list[Any],
    scope: Scope,
    deployment: Deployment,
    where: str,
    parent: PlannedResource | SkippedResource | None,
) -> Iterator[PlannedResource | SkippedResource | Declared]:
    """Each resource of `resources` (at `where` in the template), once per copy, and those
    nested in it: planned or skipped, and how dependsOn may name it."""
    for position, resource in enumerate(resources):
        at = f"{where}[{position}]"
        if not isinstance(resource, dict):
            raise TemplateError(at, "", f"a resource must be an object, not {kind(resource)}")
        for index_scope in _copies(resource, scope, at):
            # limits.check_resources counted them all before; a nested loop whose count
            # changes with its parent's index can still make more.
            scope.meter.resources += 1
            if scope.meter.resources > MOST_RESOURCES:
                raise TemplateError(
                    at, "", f"makes more than {MOST_RESOURCES} resources counting copies, "
                    "the most ARM allows",
                )  # fmt: skip
            yield from _instance(resource, index_scope, deployment, at, parent)


def _copies(resource: JsonObject, scope: Scope, at: str) -> Iterator[Scope]:
    loop = resource.get("copy")
    if loop is None:
        yield scope
        return
    if not isinstance(loop, dict) or not isinstance(loop.get("name"), str):
        raise TemplateError(at, "copy", "must be an object with a `name` and a `count`")
    for index in range(copy_count(loop.get("count"), scope, at, "copy.count")):
        yield replace(scope, copy_indexes={**scope.copy_indexes, loop["name"]: index})


@dataclass(frozen=True)
class Declared:
    """A resource of the template as dependsOn can name it: by id, by type and name, by name,
    or by its copy loop's name."""

    keys: frozenset[str]
    target: str  # the key of the planned or skipped resource


def _instance(
    resource: JsonObject,
    scope: Scope,
    deployment: Deployment,
    at: str,
    parent: PlannedResource | SkippedResource | None,
) -> Iterator[PlannedResource | SkippedResource | Declared]:
    type_ = _full_type(evaluated(resource.get("type"), scope, at, "type"), parent, at)
    scheduler = type_.casefold() in {COLLECTION_TYPE.casefold(), JOB_TYPE.casefold()}
    name = _name(resource, scope, at, parent, strict=scheduler)
    label = f"resource '{name}' ({type_})"
    loop = resource.get("copy", {}).get("name") if isinstance(resource.get("copy"), dict) else None
    keys = {resource_key(type_, name), name.casefold(), name.split("/")[-1].casefold()}
    keys.add(_resource_id(deployment, type_, name).casefold())
    if loop:
        keys.add(str(loop).casefold())
    if not scheduler:
        skipped = SkippedResource(type_, name, "not a Microsoft.Scheduler resource")
        yield skipped
        yield Declared(frozenset(keys), resource_key(type_, name))
        yield from _children(resource, scope, deployment, at, skipped)
        return
    if parent is not None and isinstance(parent, SkippedResource):
        raise TemplateError(label, "", "a job must be nested in a job collection")
    if "condition" in resource:
        condition = evaluated(resource["condition"], scope, label, "condition")
        if not isinstance(condition, bool):
            raise TemplateError(label, "condition", f"must be a boolean, not {kind(condition)}")
        if not condition:
            skipped = SkippedResource(type_, name, "its condition is false")
            yield skipped
            yield Declared(frozenset(keys), resource_key(type_, name))
            return
    depends = evaluated(resource.get("dependsOn", []), scope, label, "dependsOn")
    if not isinstance(depends, list) or not all(isinstance(each, str) for each in depends):
        raise TemplateError(label, "dependsOn", "must be an array of resource names or ids")
    if parent is not None:
        depends = [*depends, parent.key]
    values = _values_for(deployment, type_, name)
    body = _body(resource, scope, label, values, job=type_.casefold() == JOB_TYPE.casefold())
    _check_size(body, scope, label)
    type_ = JOB_TYPE if type_.casefold() == JOB_TYPE.casefold() else COLLECTION_TYPE
    planned = PlannedResource(type_, name, body, tuple(depends))
    yield planned
    yield Declared(frozenset(keys), planned.key)
    yield from _children(resource, scope, deployment, at, planned)


def _children(
    resource: JsonObject,
    scope: Scope,
    deployment: Deployment,
    at: str,
    parent: PlannedResource | SkippedResource,
) -> Iterator[PlannedResource | SkippedResource | Declared]:
    children = resource.get("resources", [])
    if not isinstance(children, list):
        raise TemplateError(at, "resources", "must be an array of resources")
    yield from flattened(children, scope, deployment, f"{at}.resources", parent)


def _full_type(type_: Any, parent: PlannedResource | SkippedResource | None, at: str) -> str:
    if not isinstance(type_, str) or not type_:
        raise TemplateError(at, "type", "every resource needs a type")
    if parent is None or "." in type_.split("/")[0]:
        return type_
    return f"{parent.type}/{type_}"


def _name(
    resource: JsonObject,
    scope: Scope,
    at: str,
    parent: PlannedResource | SkippedResource | None,
    *,
    strict: bool,
) -> str:
    raw = resource.get("name")
    try:
        name = evaluated(raw, scope, at, "name")
    except TemplateError:
        if strict:
            raise
        return str(raw)  # a skipped resource is listed by its name as written
    if not isinstance(name, str) or not name:
        raise TemplateError(at, "name", "every resource needs a name")
    return name if parent is None or "/" in name else f"{parent.name}/{name}"


def _body(
    resource: JsonObject, scope: Scope, label: str, values: Mapping[str, Any], *, job: bool
) -> JsonObject:
    names = ("properties",) if job else ("location", "tags", "properties")
    body: JsonObject = {}
    for name in names:
        if name in resource:
            body[name] = evaluated(resource[name], scope, label, name, values)
    for path, value in values.items():
        _set(body, path, value, label)
    return body


def _check_size(body: JsonObject, scope: Scope, label: str) -> None:
    """ARM's limits on a resource's definition and on the whole template, applied to what the
    resource became once its expressions were evaluated."""
    size = json_size(body)
    if size > LARGEST_RESOURCE:
        raise TemplateError(
            label, "", f"is {size:,} characters of JSON once evaluated; "
            f"ARM allows at most {LARGEST_RESOURCE:,}",
        )  # fmt: skip
    scope.meter.bodies += size
    if scope.meter.bodies > LARGEST_TEMPLATE:
        raise TemplateError(
            label, "", f"brings the template's resources, evaluated, to more than "
            f"{LARGEST_TEMPLATE:,} characters of JSON, the most ARM allows",
        )  # fmt: skip


def _values_for(deployment: Deployment, type_: str, name: str) -> Mapping[str, Any]:
    for resource, values in deployment.property_values.items():
        if resource.casefold() == name.casefold():
            return values
    return {}


def _set(body: JsonObject, path: str, value: Any, label: str) -> None:
    """A property given outright, set by its dotted path (it may be absent from the template)."""
    holder: Any = body
    *steps, last = path.split(".")
    for step in steps:
        holder = holder.setdefault(step, {}) if isinstance(holder, dict) else None
        if not isinstance(holder, dict):
            raise TemplateError(
                label, path, "names a property inside a value that is not an object"
            )
    if isinstance(holder, dict):
        holder[last] = value


def check_property_values(found: list[Any], deployment: Deployment) -> None:
    """Refuses values given outright for a resource the template does not plan."""
    names = {f.name.casefold() for f in found if isinstance(f, PlannedResource)}
    for resource in deployment.property_values:
        if resource.casefold() not in names:
            raise TemplateError(
                "propertyValues", resource, "names no Microsoft.Scheduler resource of the template"
            )


def _resource_id(deployment: Deployment, type_: str, name: str) -> str:
    namespace, *types = type_.split("/")
    path = "/".join(f"{t}/{n}" for t, n in zip(types, name.split("/"), strict=False))
    return (
        f"/subscriptions/{deployment.subscription_id}/resourceGroups/"
        f"{deployment.resource_group}/providers/{namespace}/{path}"
    )
