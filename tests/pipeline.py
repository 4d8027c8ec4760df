"""The execution pipeline in the test's own process, on real Azurite, on a clock the test moves.

The services are the app's own, built by the same composition root (`shared.services.build`);
only the clock is the test's, and the queue and due-index table are the test's own (so that the
local host's executor, on the same Azurite, never sees them). With a horizon of zero every
future attempt goes through the due index, so a test walks the whole path: index, tick, queue,
executor, history.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.storage.queue import QueueClient, TextBase64EncodePolicy

from devhost.azurite import queue_endpoint_template
from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import JobBody
from shared.execution import messages
from shared.execution.timer import tick
from shared.services import Services, build
from shared.settings import Settings, chosen_storage_client, max_dequeue_count
from shared.storage.due_index import BUCKET, bucket_of
from shared.storage.interface import Preconditions, Storage, Stored

START = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=1)
LOCAL = "localhost,127.0.0.0/8"
MAX_DELIVERIES = max_dequeue_count()  # host.json's, as the app reads it
# A premium collection: up to 1,000 jobs (a benchmark fills one), each at most once a minute.
COLLECTION = {"location": "westeurope", "properties": {"sku": {"name": "P20Premium"}}}


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


class Pipeline:
    def __init__(self, storage: str, *, allowlist: str = LOCAL, ca_file: str | None = None,
                 authority: str = "https://login.invalid", store: Storage | None = None,
                 service_bus: str = "", action_timeout: float = 5) -> None:  # fmt: skip
        self.clock = Clock(START - timedelta(minutes=1))  # a minute before the first job time
        suffix = uuid.uuid4().hex[:10]
        settings = Settings(
            storage_connection=storage, lookahead=timedelta(0), outbound_allowlist=allowlist,
            outbound_ca_file=ca_file, authority_host=authority,
            queue_endpoint_template=queue_endpoint_template(storage),
            servicebus_endpoint=service_bus or None,
            storage_client=chosen_storage_client(os.environ),  # CI runs these on both clients
        )  # fmt: skip
        self._build = functools.partial(
            build, settings, clock=self.clock, sleep=lambda seconds: None,
            queue_name=f"exec{suffix}", due_table=f"due{suffix}",
            follow_up_gathering=timedelta(0), action_timeout=action_timeout,
        )  # fmt: skip
        self.services = self._build(storage=store)
        self.store, self.index = self.services.storage, self.services.due_index
        self.dispatcher, self.executor = self.services.dispatcher, self.services.worker
        self.queue = QueueClient.from_connection_string(
            storage, f"exec{suffix}", message_encode_policy=TextBase64EncodePolicy()
        )
        # Read as the Functions host reads: raw text, decoded by hand (an encode policy on the
        # reading client would encode a message again when it is made visible again).
        self._incoming = QueueClient.from_connection_string(storage, f"exec{suffix}")
        self.collection = CollectionId("sub-pipeline", "group", f"jc-{suffix}")
        self.services.scheduling.save_collection_with_jobs(
            self.collection, CollectionDocument.created(CollectionBody.model_validate(COLLECTION)),
            self.clock(), preconditions=Preconditions(), previous=None,
        )  # fmt: skip
        self.poisoned: list[str] = []

    def another_process(self) -> Services:
        """The same services built again on the same storage, queue and due index: what another
        instance of the app would do (nothing of this one's memory shared)."""
        return self._build()

    # --- jobs, as the API saves them ---

    def put_job(self, name: str, properties: dict[str, Any]) -> JobId:
        job = JobId(self.collection, name)
        body = JobBody.model_validate({"properties": properties})
        self.services.scheduling.save_definition(job, body.properties, self.clock())
        return job

    def job(self, job: JobId) -> Stored[JobId]:
        stored = self.store.jobs.job(job)
        assert stored is not None
        return stored

    def history(self, job: JobId) -> list[dict[str, Any]]:
        """Oldest first, as a test reads a story."""
        return [entry for _, entry in self.store.history.entries(job)][::-1]

    # --- time ---

    def advance(
        self, by: timedelta, *, on_message: Callable[[str, int], None] | None = None
    ) -> int:
        """Live through `by`: at each due time, tick and run what is due; how many messages ran."""
        until = self.clock() + by
        handled = self.drain(on_message)
        while (due := self._earliest_due(until)) is not None:
            self.clock.at = max(due, self.clock())
            handled += self._tick_and_drain(on_message)
        self.clock.at = until
        return handled + self._tick_and_drain(on_message)

    def jump(self, by: timedelta) -> int:
        """Be down for `by` (nothing runs meanwhile), then tick and run what is due."""
        self.clock.at += by
        return self._tick_and_drain(None)

    def _tick_and_drain(self, on_message: Callable[[str, int], None] | None) -> int:
        tick(self.index, self.dispatcher, self.clock(), lookahead=timedelta(microseconds=1))
        return self.drain(on_message)

    def _earliest_due(self, until: datetime) -> datetime | None:
        cursor = self.clock()
        while cursor < until:
            end = min(bucket_of(cursor) + BUCKET, until)
            rows = self.index.due(cursor, end)
            if rows:
                return rows[0].delivery.pending.due
            cursor = end
        return None

    def handle(self, text: str, dequeue_count: int) -> None:
        """Run one message as the executor function does: decoded once, then handed on."""
        received = messages.received(text)
        if isinstance(received, messages.DueRange):
            self.services.fan_out.handle(received, dequeue_count)
        elif received is not None:
            self.executor.handle(received, dequeue_count)

    def drain(self, on_message: Callable[[str, int], None] | None = None) -> int:
        handled = 0
        while batch := list(
            next(self._incoming.receive_messages(messages_per_page=32).by_page(), [])
        ):
            for message in batch:
                text = base64.b64decode(message.content).decode()
                handled += 1
                try:
                    (on_message or self.handle)(text, message.dequeue_count)
                except Exception:  # as the Functions host does: again, or to the poison queue
                    if message.dequeue_count < MAX_DELIVERIES:
                        self._incoming.update_message(message, visibility_timeout=0)
                        continue
                    self.poisoned.append(text)
                self._incoming.delete_message(message)
        return handled

    def messages(self) -> list[dict[str, Any]]:
        """What is visible on the queue now, without taking it."""
        return [
            json.loads(base64.b64decode(m.content))
            for m in self.queue.peek_messages(max_messages=32)
        ]
