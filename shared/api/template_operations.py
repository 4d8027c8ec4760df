"""Templates in and out (docs/templates.md): a deployment template's Microsoft.Scheduler
resources applied to a resource group, and collections written back as a template."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError, WithJsonSchema, model_validator

from shared.api.arm import ApiRequest, ApiResponse
from shared.api.collection_operations import collection_id
from shared.api.errors import arm_error
from shared.domain.ids import valid_resource_group, valid_subscription
from shared.domain.problems import InvalidRequest
from shared.domain.redaction import masked_values
from shared.domain.templates.deployment import Deployment, ImportMode
from shared.domain.templates.export import ExportedCollection, exported_template
from shared.domain.templates.planning import plan
from shared.domain.wire import IgnoredProperty, Instant, JsonObject, WireModel
from shared.execution.template_import import TemplateImport
from shared.services import Services
from shared.storage.interface import StoredCollection

# What the OpenAPI document says of a template and its parameters: the shape the import reads
# (shared/domain/templates/planning.py checks it, with messages in the template's terms).
_RESOURCE_SCHEMA = {
    "type": "object",
    "required": ["type", "name"],
    "properties": {"type": {"type": "string"}, "name": {"type": "string", "minLength": 1}},
}
_TEMPLATE_SCHEMA = {
    "type": "object",
    "required": ["resources"],
    "properties": {
        "parameters": {"type": "object"},
        "variables": {"type": "object"},
        "resources": {"type": "array", "items": _RESOURCE_SCHEMA},
    },
}
_PARAMETERS_SCHEMA = {
    "type": "object",
    "additionalProperties": {"type": "object", "required": ["value"]},
}


_NEXT_WHOLE_MINUTE = "nextwholeminute"
_INSTANT: TypeAdapter[datetime] = TypeAdapter(Instant)


class DefaultStartTime(WireModel):
    """`defaultStartTime`: "NextWholeMinute" or an instant (no offset: UTC)."""

    instant: Instant | None = None

    @model_validator(mode="before")
    @classmethod
    def _read(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().casefold() == _NEXT_WHOLE_MINUTE:
            return {"instant": None}
        if isinstance(value, str):
            try:
                return {"instant": _INSTANT.validate_python(value)}
            except ValidationError:
                pass
        shown = f", not '{value[:64]}'" if isinstance(value, str) else ""
        raise ValueError(f"must be NextWholeMinute or an ISO 8601 date-time{shown}")

    def at(self, now: datetime) -> datetime:
        """The start time it gives, for an import at `now`."""
        if self.instant is not None:
            return self.instant
        return now.replace(second=0, microsecond=0) + timedelta(minutes=1)


class ImportRequest(WireModel):
    """What an import takes: the template (JSON, as `az bicep build` or the portal's export
    writes it) and what it needs that only the caller knows."""

    template: Annotated[JsonObject, WithJsonSchema(_TEMPLATE_SCHEMA)]
    # ARM's {"name": {"value": ...}}, or a whole parameters file
    parameters: Annotated[JsonObject | None, WithJsonSchema(_PARAMETERS_SCHEMA)] = None
    mode: ImportMode = ImportMode.INCREMENTAL
    what_if: bool = False
    location: str | None = None  # what resourceGroup().location gives
    expression_values: JsonObject | None = None  # by the call's text
    property_values: dict[str, JsonObject] | None = None  # by resource name, then property path
    default_start_time: Annotated[
        DefaultStartTime | None,
        Field(
            description="An extension: the startTime given to the template's jobs that have "
            "none: NextWholeMinute, or an ISO 8601 instant. Absent: such a job runs at once "
            "when imported, as when it is saved through PUT."
        ),
    ] = None


# The OpenAPI document's schemas of the answers (the request's comes from ImportRequest).
SCHEMAS: JsonObject = {
    "ImportReport": {
        "type": "object",
        "required": ["status", "mode", "whatIf", "summary", "resources"],
        "properties": {
            "status": {"type": "string", "enum": ["Succeeded", "Failed"]},
            "mode": {"type": "string"},
            "whatIf": {"type": "boolean"},
            "summary": {"type": "object", "additionalProperties": {"type": "integer"}},
            "resources": {"type": "array", "items": {"type": "object"}},
        },
    },
    "ExportedTemplate": {
        "type": "object",
        "required": ["template"],
        "properties": {"template": {"type": "object"}},
    },
}


def import_template(request: ApiRequest, services: Services) -> ApiResponse:
    """Apply a template's job collections and jobs to the resource group, in dependency order;
    one outcome per resource. A failure half way answers the error and what was applied."""
    subscription = valid_subscription(request.route["subscriptionId"])
    group = valid_resource_group(request.route["resourceGroupName"])
    sent = request.parsed_body(ImportRequest)
    location = sent.location or _location_of(
        services.storage.collections.collections(subscription, group)
    )
    if location is None and b"resourcegroup().location" in request.body.lower():
        raise InvalidRequest.because(
            "location",
            "the template reads resourceGroup().location, which this service keeps no resource "
            "groups to know, and no collection of the group has a location to take it from: "
            "give location (--location; Location on the console's import page)",
        )
    deployment = Deployment(
        subscription, group, location,
        parameters=sent.parameters or {},
        expression_values=sent.expression_values or {},
        property_values=sent.property_values or {},
    )  # fmt: skip
    planned = plan(sent.template, deployment)
    now = services.now()
    report = TemplateImport(services.storage, services.scheduling).apply(
        planned, subscription, group, now, mode=sent.mode, what_if=sent.what_if,
        default_start=None if sent.default_start_time is None else sent.default_start_time.at(now),
    )  # fmt: skip
    for outcome in report.resources:
        request.ignored.extend(
            IgnoredProperty(f"{outcome.name}: {each.path}", each.belongs_in)
            for each in outcome.ignored
        )
    if report.failure is None:
        return ApiResponse(200, report.to_wire())
    error = arm_error(report.failure)
    if error is None:  # pragma: no cover (apply reports only the failures it knows)
        raise report.failure
    # A rule's message may quote the value it refuses: never a secure parameter's.
    envelope = _masked(error.envelope, planned.secrets)
    return ApiResponse(error.status, {**envelope, **report.to_wire()})


def _masked(value: Any, secrets: frozenset[str]) -> Any:
    """A JSON value with the secrets in its strings masked."""
    if isinstance(value, str):
        return masked_values(value, secrets)
    if isinstance(value, dict):
        return {key: _masked(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item, secrets) for item in value]
    return value


def export_resource_group(request: ApiRequest, services: Services) -> ApiResponse:
    """Every collection of the resource group, with its jobs, as one template."""
    subscription = valid_subscription(request.route["subscriptionId"])
    group = valid_resource_group(request.route["resourceGroupName"])
    return _exported(services, services.storage.collections.collections(subscription, group))


def export_collection(request: ApiRequest, services: Services) -> ApiResponse:
    """One collection with its jobs as a template."""
    return _exported(
        services, [services.storage.collections.existing_collection(collection_id(request))]
    )


def _exported(services: Services, collections: list[StoredCollection]) -> ApiResponse:
    exported = [
        ExportedCollection(
            stored.id.name,
            stored.document,
            [(job.id.name, job.document) for job in services.storage.jobs.jobs(stored.id)],
        )
        for stored in collections
    ]
    # As ARM's own export answers: the template under `template`.
    return ApiResponse(200, {"template": exported_template(exported)})


def _location_of(collections: list[StoredCollection]) -> str | None:
    """The resource group's location, as far as this service knows one: its collections'."""
    return next((c.document.location for c in collections if c.document.location), None)
