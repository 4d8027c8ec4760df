"""The execution pipeline in the test's own process, on real Azurite, on a clock the test moves.

The timer, dispatcher, executor and store are the app's own; only the clock is the test's and the
queue and due-index table are the test's own (so that the local host's executor, on the same
Azurite, never sees them). With a horizon of zero every future attempt goes through the due
index, so a test walks the whole path: index, tick, queue, executor, history.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueClient, TextBase64EncodePolicy

from devhost.azurite import queue_endpoint_template
from shared.actions import Actions
from shared.actions.http import HttpActions
from shared.actions.oauth import TokenCache
from shared.actions.service_bus import ServiceBusActions
from shared.actions.storage_queue import StorageQueueActions
from shared.collections import SkuName
from shared.dispatch import Dispatcher
from shared.due_index import BUCKET, DueIndex, bucket_of
from shared.execution import Delivery, defined_document
from shared.executor import Executor
from shared.job_documents import stored_definition
from shared.jobs import JobBody
from shared.outbound import OutboundPolicy, tls_context
from shared.resources import CollectionId, JobId
from shared.settings import QUEUE_ENDPOINT_TEMPLATE, SERVICEBUS_ENDPOINT, Settings
from shared.store import Preconditions, Store, Stored
from shared.timer import tick

START = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=1)
LOCAL = "localhost,127.0.0.0/8"
MAX_DELIVERIES = 5  # host.json maxDequeueCount


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


class Pipeline:
    def __init__(self, storage: str, *, allowlist: str = LOCAL, ca_file: str | None = None,
                 authority: str = "https://login.invalid", store: Store | None = None,
                 service_bus: str = "", action_timeout: float = 5) -> None:  # fmt: skip
        self.clock = Clock(START - timedelta(minutes=1))  # a minute before the first job time
        suffix = uuid.uuid4().hex[:10]
        self.queue = QueueClient.from_connection_string(
            storage, f"exec{suffix}", message_encode_policy=TextBase64EncodePolicy()
        )
        self.queue.create_queue()
        # Read as the Functions host reads: raw text, decoded by hand (an encode policy on the
        # reading client would encode a message again when it is made visible again).
        self._incoming = QueueClient.from_connection_string(storage, f"exec{suffix}")
        tables = TableServiceClient.from_connection_string(storage)
        tables.create_table(f"due{suffix}")
        self.index = DueIndex(tables.get_table_client(f"due{suffix}"))
        self.store = store or Store.from_connection_string(storage)
        self.store.create_tables()
        self.dispatcher = Dispatcher(self.queue, self.index, horizon=timedelta(0))
        tls = tls_context(ca_file)
        tokens = TokenCache(authority, httpx.Client(verify=tls), self.clock)
        endpoints = Settings.from_environment({
            QUEUE_ENDPOINT_TEMPLATE: queue_endpoint_template(storage),
            SERVICEBUS_ENDPOINT: service_bus,
        })  # fmt: skip
        self.service_bus = ServiceBusActions(endpoints, timeout=action_timeout)
        actions = Actions(
            self.clock,
            http=HttpActions(OutboundPolicy.from_setting(allowlist), ca_file, tokens),
            storage_queue=StorageQueueActions(endpoints, timeout=action_timeout),
            service_bus=self.service_bus,
        )
        self.executor = Executor(self.store, self.dispatcher, actions,
                                 clock=self.clock, sleep=lambda seconds: None)  # fmt: skip
        self.collection = CollectionId("sub-pipeline", "group", f"jc-{suffix}")
        self.poisoned: list[str] = []

    # --- jobs, as the API would save them ---

    def put_job(self, name: str, properties: dict[str, Any], sku: SkuName = SkuName.STANDARD) -> JobId:
        job = JobId(self.collection, name)
        body = JobBody.model_validate({"properties": properties})
        current = self.store.job(job)
        document, pending = defined_document(
            stored_definition(body.properties, sku=sku), self.clock(),
            current.document if current else None,
        )  # fmt: skip
        document["region"] = "westeurope"
        self.dispatcher.dispatch([Delivery(job, document["definedAt"], p) for p in pending], self.clock())
        self.store.save_job(job, document, Preconditions(), self.store.job_slot(job))
        return job

    def job(self, job: JobId) -> Stored[JobId]:
        stored = self.store.job(job)
        assert stored is not None
        return stored

    def history(self, job: JobId) -> list[dict[str, Any]]:
        """Oldest first, as a test reads a story."""
        return [entry for _, entry in self.store.history(job)][::-1]

    # --- time ---

    def advance(self, by: timedelta, *, on_message: Callable[[str, int], None] | None = None) -> int:
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

    def drain(self, on_message: Callable[[str, int], None] | None = None) -> int:
        handled = 0
        while batch := list(next(self._incoming.receive_messages(messages_per_page=32).by_page(), [])):
            for message in batch:
                text = base64.b64decode(message.content).decode()
                handled += 1
                try:
                    (on_message or self.executor.handle)(text, message.dequeue_count)
                except Exception:  # as the Functions host does: again, or to the poison queue
                    if message.dequeue_count < MAX_DELIVERIES:
                        self._incoming.update_message(message, visibility_timeout=0)
                        continue
                    self.poisoned.append(text)
                self._incoming.delete_message(message)
        return handled

    def messages(self) -> list[dict[str, Any]]:
        """What is visible on the queue now, without taking it."""
        return [json.loads(base64.b64decode(m.content)) for m in self.queue.peek_messages(max_messages=32)]
