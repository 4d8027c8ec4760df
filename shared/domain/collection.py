"""Job collections: their body on the wire, and the quotas each SKU brings.

See docs/behaviour.md#collections and #quotas.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from shared.domain.regions import display_name
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
    """The stored form of a collection created or replaced by `body`.

    The quota is kept as sent (the real service echoed only what was sent; `effective_quota`
    fills in the SKU's defaults), the location under its display name, the tags only if any.
    """
    properties = body.properties or CollectionProperties()
    sku = properties.sku.name if properties.sku else DEFAULT_SKU
    stored_properties: dict[str, Any] = {
        "sku": {"name": sku.value},
        "state": (properties.state or CollectionState.ENABLED).value,
    }
    if properties.quota is not None:
        stored_properties["quota"] = properties.quota.to_wire()
    return _without_empty_tags(
        {
            "location": display_name(body.location),
            "tags": body.tags,
            "properties": stored_properties,
        }
    )


def patched_collection(stored: dict[str, Any], patch: CollectionBody) -> dict[str, Any]:
    """`stored` with what `patch` sets merged in, field by field.

    A new SKU brings its own default quota: only the quota fields the patch sets stay.
    """
    properties = patch.properties or CollectionProperties()
    current = stored["properties"]
    sku = properties.sku.name if properties.sku else SkuName(current["sku"]["name"])
    sku_changed = sku.value != current["sku"]["name"]
    kept_quota = Quota() if sku_changed else Quota.model_validate(current.get("quota") or {})
    quota = _overlay(kept_quota, properties.quota).to_wire()
    patched_properties: dict[str, Any] = {
        "sku": {"name": sku.value},
        "state": (properties.state or CollectionState(current["state"])).value,
    }
    if quota:
        patched_properties["quota"] = quota
    location = (
        display_name(patch.location) if patch.location is not None else stored.get("location")
    )
    tags = patch.tags if patch.tags is not None else stored.get("tags")
    return _without_empty_tags(
        {"location": location, "tags": tags, "properties": patched_properties}
    )


def with_state(stored: dict[str, Any], state: CollectionState) -> dict[str, Any]:
    """`stored` in `state` (what POST enable and disable do to the collection itself)."""
    return {**stored, "properties": {**stored["properties"], "state": state.value}}


def effective_quota(stored: dict[str, Any]) -> Quota:
    """The limits a stored collection's jobs live under: its own quota over its SKU's."""
    properties = stored["properties"]
    own = Quota.model_validate(properties["quota"]) if properties.get("quota") else None
    return _overlay(SKU_QUOTAS[SkuName(properties["sku"]["name"])], own)


def _overlay(base: Quota, own: Quota | None) -> Quota:
    """`base` with every field that `own` sets taking precedence."""
    if own is None:
        return base
    return base.model_copy(update={name: value for name, value in own if value is not None})


def _without_empty_tags(document: dict[str, Any]) -> dict[str, Any]:
    # As the real service answered: a resource without tags has no `tags` key at all.
    return document if document.get("tags") else {k: v for k, v in document.items() if k != "tags"}
