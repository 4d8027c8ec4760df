"""A template's values evaluated as ARM evaluates them: parameters (with defaults, types,
allowed values and a parameters file), variables, and every expression in a value. Pure: no
I/O, no clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from shared.domain.problems import json_type as kind
from shared.domain.templates.deployment import TEMPLATE, Deployment, TemplateError
from shared.domain.templates.expressions import (
    ExpressionError,
    Meter,
    Scope,
    by_call,
    is_expression,
    unescaped,
)
from shared.domain.templates.functions import AZURE_ONLY, FUNCTIONS
from shared.domain.wire import JsonObject

# The most copies one copy loop makes (of a resource or of a variable's values), as in ARM.
LONGEST_COPY = 800
# A variable's name that holds its copy loops rather than a value (ARM's variable iteration).
LOOPS = "copy"
_SECURE_TYPES = frozenset({"securestring", "secureobject"})

_PARAMETER_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "securestring": lambda value: isinstance(value, str),
    "int": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "bool": lambda value: isinstance(value, bool),
    "object": lambda value: isinstance(value, dict),
    "secureobject": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
}


class _Lazy(Mapping[str, Any]):
    """Values evaluated on first read, each once: parameters' defaults and variables may read
    each other, in any order, as long as no value reads itself."""

    def __init__(self, names: list[str], compute: Callable[[str], Any]) -> None:
        self._names, self._compute = names, compute
        self._done: dict[str, object] = {}
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


def scope_of(template: JsonObject, deployment: Deployment) -> Scope:
    """What the template's expressions read: its parameters and variables (each evaluated on
    first read), and the resource group, subscription and deployment it is applied to."""
    declared = template.get("parameters") or {}
    variables = template.get("variables") or {}
    if not isinstance(declared, dict) or not isinstance(variables, dict):
        raise TemplateError(TEMPLATE, "parameters", "parameters and variables must be objects")
    given = _given_parameters(deployment.parameters)
    folded = {name.casefold(): name for name in declared}
    unknown = [name for name in given if name.casefold() not in folded]
    if unknown:
        raise TemplateError(
            "parameters", unknown[0], "is given a value but the template declares no such parameter"
        )
    _refuse_missing(declared, given)
    _refuse_placeholders(given)
    secrets: set[str] = set()
    for name, value in given.items():
        if _is_secure(declared[folded[name.casefold()]]):
            secrets |= secret_forms(value)
    loops = variable_loops(variables)
    meter = Meter()
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
        value = _parameter_value(name, declared[name], given, scope_holder[0])
        if _is_secure(declared[name]):
            secrets.update(secret_forms(value))
        return value

    def variable(name: str) -> Any:
        if name in loops:
            return _loop_values(loops[name], scope_holder[0], "variables", name)
        return evaluated(variables[name], scope_holder[0], "variables", name)

    plain = [name for name in variables if not (name == LOOPS and loops)]
    scope = Scope(
        functions=FUNCTIONS,
        parameters=_Lazy(list(declared), parameter),
        variables=_Lazy(plain + list(loops), variable),
        resource_group=group,
        subscription={
            "id": f"/subscriptions/{deployment.subscription_id}",
            "subscriptionId": deployment.subscription_id,
            "tenantId": "",
            "displayName": deployment.subscription_id,
        },
        deployment={"name": deployment.name, "properties": {"mode": "Incremental"}},
        supplied=_supplied(deployment.expression_values, meter),
        azure_only=AZURE_ONLY,
        meter=meter,
        secrets=secrets,
    )
    scope_holder.append(scope)
    return scope


def _supplied(values: Mapping[str, Any], meter: Meter) -> dict[str, Any]:
    try:
        return by_call(values, meter)
    except ExpressionError as failed:
        raise TemplateError(
            "expressionValues", "", f"a call's text is not an expression: it {failed}"
        ) from None


def _is_secure(declared: Any) -> bool:
    return isinstance(declared, dict) and str(declared.get("type", "")).casefold() in _SECURE_TYPES


def secret_forms(value: Any) -> set[str]:
    """The texts of a secure parameter's value (each string in it), as written and as JSON and
    Python would quote them: what a message must not show."""
    if isinstance(value, dict):
        return {form for item in value.values() for form in secret_forms(item)}
    if isinstance(value, list):
        return {form for item in value for form in secret_forms(item)}
    if not isinstance(value, str):
        return set()
    return {value, json.dumps(value)[1:-1], repr(value)[1:-1]}


def variable_loops(variables: JsonObject) -> dict[str, JsonObject]:
    """The variables made by copy loops (`"variables": {"copy": [...]}`), by name."""
    loops = variables.get(LOOPS)
    if not isinstance(loops, list):
        return {}
    named: dict[str, JsonObject] = {}
    for position, loop in enumerate(loops):
        _check_loop(loop, "variables", f"{LOOPS}[{position}]")
        if loop["name"] in variables or loop["name"] in named:
            raise TemplateError(
                "variables", f"{LOOPS}[{position}].name", "names a variable declared already"
            )
        named[loop["name"]] = loop
    return named


def _check_loop(loop: Any, resource: str, path: str) -> None:
    named = isinstance(loop, dict) and isinstance(loop.get("name"), str) and loop["name"]
    if not named or "count" not in loop or "input" not in loop:
        raise TemplateError(
            resource, path, "must be an object with a `name`, a `count` and an `input`"
        )


def _loop_values(loop: JsonObject, scope: Scope, resource: str, path: str) -> list[Any]:
    """A variable's copy loop: its `input` evaluated once per index, as an array."""
    name = loop["name"]
    count = copy_count(loop["count"], scope, resource, f"{path}.count")
    return [
        evaluated(
            loop["input"],
            replace(scope, copy_indexes={**scope.copy_indexes, name: index}),
            resource,
            f"{path}[{index}]",
        )
        for index in range(count)
    ]


def copy_count(count: Any, scope: Scope, resource: str, path: str) -> int:
    """A copy loop's `count`, evaluated: a whole number from 0 to LONGEST_COPY."""
    value = evaluated(count, scope, resource, path)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LONGEST_COPY:
        raise TemplateError(resource, path, f"must be a whole number from 0 to {LONGEST_COPY}")
    return value


def _given_parameters(sent: Mapping[str, Any]) -> JsonObject:
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


# The Azure quickstart gallery's parameters files hold placeholders that its deployment tooling
# fills in (GEN-UNIQUE, GEN-UNIQUE-8, GEN-PASSWORD, GEN-GUID...): taken as they are, they become
# a namespace or a password named "GEN-UNIQUE".
_GALLERY_PLACEHOLDER = re.compile(r"GEN-[A-Z0-9]+(?:-[A-Z0-9]+)*")


def _refuse_placeholders(given: JsonObject) -> None:
    for name, value in given.items():
        if isinstance(value, str) and _GALLERY_PLACEHOLDER.fullmatch(value):
            raise TemplateError(
                "parameters", name,
                f"is '{value}', a placeholder of the Azure quickstart gallery's parameters files "
                "that its tooling replaces before deploying: give your own value",
            )  # fmt: skip


def _refuse_missing(declared: JsonObject, given: JsonObject) -> None:
    """Every parameter without a default must be given, as ARM requires before it evaluates
    anything, read or not; all that are missing are named at once, so that one try says what
    the next must bring."""
    folded = {name.casefold() for name in given}
    missing = [
        name
        for name, declaration in declared.items()
        if isinstance(declaration, dict)
        and "defaultValue" not in declaration
        and name.casefold() not in folded
    ]
    if len(missing) == 1:
        raise TemplateError("parameters", missing[0], "has no default value and none was given")
    if missing:
        names = ", ".join(f"'{name}'" for name in missing)
        raise TemplateError(
            "parameters", "", f"{len(missing)} have no default value and none was given: {names}"
        )


def _parameter_value(name: str, declared: Any, given: JsonObject, scope: Scope) -> Any:
    if not isinstance(declared, dict):
        raise TemplateError("parameters", name, "must be declared as an object with a `type`")
    match = next((key for key in given if key.casefold() == name.casefold()), None)
    if match is not None:
        value = given[match]
    elif "defaultValue" in declared:
        value = evaluated(declared["defaultValue"], scope, "parameters", f"{name}.defaultValue")
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
        if wanted in _SECURE_TYPES:  # a secure value is never shown, not even in part
            raise TemplateError("parameters", name, "its value is not one of its allowedValues")
        raise TemplateError(
            "parameters", name, f"{json.dumps(value)[:60]} is not one of its allowedValues"
        )
    return value


def evaluated(
    value: Any, scope: Scope, resource: str, path: str, values: Mapping[str, Any] | None = None
) -> Any:
    """A template value with every expression in it evaluated; `values` given outright by
    their path are taken as they are."""
    if values and path in values:
        return values[path]
    if isinstance(value, dict):
        loops = value.get(LOOPS)
        if isinstance(loops, list) and path.startswith("properties"):
            raise TemplateError(resource, f"{path}.copy", "property copy loops are not supported")
        made = {
            key: evaluated(item, scope, resource, f"{path}.{key}", values)
            for key, item in value.items()
            if not (key == LOOPS and isinstance(loops, list) and resource == "variables")
        }
        if isinstance(loops, list) and resource == "variables":  # copy loops in a variable
            for position, loop in enumerate(loops):
                at = f"{path}.{LOOPS}[{position}]"
                _check_loop(loop, resource, at)
                made[loop["name"]] = _loop_values(loop, scope, resource, at)
        return made
    if isinstance(value, list):
        return [
            evaluated(item, scope, resource, f"{path}[{index}]", values)
            for index, item in enumerate(value)
        ]
    if not is_expression(value):
        return unescaped(value) if isinstance(value, str) else value
    try:
        return scope.evaluate(scope.meter.parse(value[1:-1]))
    except TemplateError:
        raise
    except ExpressionError as failed:
        raise TemplateError(resource, path, str(failed), expression=value) from None
    except RecursionError:
        raise TemplateError(resource, path, "is nested too deeply", expression=value) from None
    except Exception as failed:  # the last resort: a fault here is the template's
        # What went wrong is named by its kind only: its text may quote a secure value.
        raise TemplateError(
            resource, path,
            f"cannot be evaluated: it fails with {type(failed).__name__}",
            expression=value,
        ) from None  # fmt: skip
