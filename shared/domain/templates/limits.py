"""ARM's limits on a template (docs/security.md#template-limits), checked before any of it is
expanded: how many parameters, variables, outputs and resources it declares, how large it is,
and how long its expressions are. Resources are counted with their copies, multiplied through
copy loops nested in copy loops, from the loops' counts alone: a template that would make more
than 800 is refused without making one. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shared.domain.templates.deployment import TEMPLATE, TemplateError
from shared.domain.templates.evaluation import copy_count, variable_loops
from shared.domain.templates.expressions import LONGEST_EXPRESSION, Scope, is_expression
from shared.domain.wire import JsonObject

MOST_PARAMETERS = 256
MOST_VARIABLES = 512
MOST_OUTPUTS = 64
MOST_RESOURCES = 800  # counting copies
# Sizes are characters of compact JSON. ARM applies them to the template as expanded (copies
# made, variables and parameters put in): here the template as sent, each resource's
# definition, and the definitions times their copies, before expansion; then each resource's
# body as evaluated (shared/domain/templates/resources.py).
LARGEST_TEMPLATE = 4 * 1024 * 1024
LARGEST_RESOURCE = 1024 * 1024
LARGEST_PARAMETERS = 4 * 1024 * 1024  # the parameters (file) given with it


def check_declarations(template: JsonObject) -> None:
    """Refuses a template that declares more parameters, variables or outputs than ARM allows."""
    for section, most in (("parameters", MOST_PARAMETERS), ("outputs", MOST_OUTPUTS)):
        declared = template.get(section)
        if isinstance(declared, dict) and len(declared) > most:
            raise TemplateError(
                TEMPLATE, section, f"declares {len(declared):,}; ARM allows at most {most}"
            )
    variables = template.get("variables")
    if isinstance(variables, dict):
        looped = variable_loops(variables)
        count = len(variables) - (1 if looped else 0) + len(looped)
        if count > MOST_VARIABLES:
            raise TemplateError(
                TEMPLATE, "variables",
                f"declares {count:,}{' (counting those made by copy loops)' if looped else ''}; "
                f"ARM allows at most {MOST_VARIABLES}",
            )  # fmt: skip


@dataclass(frozen=True)
class Counted:
    """A resource definition of the template, and how many resources it makes."""

    at: str  # where it is in the template
    definition: JsonObject  # without the resources nested in it
    instances: int


def count_resources(resources: list[Any], scope: Scope) -> list[Counted]:
    """Each resource definition with how many resources it makes, counting copies multiplied
    through copy loops nested in copy loops; refuses a template that would make more than
    MOST_RESOURCES. Only the loops' counts are evaluated (a nested loop's with its enclosing
    loops at their first index), and nothing is made; what is malformed is left for the walk
    through the resources to name."""
    tally = _Tally()
    _count(resources, scope, "resources", 1, tally)
    return tally.counted


@dataclass
class _Tally:
    made: int = 0  # resources, copies counted
    counted: list[Counted] = field(default_factory=list)


def _count(resources: list[Any], scope: Scope, where: str, times: int, tally: _Tally) -> None:
    for position, resource in enumerate(resources):
        at = f"{where}[{position}]"
        if not isinstance(resource, dict):
            continue
        loop, copies, inner = resource.get("copy"), 1, scope
        looped = isinstance(loop, dict) and isinstance(loop.get("name"), str)
        if isinstance(loop, dict) and looped:
            copies = copy_count(loop.get("count"), scope, at, "copy.count")
            inner = replace(scope, copy_indexes={**scope.copy_indexes, loop["name"]: 0})
        instances = times * copies
        definition = {key: value for key, value in resource.items() if key != "resources"}
        tally.counted.append(Counted(at, definition, instances))
        tally.made += instances
        if tally.made > MOST_RESOURCES:
            made = f"{copies:,} copies" if looped else "once"
            if times > 1:
                made = f" ({made} in each of {times:,} copies of the resource it is nested in)"
            elif looped:
                made = f" ({made})"
            else:
                made = ""
            raise TemplateError(
                at, "copy.count" if looped else "",
                f"brings the template to {tally.made:,} resources counting copies{made}; "
                f"ARM allows at most {MOST_RESOURCES}",
            )  # fmt: skip
        children = resource.get("resources")
        if instances and isinstance(children, list):
            _count(children, inner, f"{at}.resources", instances, tally)


def check_sizes(
    template: JsonObject, parameters: Mapping[str, Any], counted: list[Counted]
) -> None:
    """Refuses a template larger than ARM allows, as sent or with its resource definitions
    each taken as many times as it is copied; a resource definition larger than
    LARGEST_RESOURCE; an expression longer than LONGEST_EXPRESSION; and parameters larger than
    a parameters file may be."""
    size = json_size(template)
    if size > LARGEST_TEMPLATE:
        raise TemplateError(
            TEMPLATE, "", f"is {size:,} characters of JSON; ARM allows at most {LARGEST_TEMPLATE:,}"
        )
    if json_size(dict(parameters)) > LARGEST_PARAMETERS:
        raise TemplateError(
            "parameters", "", f"are more than {LARGEST_PARAMETERS:,} characters of JSON"
        )
    if size > LONGEST_EXPRESSION and _holds_too_long_an_expression(template):
        path, text = next(
            (path, text)
            for path, text in _strings(template, "")
            if is_expression(text) and len(text) - 2 > LONGEST_EXPRESSION
        )
        raise TemplateError(
            TEMPLATE, path.lstrip("."),
            f"is an expression of {len(text) - 2:,} characters; "
            f"ARM allows at most {LONGEST_EXPRESSION:,}",
        )  # fmt: skip
    expanded = 0
    for each in counted:
        size = json_size(each.definition)
        if size > LARGEST_RESOURCE:
            raise TemplateError(
                each.at, "",
                f"is {size:,} characters of JSON; ARM allows at most {LARGEST_RESOURCE:,}",
            )  # fmt: skip
        expanded += size * each.instances
        if expanded > LARGEST_TEMPLATE:
            raise TemplateError(
                each.at, "",
                f"brings the template, its copies made, to more than {LARGEST_TEMPLATE:,} "
                "characters of JSON, the most ARM allows",
            )  # fmt: skip


def json_size(value: Any) -> int:
    """How many characters `value` takes as compact JSON."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def _holds_too_long_an_expression(template: JsonObject) -> bool:
    # A loop rather than _strings: this runs on every template, _strings only to say where.
    waiting: list[Any] = [template]
    while waiting:
        value = waiting.pop()
        if isinstance(value, dict):
            waiting.extend(value.values())
        elif isinstance(value, list):
            waiting.extend(value)
        elif (
            isinstance(value, str) and len(value) - 2 > LONGEST_EXPRESSION and is_expression(value)
        ):
            return True
    return False


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string of a JSON value with its path: object keys are never expressions."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str | dict | list):
                yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str | dict | list):
                yield from _strings(item, f"{path}[{index}]")
