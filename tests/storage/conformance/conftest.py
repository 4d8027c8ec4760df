"""The storage the conformance suite holds to one contract, aggregate by aggregate (a module
each): the aggregates in memory, and those on Table Storage on the session's Azurite (marked
`services`, so `make test-fast` runs only the first)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CollectionId
from shared.storage.interface import Preconditions, Storage, StoredCollection
from shared.storage.memory_store import memory_storage
from shared.storage.table_store import table_storage_from_connection_string

_TABLE_STORES: dict[str, Storage] = {}


@pytest.fixture(params=["memory", pytest.param("table", marks=pytest.mark.services)])
def store(request: pytest.FixtureRequest) -> Storage:
    if request.param == "memory":
        return memory_storage()
    connection: str = request.getfixturevalue("storage")
    if connection not in _TABLE_STORES:
        _TABLE_STORES[connection] = table_storage_from_connection_string(connection)
        _TABLE_STORES[connection].create_tables()
    return _TABLE_STORES[connection]


def collection_document(sku: str = "Standard") -> CollectionDocument:
    body = {"location": "westeurope", "properties": {"sku": {"name": sku}}}
    return CollectionDocument.created(CollectionBody.model_validate(body))


def entry(status: str, note: str = "") -> dict[str, object]:
    """A history entry, with something nested to show that it is stored as JSON."""
    return {"status": status, "message": note, "nested": {"list": [1, 2]}}


@pytest.fixture
def new_id() -> Callable[[], CollectionId]:
    """A collection id no other test (nor an earlier run on the same Azurite) uses."""

    def made() -> CollectionId:
        return CollectionId("conformance", "Group", f"Jc-{uuid.uuid4().hex[:10]}")

    return made


@pytest.fixture
def collection(store: Storage, new_id: Callable[[], CollectionId]) -> StoredCollection:
    stored, _ = store.collections.save_collection(new_id(), collection_document(), Preconditions())
    return stored
