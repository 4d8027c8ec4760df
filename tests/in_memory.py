"""The app's services with every store in memory (shared/storage/memory_*.py): the execution
pipeline, scheduling and the API in the test's own process, with no Azurite.

`build_in_memory` is `shared.services.build` given the memory store, tables and queues;
`MemoryPipeline` is tests/pipeline.py's Pipeline on them, so that a test written for the
pipeline runs on either (tests/execution/test_pipeline_in_memory.py runs some on this one).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CollectionId
from shared.services import EXECUTIONS_QUEUE, Services, build
from shared.settings import Settings
from shared.storage.interface import Preconditions, Storage
from shared.storage.memory_store import memory_storage
from shared.storage.memory_tables import MemoryQueue, MemoryQueues, MemoryTables
from tests.pipeline import COLLECTION, LOCAL, MAX_DELIVERIES, START, Clock, Pipeline


def build_in_memory(
    settings: Settings, *, clock: Callable[[], datetime], store: Storage | None = None,
    **options: Any,
) -> tuple[Services, MemoryQueues]:  # fmt: skip
    """Every service on a new memory store, tables and queues (their visibility by `clock`);
    the queues too, for a test to read what was sent."""
    queues = MemoryQueues(clock)
    services = build(
        settings, clock=clock, storage=store or memory_storage(), tables=MemoryTables(),
        queues=queues, **options,
    )  # fmt: skip
    return services, queues


def memory_settings(**settings: Any) -> Settings:
    """Settings for services in memory: no storage account named."""
    given: dict[str, Any] = {"outbound_ca_file": None, "authority_host": "https://login.invalid"}
    return Settings(storage_connection="", **(given | settings))


class MemoryPipeline(Pipeline):
    """The timer, queue and executor in memory, on a clock the test moves (see Pipeline)."""

    def __init__(self, *, allowlist: str = LOCAL, store: Storage | None = None,
                 action_timeout: float = 5) -> None:  # fmt: skip
        self.clock = Clock(START - timedelta(minutes=1))
        settings = memory_settings(lookahead=timedelta(0), outbound_allowlist=allowlist)
        self.services, queues = build_in_memory(
            settings, clock=self.clock, store=store, sleep=lambda seconds: None,
            follow_up_gathering=timedelta(0), action_timeout=action_timeout,
        )  # fmt: skip
        self.store, self.index = self.services.storage, self.services.due_index
        self.dispatcher, self.executor = self.services.dispatcher, self.services.worker
        self.queue: MemoryQueue = queues(EXECUTIONS_QUEUE)  # type: ignore[assignment]
        self.collection = CollectionId("sub-pipeline", "group", "jc-memory")
        self.services.scheduling.save_collection_with_jobs(
            self.collection, CollectionDocument.created(CollectionBody.model_validate(COLLECTION)),
            self.clock(), preconditions=Preconditions(), previous=None,
        )  # fmt: skip
        self.poisoned: list[str] = []

    def drain(self, on_message: Callable[[str, int], None] | None = None) -> int:
        handled = 0
        while batch := list(self.queue.receive_messages(max_messages=32)):
            for message in batch:
                handled += 1
                try:
                    (on_message or self.handle)(message.content, message.dequeue_count)
                except Exception:  # as the Functions host does: again, or to the poison queue
                    if message.dequeue_count < MAX_DELIVERIES:
                        self.queue.update_message(message, visibility_timeout=0)
                        continue
                    self.poisoned.append(message.content)
                self.queue.delete_message(message)
        return handled

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(m.content) for m in self.queue.peek_messages(max_messages=32)]
