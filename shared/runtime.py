"""What the functions take from the process they run in: settings, clients, the clock.

Each is made once per process, on first use, from the settings the Functions host provides.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from azure.core.credentials import TokenCredential
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueClient, TextBase64EncodePolicy

from shared.actions import Actions
from shared.actions.http import HttpActions
from shared.actions.oauth import TokenCache
from shared.actions.service_bus import ServiceBusActions
from shared.actions.storage_queue import StorageQueueActions
from shared.dispatch import Dispatcher
from shared.due_index import DueIndex
from shared.executor import Executor
from shared.outbound import OutboundPolicy, tls_context
from shared.settings import Settings
from shared.storage_clients import queue_client, storage_credential, table_service
from shared.store import Store

EXECUTIONS_QUEUE = "executions"
EXECUTION_THREADS = 32
FOLLOW_UP_GATHERING = timedelta(milliseconds=250)


class StorageRequestCounter:
    """Counts the storage requests this process sends, retries included (a batch is one).

    It is the clients' `raw_request_hook`: the storage SDKs build their own pipelines and take
    no extra policies, but call this hook on every try of every request.
    """

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> None:
        with self._lock:
            self._count += 1

    @property
    def count(self) -> int:
        return self._count


STORAGE_REQUESTS = StorageRequestCounter()


def now() -> datetime:
    """The current instant, the one place the app reads the clock."""
    return datetime.now(UTC)


@functools.cache
def settings() -> Settings:
    return Settings.from_environment()


@functools.cache
def _credential() -> TokenCredential | None:
    """One credential for every storage client (it caches its tokens); None locally."""
    identity = settings().storage_identity
    return storage_credential(identity) if identity is not None else None


@functools.cache
def _tables() -> TableServiceClient:
    return table_service(settings(), _credential(), raw_request_hook=STORAGE_REQUESTS)


@functools.cache
def store() -> Store:
    """The one Store of this process, its tables created on first use."""
    connected = Store(_tables())
    connected.create_tables()
    return connected


@functools.cache
def execution_queue() -> QueueClient:
    # The Functions host reads queue messages as base64 by default (host.json messageEncoding).
    queue = queue_client(
        settings(),
        EXECUTIONS_QUEUE,
        _credential(),
        message_encode_policy=TextBase64EncodePolicy(),
        raw_request_hook=STORAGE_REQUESTS,
    )
    with contextlib.suppress(ResourceExistsError):
        queue.create_queue()
    return queue


@functools.cache
def due_index() -> DueIndex:
    return DueIndex.in_service(_tables())


@functools.cache
def dispatcher() -> Dispatcher:
    # Follow-ups wait up to 250 ms for others of the same second (shared.dispatch).
    return Dispatcher(
        execution_queue(), due_index(), settings().horizon, coalesce=FOLLOW_UP_GATHERING
    )


@functools.cache
def blocking_threads() -> ThreadPoolExecutor:
    """Threads for the executor's blocking work: an execution mostly waits on storage and on
    its target, so many can be under way at once (asyncio's default pool has cores + 4)."""
    return ThreadPoolExecutor(EXECUTION_THREADS, thread_name_prefix="execution")


@functools.cache
def executor() -> Executor:
    configured = settings()
    tls = tls_context(configured.outbound_ca_file)
    tokens = TokenCache(configured.authority_host, httpx.Client(verify=tls), now)
    http = HttpActions(
        OutboundPolicy.from_setting(configured.outbound_allowlist),
        configured.outbound_ca_file,
        tokens,
    )
    actions = Actions(
        now,
        http=http,
        storage_queue=StorageQueueActions(configured),
        service_bus=ServiceBusActions(configured),
    )
    return Executor(store(), dispatcher(), actions, clock=now)
