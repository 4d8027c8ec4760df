"""The one place a collection's document turns into the JSON storage keeps and back. A client
reads back exactly what is stored, so that JSON is also the body a GET answers: no `tags` key at
all without tags, as the real service answered."""

from __future__ import annotations

import hashlib
import json

from shared.domain.collection import CollectionState, Quota, SkuName
from shared.domain.collection_document import CollectionDocument
from shared.domain.wire import JsonObject


def encode_collection(document: CollectionDocument) -> JsonObject:
    """The document as storage keeps it and a GET shows it."""
    stored: JsonObject = {"location": document.location}
    if document.tags:
        stored["tags"] = document.tags
    return stored | {"properties": document.properties().to_wire()}


def decode_collection(stored: JsonObject) -> CollectionDocument:
    """The document storage keeps; KeyError, ValueError or pydantic's ValidationError if it is
    not one."""
    properties = stored["properties"]
    quota = properties.get("quota")
    return CollectionDocument(
        sku=SkuName(properties["sku"]["name"]),
        state=CollectionState(properties["state"]),
        quota=None if quota is None else Quota.model_validate(quota),
        location=stored.get("location"),
        tags=stored.get("tags") or None,
    )


def version_of(document: CollectionDocument) -> str:
    """The version of what a job's write depends on in its collection: its SKU, its quota as in
    effect, and its region. The same terms give the same version in every process."""
    terms = [document.sku.value, document.effective_quota.to_wire(), document.location]
    return hashlib.sha256(json.dumps(terms, sort_keys=True).encode()).hexdigest()[:16]
