"""The execution queue as the app calls it (send, receive, peek, update, delete, pop receipts),
on a queue in memory (shared/storage/memory_tables.py) and on Azurite's: the same answers and
the same errors. Delays are ones no test outlives (30 s), so that Azurite needs no waiting."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

from shared.storage.clients import queue_from_connection_string
from shared.storage.memory_tables import MemoryQueues
from shared.storage.queue_http import QueueLike


@pytest.fixture(params=["memory", pytest.param("azurite", marks=pytest.mark.services)])
def queue(request: pytest.FixtureRequest) -> QueueLike:
    name = f"conformance-{uuid.uuid4().hex[:12]}"
    if request.param == "memory":
        return MemoryQueues(lambda: datetime.now(UTC))(name)
    made = queue_from_connection_string(request.getfixturevalue("storage"), name)
    made.create_queue()
    return made


def test_messages_come_in_order_once_until_their_visibility_ends(queue: QueueLike) -> None:
    for text in ("first", "second", "third"):
        queue.send_message(text)
    queue.send_message("later", visibility_timeout=30)
    assert [m.content for m in queue.peek_messages(max_messages=32)] == ["first", "second", "third"]
    received = list(queue.receive_messages(messages_per_page=2, max_messages=2, visibility_timeout=30))
    assert [m.content for m in received] == ["first", "second"]
    assert [m.dequeue_count for m in received] == [1, 1]
    assert [m.content for m in queue.peek_messages(max_messages=32)] == ["third"]
    assert queue.get_queue_properties().approximate_message_count == 4


def test_a_message_is_shown_again_or_deleted_by_its_latest_pop_receipt(queue: QueueLike) -> None:
    queue.send_message("only")
    [taken] = list(queue.receive_messages(max_messages=1, visibility_timeout=30))
    shown = queue.update_message(taken, visibility_timeout=0)
    assert shown.pop_receipt != taken.pop_receipt
    with pytest.raises(HttpResponseError) as stale:
        queue.delete_message(taken.id, taken.pop_receipt)  # no longer its latest receipt
    assert (stale.value.status_code, stale.value.error_code) == (400, "PopReceiptMismatch")
    [again] = list(queue.receive_messages(max_messages=1, visibility_timeout=30))
    assert (again.id, again.content, again.dequeue_count) == (taken.id, "only", 2)
    queue.delete_message(again)
    with pytest.raises(ResourceNotFoundError):
        queue.delete_message(again)
    assert list(queue.receive_messages(max_messages=1)) == []
    assert queue.peek_messages() == []
