"""A deployment: where a template is applied and the values given for it, and what planning it
yields: the Microsoft.Scheduler resources it holds, each with its body as a PUT would send it,
and those it skips. `planning.py` makes the plan; every problem on the way is a TemplateError.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.domain.ids import JOB_TYPE
from shared.domain.problems import RuleBroken
from shared.domain.redaction import masked_values
from shared.domain.wire import JsonObject, WireEnum

# How errors name the template as a whole.
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

    def masking(self, secrets: Collection[str]) -> TemplateError:
        """The same error with the given secret values masked wherever it would quote them."""
        if not secrets:
            return self
        return TemplateError(
            masked_values(self.resource, secrets),
            masked_values(self.property, secrets),
            masked_values(self.problem, secrets),
            expression=None if self.expression is None else masked_values(self.expression, secrets),
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
    body: JsonObject
    depends_on: tuple[str, ...] = ()

    @property
    def is_job(self) -> bool:
        return self.type == JOB_TYPE

    @property
    def collection_name(self) -> str:
        return self.name.split("/")[0]

    @property
    def key(self) -> str:
        return resource_key(self.type, self.name)


@dataclass(frozen=True)
class SkippedResource:
    type: str
    name: str
    reason: str


@dataclass(frozen=True)
class Plan:
    resources: tuple[PlannedResource, ...]  # in the order they apply
    skipped: tuple[SkippedResource, ...]
    # The values of the template's secure parameters (securestring, secureObject), in the
    # forms a message could quote them: never shown, and never compared by what-if.
    secrets: frozenset[str] = frozenset()


def resource_key(type_: str, name: str) -> str:
    """How a resource is told apart from the others: its type and name, in any case."""
    return f"{type_}/{name}".casefold()
