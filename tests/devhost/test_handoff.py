"""With several worker processes the host process polls the queue and hands each message to the
next worker in turn, as the Functions host does; the workers run them. Here the two sides run in
threads of this process, joined by real socket pairs, on the session's Azurite."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.storage.queue import QueueClient

from devhost.handoff import HandOff, WorkerFeed
from devhost.triggers import QueueTrigger
from tests.devhost.test_triggers import SETTINGS, WAIT_S, send, until


@pytest.fixture
def queue(storage: str) -> QueueClient:
    client = QueueClient.from_connection_string(storage, f"handoff-{uuid.uuid4().hex[:10]}")
    client.create_queue()
    return client


@pytest.fixture
def instance(storage: str, queue: QueueClient) -> Iterator[Callable[..., None]]:
    """Start a host side and one worker side per function given (worker n runs function n)."""
    started: list[HandOff | WorkerFeed] = []

    def start(*functions: Callable[[Any], None]) -> None:
        pairs = [socket.socketpair() for _ in functions]
        for function, (_, theirs) in zip(functions, pairs, strict=True):
            trigger = QueueTrigger(function, "msg", queue.queue_name, storage, SETTINGS, name="work")
            started.append(WorkerFeed(theirs, [trigger]))
        started.append(HandOff([ours for ours, _ in pairs], storage, SETTINGS))
        for side in started:
            threading.Thread(target=side.run, daemon=True).start()

    yield start
    for side in reversed(started):
        side.stop()


def test_messages_go_to_the_workers_in_turn_and_are_deleted(
    instance: Callable[..., None], queue: QueueClient
) -> None:
    ran: list[tuple[int, str]] = []
    for n in range(9):
        send(queue, f"message {n}")
    instance(*(lambda msg, worker=worker: ran.append((worker, msg.get_body().decode())) for worker in range(3)))
    until(lambda: len(ran) == 9, "nine messages ran")
    assert sorted(body for _, body in ran) == [f"message {n}" for n in range(9)]
    assert Counter(worker for worker, _ in ran) == {0: 3, 1: 3, 2: 3}, "one each in turn"
    until(lambda: queue.get_queue_properties().approximate_message_count == 0, "all are deleted")


def test_the_instance_fetches_by_its_batch_settings_whichever_worker_runs_them(
    instance: Callable[..., None], queue: QueueClient
) -> None:
    # batchSize 4 and newBatchThreshold 2 count the messages of the whole instance: a batch of
    # four, then none while more than two run, then four more once two are done.
    gate, lock = threading.Semaphore(0), threading.Lock()
    running, most, done = [0], [0], [0]

    def blocks(msg: object) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        gate.acquire(timeout=WAIT_S)
        with lock:
            running[0] -= 1
            done[0] += 1

    for n in range(12):
        send(queue, f"held {n}")
    instance(blocks, blocks)
    until(lambda: running[0] == 4, "a batch of four runs")
    time.sleep(0.6)  # several polls' time
    assert (running[0], most[0]) == (4, 4), "no more while more than two run"
    gate.release(2)
    until(lambda: running[0] == 6, "two done: four more")
    time.sleep(0.6)
    assert (running[0], most[0], done[0]) == (6, 6, 2)
    gate.release(10)
    until(lambda: done[0] == 12, "all ran")
    assert most[0] == 6


def test_a_message_that_fails_in_a_worker_comes_back_to_the_queue_and_is_retried(
    instance: Callable[..., None], queue: QueueClient
) -> None:
    tries: list[tuple[str, int]] = []

    def fails_once(msg: Any) -> None:
        tries.append((msg.get_body().decode(), msg.dequeue_count))
        if msg.dequeue_count == 1:
            raise RuntimeError("the first try fails")

    send(queue, "again")
    instance(fails_once, fails_once)
    until(lambda: len(tries) == 2, "the message is tried twice")
    assert tries == [("again", 1), ("again", 2)]
    until(lambda: queue.get_queue_properties().approximate_message_count == 0, "it is deleted")
