"""What the operations take from the process they run in: storage clients and the clock.

Each is made once per process, on first use, from the settings the Functions host provides.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from datetime import UTC, datetime
from typing import Any

from azure.core.exceptions import ResourceExistsError
from azure.storage.queue import QueueClient, TextBase64EncodePolicy

from shared.store import Store

EXECUTIONS_QUEUE = "executions"


def now() -> datetime:
    """The current instant, the one place the API reads the clock."""
    return datetime.now(UTC)


@functools.cache
def store() -> Store:
    """The one Store of this process, its tables created on first use."""
    connected = Store.from_connection_string(_storage_connection())
    connected.create_tables()
    return connected


@functools.cache
def _executions() -> QueueClient:
    # The Functions host reads queue messages as base64 by default (host.json messageEncoding).
    queue = QueueClient.from_connection_string(
        _storage_connection(), EXECUTIONS_QUEUE, message_encode_policy=TextBase64EncodePolicy()
    )
    with contextlib.suppress(ResourceExistsError):
        queue.create_queue()
    return queue


def enqueue_execution(message: dict[str, Any]) -> None:
    """Put an execution request on the queue the executor reads."""
    _executions().send_message(json.dumps(message, separators=(",", ":")))


def _storage_connection() -> str:
    return os.environ["AzureWebJobsStorage"]
