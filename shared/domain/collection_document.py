"""A job collection as stored (`CollectionDocument`), and as a client reads it back.

Stored: its SKU, state, location (under its display name), tags, and the quota as the client
sent it (the real service echoed only what was sent); the effective quota, what its jobs live
under, is that quota over the SKU's and never beyond it (shared/domain/collection.py). A client
reads back exactly what is stored, so the stored JSON (shared/storage/collection_codec.py) is
the body a GET answers; `created` and `patched` are the one mapping from the wire models to it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shared.domain.collection import (
    DEFAULT_SKU,
    CollectionBody,
    CollectionProperties,
    CollectionState,
    Quota,
    Sku,
    SkuName,
    effective_quota,
    overlay,
    refuse_quota_above,
)
from shared.domain.regions import display_name


@dataclass(frozen=True)
class CollectionDocument:
    """A collection as stored: its plan, its state, and what the client said of it."""

    sku: SkuName = DEFAULT_SKU
    state: CollectionState = CollectionState.ENABLED
    quota: Quota | None = None  # as sent (None: not sent)
    location: str | None = None
    tags: dict[str, str] | None = None  # None when it has none

    @classmethod
    def created(cls, body: CollectionBody) -> CollectionDocument:
        """The collection that `body` creates or replaces. A quota above what the SKU allows
        is InvalidRequest."""
        properties = body.properties or CollectionProperties()
        sku = properties.sku.name if properties.sku else DEFAULT_SKU
        refuse_quota_above(sku, properties.quota)
        return cls(
            sku=sku,
            state=properties.state or CollectionState.ENABLED,
            quota=properties.quota,  # kept as sent, even empty: a GET shows it so
            location=display_name(body.location),
            tags=body.tags or None,
        )

    def patched(self, patch: CollectionBody) -> CollectionDocument:
        """The collection with what `patch` sets merged in, field by field.

        A new SKU brings its own default quota: only the quota fields the patch sets stay. A
        quota field the patch sets above what the SKU allows is InvalidRequest.
        """
        properties = patch.properties or CollectionProperties()
        sku = properties.sku.name if properties.sku else self.sku
        refuse_quota_above(sku, properties.quota)
        kept_quota = Quota() if sku is not self.sku else self.quota or Quota()
        tags = patch.tags if patch.tags is not None else self.tags
        return CollectionDocument(
            sku=sku,
            state=properties.state or self.state,
            quota=_set_fields(overlay(kept_quota, properties.quota)),
            location=display_name(patch.location) if patch.location is not None else self.location,
            tags=tags or None,
        )

    def with_state(self, state: CollectionState) -> CollectionDocument:
        """The collection in `state` (what POST enable and disable do to the collection itself)."""
        return replace(self, state=state)

    @property
    def enabled(self) -> bool:
        return self.state is CollectionState.ENABLED

    @property
    def effective_quota(self) -> Quota:
        """The limits its jobs live under: its own quota over its SKU's, never beyond them."""
        return effective_quota(self.sku, self.quota)

    def properties(self) -> CollectionProperties:
        """Its `properties` as a client reads them: the SKU, the state, the quota as sent (any
        state: Deleted too, which a client may not set, hence no validation)."""
        return CollectionProperties.model_construct(
            sku=Sku(name=self.sku), state=self.state, quota=self.quota
        )


def _set_fields(quota: Quota | None) -> Quota | None:
    """`quota`, or None when it sets no field (what a patch leaves of a quota is kept only if
    it sets something)."""
    return quota if quota is not None and quota.to_wire() else None
