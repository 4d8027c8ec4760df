"""A deployment template read as ARM reads it, down to the Microsoft.Scheduler resources it
holds, in the order they apply: `plan`. Its values are evaluated by `evaluation.py` and its
resources walked by `resources.py`; here they are put in dependency order. Every problem is a
TemplateError that names the resource, the property and the expression. Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
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
from shared.domain.templates.evaluation import scope_of, secret_forms
from shared.domain.templates.limits import check_declarations, check_sizes, count_resources
from shared.domain.templates.resources import Declared, check_property_values, flattened


def plan(template: Any, deployment: Deployment) -> Plan:
    """The template's Microsoft.Scheduler resources in dependency order, and what it skips.
    ARM's limits are checked before anything is expanded (limits.py). Whatever fails is a
    TemplateError, and none shows a secure parameter's value."""
    if not isinstance(template, dict):
        raise TemplateError(TEMPLATE, "", f"must be a JSON object, not {kind(template)}")
    resources = template.get("resources")
    if not isinstance(resources, list):
        raise TemplateError(TEMPLATE, "resources", "must be an array of resources")
    secrets: set[str] = set()
    try:
        check_declarations(template)
        scope = scope_of(template, deployment)
        secrets = scope.secrets
        check_sizes(template, deployment.parameters, count_resources(resources, scope))
        found = list(flattened(resources, scope, deployment, "resources", None))
        check_property_values(found, deployment)
        ordered = _in_order(found)
    except TemplateError as failed:
        raise failed.masking(secrets | _given_secrets(template, deployment)) from None
    except RecursionError:  # values or variables nested past what a template needs
        raise TemplateError(TEMPLATE, "", "is nested too deeply") from None
    except Exception as failed:  # the last resort: a fault here is the template's
        # Named by its kind only: the text of a Python error may quote a secure value.
        raise TemplateError(
            TEMPLATE, "", f"cannot be read: it fails with {type(failed).__name__}"
        ) from None
    skipped = tuple(f for f in found if isinstance(f, SkippedResource))
    return Plan(ordered, skipped, frozenset(secrets))


def _given_secrets(template: dict[str, Any], deployment: Deployment) -> set[str]:
    """The values given for secure parameters, found without evaluating anything: what an
    error raised before the parameters were read must not show either."""
    declared = template.get("parameters")
    if not isinstance(declared, dict):
        return set()
    secure = {
        name.casefold()
        for name, spec in declared.items()
        if isinstance(spec, dict)
        and str(spec.get("type", "")).casefold() in {"securestring", "secureobject"}
    }
    sent = deployment.parameters
    if "parameters" in sent and isinstance(sent["parameters"], dict):
        sent = sent["parameters"]  # a whole parameters file
    found: set[str] = set()
    for name, entry in sent.items():
        if name.casefold() in secure and isinstance(entry, dict):
            found |= secret_forms(entry.get("value"))
    return found


def _in_order(found: list[Any]) -> tuple[PlannedResource, ...]:
    """The planned resources, each after those it depends on (template order otherwise);
    dependencies on skipped resources are dropped, since nothing here applies them. One pass
    over the resources and their dependencies (and a heap of those ready)."""
    planned = [f for f in found if isinstance(f, PlannedResource)]
    _refuse_duplicates(planned)
    position_of = {p.key: position for position, p in enumerate(planned)}
    targets_of: dict[str, set[str]] = {}  # how dependsOn may name a resource -> its keys
    for declared in (f for f in found if isinstance(f, Declared)):
        for key in declared.keys:
            targets_of.setdefault(key, set()).add(declared.target)
    waits_for: list[int] = [0] * len(planned)
    unblocks: list[list[int]] = [[] for _ in planned]
    for position, resource in enumerate(planned):
        label = f"resource '{resource.name}' ({resource.type})"
        wanted: set[int] = set()
        for number, named in enumerate(resource.depends_on):
            targets = targets_of.get(named.casefold())
            if not targets:
                raise TemplateError(
                    label, f"dependsOn[{number}]", "names no resource of the template",
                    expression=named,
                )  # fmt: skip
            wanted |= {position_of[t] for t in targets if t in position_of}
        if resource.is_job:
            parent = position_of.get(resource_key(COLLECTION_TYPE, resource.collection_name))
            if parent is not None:
                wanted.add(parent)
        wanted.discard(position)
        waits_for[position] = len(wanted)
        for each in wanted:
            unblocks[each].append(position)
    ready = [position for position, count in enumerate(waits_for) if count == 0]
    heapq.heapify(ready)
    ordered: list[PlannedResource] = []
    while ready:
        position = heapq.heappop(ready)
        ordered.append(planned[position])
        for after in unblocks[position]:
            waits_for[after] -= 1
            if waits_for[after] == 0:
                heapq.heappush(ready, after)
    if len(ordered) < len(planned):
        stuck = next(p for p, count in zip(planned, waits_for, strict=True) if count)
        raise TemplateError(
            f"resource '{stuck.name}' ({stuck.type})", "dependsOn",
            "the resources depend on each other in a circle",
        )  # fmt: skip
    return tuple(ordered)


def _refuse_duplicates(planned: list[PlannedResource]) -> None:
    seen: set[str] = set()
    for resource in planned:
        if resource.key in seen:
            raise TemplateError(
                f"resource '{resource.name}' ({resource.type})", "name",
                "is defined more than once in the template",
            )  # fmt: skip
        seen.add(resource.key)
