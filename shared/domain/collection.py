"""Job collections: their body on the wire, and the quotas each SKU brings.

See docs/behaviour.md#collections and #quotas.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from shared.domain.schedule.recurrence import Frequency, Positive
from shared.domain.wire import WireEnum, WireModel


class SkuName(WireEnum):
    FREE = "Free"
    STANDARD = "Standard"
    P10_PREMIUM = "P10Premium"
    P20_PREMIUM = "P20Premium"


class CollectionState(WireEnum):
    ENABLED = "Enabled"
    DISABLED = "Disabled"
    SUSPENDED = "Suspended"
    DELETED = "Deleted"


class Sku(WireModel):
    name: SkuName


class MaxRecurrence(WireModel):
    """The most often a job of the collection may recur: once per `interval` `frequency`s."""

    frequency: Frequency
    interval: Positive = 1


class Quota(WireModel):
    max_job_count: Positive | None = None
    max_job_occurrence: Positive | None = None
    max_recurrence: MaxRecurrence | None = None


class CollectionProperties(WireModel):
    sku: Sku | None = None
    state: CollectionState | None = None
    quota: Quota | None = None


class CollectionBody(WireModel):
    """A collection as a client sends it (PUT whole, PATCH in part).

    `id`, `type` and `name` are read-only: accepted, so that a client may send back what a GET
    gave it, and ignored.
    """

    id: str | None = None
    type: str | None = None
    name: str | None = None
    location: Annotated[str, Field(max_length=100)] | None = None
    tags: (
        Annotated[dict[str, Annotated[str, Field(max_length=256)]], Field(max_length=50)] | None
    ) = None
    properties: CollectionProperties | None = None


SKU_QUOTAS = {
    SkuName.FREE: Quota(max_job_count=5, max_recurrence=MaxRecurrence(frequency=Frequency.HOUR)),
    SkuName.STANDARD: Quota(
        max_job_count=50, max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE)
    ),
    SkuName.P10_PREMIUM: Quota(
        max_job_count=50, max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE)
    ),
    SkuName.P20_PREMIUM: Quota(
        max_job_count=1000, max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE)
    ),
}
DEFAULT_SKU = SkuName.STANDARD


def new_collection(body: CollectionBody) -> dict[str, Any]:
    """The stored form of a collection created or replaced by `body`: every default filled in."""
    properties = body.properties or CollectionProperties()
    sku = properties.sku.name if properties.sku else DEFAULT_SKU
    return {
        "location": body.location,
        "tags": body.tags or {},
        "properties": {
            "sku": {"name": sku.value},
            "state": (properties.state or CollectionState.ENABLED).value,
            "quota": _overlay(SKU_QUOTAS[sku], properties.quota).to_wire(),
        },
    }


def patched_collection(stored: dict[str, Any], patch: CollectionBody) -> dict[str, Any]:
    """`stored` with what `patch` sets merged in, field by field.

    A new SKU brings its own default quota, under whatever quota fields the patch sets.
    """
    properties = patch.properties or CollectionProperties()
    current = stored["properties"]
    sku = properties.sku.name if properties.sku else SkuName(current["sku"]["name"])
    base_quota = (
        SKU_QUOTAS[sku]
        if sku.value != current["sku"]["name"]
        else Quota.model_validate(current["quota"])
    )
    return {
        "location": patch.location if patch.location is not None else stored.get("location"),
        "tags": patch.tags if patch.tags is not None else stored.get("tags", {}),
        "properties": {
            "sku": {"name": sku.value},
            "state": (properties.state or CollectionState(current["state"])).value,
            "quota": _overlay(base_quota, properties.quota).to_wire(),
        },
    }


def _overlay(base: Quota, own: Quota | None) -> Quota:
    """`base` with every field that `own` sets taking precedence."""
    if own is None:
        return base
    return base.model_copy(update={name: value for name, value in own if value is not None})
