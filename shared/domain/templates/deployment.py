"""A deployment template read as ARM reads it, down to the Microsoft.Scheduler resources it
holds, each with its body as a PUT would send it, in the order they apply.

Parameters (with defaults and a parameters file), variables, conditions and `copy` loops are
evaluated here; resources of other providers are skipped and listed, without evaluating any
more of them than their type and name. Every problem is a TemplateError that names the
resource, the property and the expression. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shared.domain.ids import COLLECTION_TYPE, JOB_TYPE
from shared.domain.problems import RuleBroken
from shared.domain.problems import json_type as kind
from shared.domain.templates.expressions import (
    ExpressionError,
    Scope,
    is_expression,
    parse,
    unescaped,
)
from shared.domain.templates.functions import AZURE_ONLY, FUNCTIONS
from shared.domain.wire import WireEnum

_PARAMETER_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "securestring": lambda value: isinstance(value, str),
    "int": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "bool": lambda value: isinstance(value, bool),
    "object": lambda value: isinstance(value, dict),
    "secureobject": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
}
# The most resources one copy loop makes, as in ARM.
LONGEST_COPY = 800
TEMPLATE = "the template"


class ImportMode(WireEnum):
    """As ARM's deployment modes: Incremental creates or updates what the template names;
    Complete also deletes the jobs of its collections that it does not name."""

    INCREMENTAL = "Incremental"
    COMPLETE = "Complete"


class TemplateError(RuleBroken):
    """What stops a template from being applied, named as the user would look for it: the
    resource (or `parameters`, `variables`), the property, and the expression if there is one."""

    def __init__(
        self, resource: str, prop: str, problem: str, *, expression: str | None = None
    ) -> None:
        where = f"{resource}, property '{prop}'" if prop else resource
        said = f", expression '{expression[:300]}'" if expression else ""
        super().__init__(f"{where}{said}: {problem}")
        self.resource, self.property, self.expression, self.problem = (
            resource,
            prop,
            expression,
            problem,
        )


@dataclass(frozen=True)
class Deployment:
    """Where a template is applied, and the values given for it.

    `expression_values` answer calls only Azure can answer, by the call's text
    (`"listKeys(variables('rule'), '2018-01-01-preview')": {"primaryKey": ...}`);
    `property_values` set a resource's property outright, by the resource's name and the
    property's path (`{"QueuePoster/PostMessage": {"properties.action...sasKey": "..."}}`)."""

    subscription_id: str
    resource_group: str
    location: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    expression_values: Mapping[str, Any] = field(default_factory=dict)
    property_values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    name: str = "import"


@dataclass(frozen=True)
class PlannedResource:
    """A Microsoft.Scheduler resource of the template, evaluated: `body` is what a PUT sends."""

    type: str
    name: str  # `collection` or `collection/job`
    body: dict[str, Any]
    depends_on: tuple[str, ...] = ()

    @property
    def is_job(self) -> bool:
        return self.type == JOB_TYPE

    @property
    def collection_name(self) -> str:
        return self.name.split("/")[0]

    @property
    def key(self) -> str:
        return _key(self.type, self.name)


@dataclass(frozen=True)
class SkippedResource:
    type: str
    name: str
    reason: str


@dataclass(frozen=True)
class Plan:
    resources: tuple[PlannedResource, ...]  # in the order they apply
    skipped: tuple[SkippedResource, ...]


def plan(template: Any, deployment: Deployment) -> Plan:
    """The template's Microsoft.Scheduler resources in dependency order, and what it skips."""
    if not isinstance(template, dict):
        raise TemplateError(TEMPLATE, "", f"must be a JSON object, not {kind(template)}")
    resources = template.get("resources")
    if not isinstance(resources, list):
        raise TemplateError(TEMPLATE, "resources", "must be an array of resources")
    try:
        scope = _scope(template, deployment)
        found = list(_flattened(resources, scope, deployment, "resources", None))
    except RecursionError:  # values or variables nested past what a template needs
        raise TemplateError(TEMPLATE, "", "is nested too deeply") from None
    _check_property_values(found, deployment)
    return Plan(_in_order(found, scope), tuple(f for f in found if isinstance(f, SkippedResource)))


# --- parameters and variables ----------------------------------------------------------------


class _Lazy(Mapping[str, Any]):
    """Values evaluated on first read, each once: parameters' defaults and variables may read
    each other, in any order, as long as no value reads itself."""

    def __init__(self, names: list[str], compute: Callable[[str], Any]) -> None:
        self._names, self._compute = names, compute
        self._done: dict[str, Any] = {}
        self._busy: set[str] = set()

    def __getitem__(self, name: str) -> Any:
        if name not in self._done:
            if name in self._busy:
                raise ExpressionError(f"'{name}' reads itself")
            self._busy.add(name)
            try:
                self._done[name] = self._compute(name)
            finally:
                self._busy.discard(name)
        return self._done[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _scope(template: dict[str, Any], deployment: Deployment) -> Scope:
    declared = template.get("parameters") or {}
    variables = template.get("variables") or {}
    if not isinstance(declared, dict) or not isinstance(variables, dict):
        raise TemplateError(TEMPLATE, "parameters", "parameters and variables must be objects")
    given = _given_parameters(deployment.parameters)
    unknown = [name for name in given if name.casefold() not in {d.casefold() for d in declared}]
    if unknown:
        raise TemplateError(
            "parameters", unknown[0], "is given a value but the template declares no such parameter"
        )
    group = {
        "id": f"/subscriptions/{deployment.subscription_id}/resourceGroups/"
        f"{deployment.resource_group}",
        "name": deployment.resource_group,
        "type": "Microsoft.Resources/resourceGroups",
        "properties": {"provisioningState": "Succeeded"},
    }
    if deployment.location is not None:
        group["location"] = deployment.location
    scope_holder: list[Scope] = []

    def parameter(name: str) -> Any:
        return _parameter_value(name, declared[name], given, scope_holder[0])

    def variable(name: str) -> Any:
        return _evaluated(variables[name], scope_holder[0], "variables", name)

    scope = Scope(
        functions=FUNCTIONS,
        parameters=_Lazy(list(declared), parameter),
        variables=_Lazy(list(variables), variable),
        resource_group=group,
        subscription={
            "id": f"/subscriptions/{deployment.subscription_id}",
            "subscriptionId": deployment.subscription_id,
            "tenantId": "",
            "displayName": deployment.subscription_id,
        },
        deployment={"name": deployment.name, "properties": {"mode": "Incremental"}},
        supplied=deployment.expression_values,
        azure_only=AZURE_ONLY,
    )
    scope_holder.append(scope)
    return scope


def _given_parameters(sent: Mapping[str, Any]) -> dict[str, Any]:
    """Parameter values as ARM takes them, `{"name": {"value": ...}}`, or a whole parameters
    file (`{"$schema": ..., "parameters": {...}}`)."""
    if "parameters" in sent and ("$schema" in sent or "contentVersion" in sent):
        sent = sent["parameters"]
        if not isinstance(sent, dict):
            raise TemplateError(
                "parameters", "", "the parameters file's `parameters` must be an object"
            )
    values = {}
    for name, entry in sent.items():
        if isinstance(entry, dict) and "reference" in entry:
            raise TemplateError(
                "parameters", name,
                "is a Key Vault reference, which only Azure can read: give its value instead",
            )  # fmt: skip
        if not isinstance(entry, dict) or "value" not in entry:
            raise TemplateError("parameters", name, 'must be given as {"value": ...}')
        values[name] = entry["value"]
    return values


def _parameter_value(name: str, declared: Any, given: dict[str, Any], scope: Scope) -> Any:
    if not isinstance(declared, dict):
        raise TemplateError("parameters", name, "must be declared as an object with a `type`")
    match = next((key for key in given if key.casefold() == name.casefold()), None)
    if match is not None:
        value = given[match]
    elif "defaultValue" in declared:
        value = _evaluated(declared["defaultValue"], scope, "parameters", f"{name}.defaultValue")
    else:
        raise TemplateError("parameters", name, "has no default value and none was given")
    wanted = str(declared.get("type", "")).casefold()
    check = _PARAMETER_TYPES.get(wanted)
    if check is None:
        raise TemplateError(
            "parameters", f"{name}.type", f"'{declared.get('type')}' is not a parameter type"
        )
    if not check(value):
        raise TemplateError("parameters", name, f"must be {wanted}, not {kind(value)}")
    allowed = declared.get("allowedValues")
    if isinstance(allowed, list) and value not in allowed:
        raise TemplateError(
            "parameters", name, f"{json.dumps(value)[:60]} is not one of its allowedValues"
        )
    return value


# --- resources --------------------------------------------------------------------------------


def _flattened(
    resources: list[Any],
    scope: Scope,
    deployment: Deployment,
    where: str,
    parent: PlannedResource | SkippedResource | None,
) -> Iterator[PlannedResource | SkippedResource | _Declared]:
    for position, resource in enumerate(resources):
        at = f"{where}[{position}]"
        if not isinstance(resource, dict):
            raise TemplateError(at, "", f"a resource must be an object, not {kind(resource)}")
        for index_scope in _copies(resource, scope, at):
            yield from _instance(resource, index_scope, deployment, at, parent)


def _copies(resource: dict[str, Any], scope: Scope, at: str) -> Iterator[Scope]:
    loop = resource.get("copy")
    if loop is None:
        yield scope
        return
    if not isinstance(loop, dict) or not isinstance(loop.get("name"), str):
        raise TemplateError(at, "copy", "must be an object with a `name` and a `count`")
    count = _evaluated(loop.get("count"), scope, at, "copy.count")
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= LONGEST_COPY:
        raise TemplateError(at, "copy.count", f"must be a whole number from 0 to {LONGEST_COPY}")
    for index in range(count):
        yield replace(scope, copy_indexes={**scope.copy_indexes, loop["name"]: index})


@dataclass(frozen=True)
class _Declared:
    """A resource of the template as dependsOn can name it: by id, by type and name, by name,
    or by its copy loop's name."""

    keys: frozenset[str]
    target: str  # the key of the planned or skipped resource


def _instance(
    resource: dict[str, Any],
    scope: Scope,
    deployment: Deployment,
    at: str,
    parent: PlannedResource | SkippedResource | None,
) -> Iterator[PlannedResource | SkippedResource | _Declared]:
    type_ = _full_type(_evaluated(resource.get("type"), scope, at, "type"), parent, at)
    scheduler = type_.casefold() in {COLLECTION_TYPE.casefold(), JOB_TYPE.casefold()}
    name = _name(resource, scope, at, parent, strict=scheduler)
    label = f"resource '{name}' ({type_})"
    loop = resource.get("copy", {}).get("name") if isinstance(resource.get("copy"), dict) else None
    keys = {_key(type_, name), name.casefold(), name.split("/")[-1].casefold()}
    keys.add(_resource_id(deployment, type_, name).casefold())
    if loop:
        keys.add(str(loop).casefold())
    if not scheduler:
        skipped = SkippedResource(type_, name, "not a Microsoft.Scheduler resource")
        yield skipped
        yield _Declared(frozenset(keys), _key(type_, name))
        yield from _children(resource, scope, deployment, at, skipped)
        return
    if parent is not None and isinstance(parent, SkippedResource):
        raise TemplateError(label, "", "a job must be nested in a job collection")
    if "condition" in resource:
        condition = _evaluated(resource["condition"], scope, label, "condition")
        if not isinstance(condition, bool):
            raise TemplateError(label, "condition", f"must be a boolean, not {kind(condition)}")
        if not condition:
            skipped = SkippedResource(type_, name, "its condition is false")
            yield skipped
            yield _Declared(frozenset(keys), _key(type_, name))
            return
    depends = _evaluated(resource.get("dependsOn", []), scope, label, "dependsOn")
    if not isinstance(depends, list) or not all(isinstance(each, str) for each in depends):
        raise TemplateError(label, "dependsOn", "must be an array of resource names or ids")
    if parent is not None:
        depends = [*depends, parent.key]
    values = _values_for(deployment, type_, name)
    body = _body(resource, scope, label, values, job=type_.casefold() == JOB_TYPE.casefold())
    type_ = JOB_TYPE if type_.casefold() == JOB_TYPE.casefold() else COLLECTION_TYPE
    planned = PlannedResource(type_, name, body, tuple(depends))
    yield planned
    yield _Declared(frozenset(keys), planned.key)
    yield from _children(resource, scope, deployment, at, planned)


def _children(
    resource: dict[str, Any],
    scope: Scope,
    deployment: Deployment,
    at: str,
    parent: PlannedResource | SkippedResource,
) -> Iterator[PlannedResource | SkippedResource | _Declared]:
    children = resource.get("resources", [])
    if not isinstance(children, list):
        raise TemplateError(at, "resources", "must be an array of resources")
    yield from _flattened(children, scope, deployment, f"{at}.resources", parent)


def _full_type(type_: Any, parent: PlannedResource | SkippedResource | None, at: str) -> str:
    if not isinstance(type_, str) or not type_:
        raise TemplateError(at, "type", "every resource needs a type")
    if parent is None or "." in type_.split("/")[0]:
        return type_
    return f"{parent.type}/{type_}"


def _name(
    resource: dict[str, Any],
    scope: Scope,
    at: str,
    parent: PlannedResource | SkippedResource | None,
    *,
    strict: bool,
) -> str:
    raw = resource.get("name")
    try:
        name = _evaluated(raw, scope, at, "name")
    except TemplateError:
        if strict:
            raise
        return str(raw)  # a skipped resource is listed by its name as written
    if not isinstance(name, str) or not name:
        raise TemplateError(at, "name", "every resource needs a name")
    return name if parent is None or "/" in name else f"{parent.name}/{name}"


def _body(
    resource: dict[str, Any], scope: Scope, label: str, values: Mapping[str, Any], *, job: bool
) -> dict[str, Any]:
    names = ("properties",) if job else ("location", "tags", "properties")
    body: dict[str, Any] = {}
    for name in names:
        if name in resource:
            body[name] = _evaluated(resource[name], scope, label, name, values)
    for path, value in values.items():
        _set(body, path, value, label)
    return body


def _values_for(deployment: Deployment, type_: str, name: str) -> Mapping[str, Any]:
    for resource, values in deployment.property_values.items():
        if resource.casefold() == name.casefold():
            return values
    return {}


def _set(body: dict[str, Any], path: str, value: Any, label: str) -> None:
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


def _check_property_values(found: list[Any], deployment: Deployment) -> None:
    names = {f.name.casefold() for f in found if isinstance(f, PlannedResource)}
    for resource in deployment.property_values:
        if resource.casefold() not in names:
            raise TemplateError(
                "propertyValues", resource, "names no Microsoft.Scheduler resource of the template"
            )


def _evaluated(
    value: Any, scope: Scope, resource: str, path: str, values: Mapping[str, Any] | None = None
) -> Any:
    """A template value with every expression in it evaluated; `values` given outright by
    their path are taken as they are."""
    if values and path in values:
        return values[path]
    if isinstance(value, dict):
        if isinstance(value.get("copy"), list) and path.startswith("properties"):
            raise TemplateError(resource, f"{path}.copy", "property copy loops are not supported")
        return {
            key: _evaluated(item, scope, resource, f"{path}.{key}", values)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [
            _evaluated(item, scope, resource, f"{path}[{index}]", values)
            for index, item in enumerate(value)
        ]
    if not is_expression(value):
        return unescaped(value) if isinstance(value, str) else value
    try:
        return scope.evaluate(parse(value[1:-1]))
    except TemplateError:
        raise
    except ExpressionError as failed:
        raise TemplateError(resource, path, str(failed), expression=value) from None
    except RecursionError:
        raise TemplateError(resource, path, "is nested too deeply", expression=value) from None


# --- order ------------------------------------------------------------------------------------


def _key(type_: str, name: str) -> str:
    return f"{type_}/{name}".casefold()


def _resource_id(deployment: Deployment, type_: str, name: str) -> str:
    namespace, *types = type_.split("/")
    path = "/".join(f"{t}/{n}" for t, n in zip(types, name.split("/"), strict=False))
    return (
        f"/subscriptions/{deployment.subscription_id}/resourceGroups/"
        f"{deployment.resource_group}/providers/{namespace}/{path}"
    )


def _in_order(found: list[Any], scope: Scope) -> tuple[PlannedResource, ...]:
    """The planned resources, each after those it depends on (template order otherwise);
    dependencies on skipped resources are dropped, since nothing here applies them."""
    planned = [f for f in found if isinstance(f, PlannedResource)]
    declared = [f for f in found if isinstance(f, _Declared)]
    by_key = {p.key: p for p in planned}
    needs: dict[str, set[str]] = {}
    for resource in planned:
        label = f"resource '{resource.name}' ({resource.type})"
        wanted: set[str] = set()
        for position, named in enumerate(resource.depends_on):
            targets = {d.target for d in declared if named.casefold() in d.keys}
            if not targets:
                raise TemplateError(
                    label, f"dependsOn[{position}]", "names no resource of the template",
                    expression=named,
                )  # fmt: skip
            wanted |= {target for target in targets if target in by_key}
        if resource.is_job:
            parent = _key(COLLECTION_TYPE, resource.collection_name)
            if parent in by_key:
                wanted.add(parent)
        needs[resource.key] = wanted - {resource.key}
    ordered: list[PlannedResource] = []
    done: set[str] = set()
    while len(ordered) < len(planned):
        ready = [p for p in planned if p.key not in done and needs[p.key] <= done]
        if not ready:
            stuck = next(p for p in planned if p.key not in done)
            raise TemplateError(
                f"resource '{stuck.name}' ({stuck.type})", "dependsOn",
                "the resources depend on each other in a circle",
            )  # fmt: skip
        ordered.append(ready[0])
        done.add(ready[0].key)
    _refuse_duplicates(ordered)
    return tuple(ordered)


def _refuse_duplicates(ordered: list[PlannedResource]) -> None:
    seen: set[str] = set()
    for resource in ordered:
        if resource.key in seen:
            raise TemplateError(
                f"resource '{resource.name}' ({resource.type})", "name",
                "is defined more than once in the template",
            )  # fmt: skip
        seen.add(resource.key)
