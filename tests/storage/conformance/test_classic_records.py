"""The classic API's records, as every store keeps them (conftest.py: the stores)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.ids import CloudServiceId
from shared.storage.errors import EtagMismatch
from shared.storage.interface import Storage


def test_cloud_services_are_created_once_listed_in_order_and_deleted(store: Storage) -> None:
    subscription = f"classic-{uuid.uuid4().hex[:8]}"
    second = CloudServiceId(subscription, "Second")
    first = CloudServiceId(subscription, "first")
    assert store.classic.cloud_service(first) is None
    made = store.classic.create_cloud_service(second, {"label": "two"})
    store.classic.create_cloud_service(first, {"label": "one"})
    assert made.document == {"label": "two"} and made.id == second
    with pytest.raises(EtagMismatch):
        store.classic.create_cloud_service(CloudServiceId(subscription, "SECOND"), {"label": "again"})
    assert store.classic.cloud_service(CloudServiceId(subscription, "SECOND")) == made
    assert [s.id.name for s in store.classic.cloud_services(subscription)] == ["first", "Second"]
    assert store.classic.delete_cloud_service(second)
    assert not store.classic.delete_cloud_service(second)
    assert [s.id for s in store.classic.cloud_services(subscription)] == [first]


def test_operations_are_recorded_and_forgotten_by_when(store: Storage) -> None:
    subscription = f"classic-{uuid.uuid4().hex[:8]}"
    store.classic.record_operation(subscription, "request-1")
    assert store.classic.operation_recorded(subscription.upper(), "request-1")
    assert not store.classic.operation_recorded(subscription, "request-2")
    assert store.classic.remove_operations_before(datetime.now(UTC) - timedelta(hours=1)) >= 0
    assert store.classic.operation_recorded(subscription, "request-1")
    # Storage's own clock stamps the record: a minute ahead is after it on any machine.
    assert store.classic.remove_operations_before(datetime.now(UTC) + timedelta(minutes=1)) >= 1
    assert not store.classic.operation_recorded(subscription, "request-1")
