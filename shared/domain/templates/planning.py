"""A deployment template read as ARM reads it, down to the Microsoft.Scheduler resources it
holds, in the order they apply: `plan`. Its values are evaluated by `evaluation.py` and its
resources walked by `resources.py`; here they are put in dependency order. Every problem is a
TemplateError that names the resource, the property and the expression. Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

from shared.domain.ids import COLLECTION_TYPE
from shared.domain.problems import json_type as kind
from shared.domain.templates.deployment import (
    TEMPLATE,
    Deployment,
    Plan,
    PlannedResource,
    SkippedResource,
    TemplateError,
    resource_key,
)
from shared.domain.templates.evaluation import scope_of
from shared.domain.templates.expressions import Scope
from shared.domain.templates.resources import Declared, check_property_values, flattened


def plan(template: Any, deployment: Deployment) -> Plan:
    """The template's Microsoft.Scheduler resources in dependency order, and what it skips."""
    if not isinstance(template, dict):
        raise TemplateError(TEMPLATE, "", f"must be a JSON object, not {kind(template)}")
    resources = template.get("resources")
    if not isinstance(resources, list):
        raise TemplateError(TEMPLATE, "resources", "must be an array of resources")
    try:
        scope = scope_of(template, deployment)
        found = list(flattened(resources, scope, deployment, "resources", None))
    except RecursionError:  # values or variables nested past what a template needs
        raise TemplateError(TEMPLATE, "", "is nested too deeply") from None
    check_property_values(found, deployment)
    return Plan(_in_order(found, scope), tuple(f for f in found if isinstance(f, SkippedResource)))


def _in_order(found: list[Any], scope: Scope) -> tuple[PlannedResource, ...]:
    """The planned resources, each after those it depends on (template order otherwise);
    dependencies on skipped resources are dropped, since nothing here applies them."""
    planned = [f for f in found if isinstance(f, PlannedResource)]
    declared = [f for f in found if isinstance(f, Declared)]
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
            parent = resource_key(COLLECTION_TYPE, resource.collection_name)
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
