"""The stored collection document: made from what a client sends, kept as the JSON a GET
answers (the same as before it was typed), read back as the same document."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.collection import CollectionBody, CollectionState, MaxRecurrence, Quota, SkuName
from shared.domain.collection_document import CollectionDocument
from shared.domain.problems import InvalidRequest
from shared.domain.schedule.recurrence import Frequency
from shared.storage.collection_codec import decode_collection, encode_collection


def created(body: dict[str, Any]) -> CollectionDocument:
    return CollectionDocument.created(CollectionBody.model_validate(body))


def patched(document: CollectionDocument, patch: dict[str, Any]) -> CollectionDocument:
    return document.patched(CollectionBody.model_validate(patch))


@pytest.mark.parametrize(
    ("body", "stored"),
    [
        ({"location": "westeurope"},
         {"location": "West Europe", "properties": {"sku": {"name": "Standard"}, "state": "Enabled"}}),
        ({"location": "West US", "tags": {"team": "ops"},
          "properties": {"sku": {"name": "free"}, "state": "disabled", "quota": {"maxJobCount": 3}}},
         {"location": "West US", "tags": {"team": "ops"},
          "properties": {"sku": {"name": "Free"}, "state": "Disabled", "quota": {"maxJobCount": 3}}}),
        ({"location": "northeurope", "tags": {}, "properties": {"quota": {}}},
         {"location": "North Europe", "properties": {"sku": {"name": "Standard"}, "state": "Enabled", "quota": {}}}),
        ({"location": "eastus", "properties": {"quota": {"maxRecurrence": {"frequency": "Hour"}}}},
         {"location": "East US", "properties": {"sku": {"name": "Standard"}, "state": "Enabled",
                                                "quota": {"maxRecurrence": {"frequency": "hour", "interval": 1}}}}),
    ],
    ids=["defaults", "everything-sent", "empty-tags-and-quota", "quota-as-sent"],
)  # fmt: skip
def test_a_created_collection_is_stored_as_its_get_shows_it_and_reads_back_the_same(
    body: dict[str, Any], stored: dict[str, Any]
) -> None:
    document = created(body)
    assert encode_collection(document) == stored
    assert decode_collection(stored) == document
    assert encode_collection(decode_collection(encode_collection(document))) == stored


def test_a_patch_merges_field_by_field_and_a_new_sku_brings_its_own_quota() -> None:
    document = created({"location": "westeurope", "tags": {"a": "1"},
                        "properties": {"quota": {"maxJobCount": 10, "maxJobOccurrence": 5}}})  # fmt: skip
    renamed = patched(document, {"tags": {"b": "2"}, "properties": {"quota": {"maxJobCount": 20}}})
    assert encode_collection(renamed) == {
        "location": "West Europe", "tags": {"b": "2"},
        "properties": {"sku": {"name": "Standard"}, "state": "Enabled",
                       "quota": {"maxJobCount": 20, "maxJobOccurrence": 5}},
    }  # fmt: skip
    moved = patched(renamed, {"properties": {"sku": {"name": "Free"}}})
    assert (moved.sku, moved.quota, moved.tags) == (SkuName.FREE, None, {"b": "2"})
    assert moved.effective_quota == Quota(
        max_job_count=5, max_recurrence=MaxRecurrence(frequency=Frequency.HOUR)
    )
    assert "quota" not in encode_collection(moved)["properties"]


def test_a_quota_beyond_the_skus_limits_is_refused_when_created_and_when_patched() -> None:
    with pytest.raises(InvalidRequest):
        created(
            {
                "location": "westeurope",
                "properties": {"sku": {"name": "Free"}, "quota": {"maxJobCount": 6}},
            }
        )
    free = created({"location": "westeurope", "properties": {"sku": {"name": "Free"}}})
    with pytest.raises(InvalidRequest):
        patched(free, {"properties": {"quota": {"maxJobCount": 6}}})


def test_a_change_of_state_keeps_everything_else() -> None:
    document = created({"location": "westeurope", "properties": {"quota": {"maxJobCount": 7}}})
    disabled = document.with_state(CollectionState.DISABLED)
    assert not disabled.enabled
    assert encode_collection(disabled) == encode_collection(document) | {
        "properties": encode_collection(document)["properties"] | {"state": "Disabled"}
    }
