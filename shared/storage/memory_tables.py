"""Tables and queues in this process's memory, for the parts that speak to a table or a queue
directly (the due index, the activity log, role assignments; the execution queue): so that
tests can build every service with no Azurite (`in_memory`). Not for production.

A table here understands only the filters those parts send: clauses `Column op @parameter`
joined by `and`, with op one of eq, ne, gt, ge, lt, le, compared as strings or numbers as Table
Storage compares them. Anything else is refused with ValueError, so that a new query is seen to
need support here rather than answering wrongly. Rows come back in key order (partition, then
row), each with its etag in `.metadata`, as the clients answer.

A queue here keeps time by the clock it is given (a test's), so that a message sent invisible
for ten seconds appears when the test's clock has moved ten seconds.
"""

from __future__ import annotations

import itertools
import operator
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.core.paging import ItemPaged
from azure.storage.queue import QueueMessage, QueueProperties

from shared.storage.memory_records import new_etag
from shared.storage.table_entities import EntityMetadata, Row
from shared.storage.table_http import ListedTable

_CLAUSE = re.compile(r"^(\w+) (eq|ne|gt|ge|lt|le) @(\w+)$")
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq, "ne": operator.ne, "gt": operator.gt,
    "ge": operator.ge, "lt": operator.lt, "le": operator.le,
}  # fmt: skip
_DEFAULT_VISIBILITY_S = 30  # the queue service's, for a receive that names none


class MemoryTable:
    """One table: rows by (partition, row) key."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], Row] = {}
        self._lock = threading.Lock()

    def get_entity(self, partition_key: str, row_key: str, **options: Any) -> Row:
        with self._lock:
            row = self._rows.get((partition_key, row_key))
        if row is None:
            raise ResourceNotFoundError("The specified resource does not exist.")
        return _copy(row)

    def create_entity(self, entity: Mapping[str, Any], **options: Any) -> dict[str, Any]:
        with self._lock:
            if _key(entity) in self._rows:
                raise ResourceExistsError("The specified entity already exists.")
            return self._write(entity)

    def upsert_entity(
        self, entity: Mapping[str, Any], mode: Any = None, **options: Any
    ) -> dict[str, Any]:
        with self._lock:
            return self._write(entity)

    def update_entity(
        self, entity: Mapping[str, Any], mode: Any = None, **options: Any
    ) -> dict[str, Any]:
        raise NotImplementedError("no part on a memory table updates with an etag")

    def delete_entity(self, *args: Any, **options: Any) -> None:
        partition, row = args if len(args) == 2 else (args[0]["PartitionKey"], args[0]["RowKey"])
        with self._lock:
            self._rows.pop((partition, row), None)  # as the SDK: deleting nothing is no error

    def submit_transaction(self, operations: Any, **options: Any) -> list[dict[str, Any]]:
        """Deletes and upserts, all under one lock (no part here sends a conditional batch)."""
        answers: list[dict[str, Any]] = []
        with self._lock:
            for kind, entity, *_ in operations:
                if kind == "delete":
                    self._rows.pop(_key(entity), None)
                    answers.append({})
                elif kind == "upsert":
                    answers.append(self._write(entity))
                else:
                    raise NotImplementedError(f"a memory table's batch does not {kind}")
        return answers

    def query_entities(self, query_filter: str, **options: Any) -> Iterator[Row]:
        tests = _parsed(query_filter, options.get("parameters") or {})
        with self._lock:
            rows = [self._rows[key] for key in sorted(self._rows)]
        return (_copy(row) for row in rows if all(test(row) for test in tests))

    def list_entities(self, **options: Any) -> Iterator[Row]:
        with self._lock:
            rows = [self._rows[key] for key in sorted(self._rows)]
        return (_copy(row) for row in rows)

    def _write(self, entity: Mapping[str, Any]) -> dict[str, Any]:
        metadata = EntityMetadata(etag=new_etag(), timestamp=None)
        self._rows[_key(entity)] = Row(dict(entity), metadata)
        return {"etag": metadata["etag"]}


class MemoryTables:
    """A table service: its tables, made on first use."""

    def __init__(self) -> None:
        self._tables: dict[str, MemoryTable] = {}
        self._lock = threading.Lock()

    def get_table_client(self, table_name: str) -> MemoryTable:
        with self._lock:
            return self._tables.setdefault(table_name, MemoryTable())

    def create_table(self, table_name: str) -> MemoryTable:
        return self.get_table_client(table_name)

    def query_tables(
        self, query_filter: str, *, parameters: Mapping[str, Any]
    ) -> Iterator[ListedTable]:
        """The tables made so far that match: clauses on `TableName` joined by `or`, each with
        its parameter."""
        alternatives = [_parsed(clause, parameters) for clause in query_filter.split(" or ")]
        with self._lock:
            names = sorted(self._tables)
        for name in names:
            listed = Row({"TableName": name}, EntityMetadata(etag="", timestamp=None))
            if any(all(test(listed) for test in tests) for tests in alternatives):
                yield ListedTable(name)


def _key(entity: Mapping[str, Any]) -> tuple[str, str]:
    return str(entity["PartitionKey"]), str(entity["RowKey"])


def _copy(row: Row) -> Row:
    return Row(dict(row), row.metadata.copy())


def _parsed(query_filter: str, parameters: Mapping[str, Any]) -> list[Callable[[Row], bool]]:
    tests: list[Callable[[Row], bool]] = []
    for clause in query_filter.split(" and "):
        match = _CLAUSE.match(clause.strip())
        if match is None or match[3] not in parameters:
            raise ValueError(f"a memory table does not understand the filter {query_filter!r}")
        column, compare, value = match[1], _OPERATORS[match[2]], parameters[match[3]]
        tests.append(_clause(column, compare, value))
    return tests


def _clause(column: str, compare: Callable[[Any, Any], bool], value: Any) -> Callable[[Row], bool]:
    def test(row: Row) -> bool:
        # A row without the column, or of another type, never matches (as in Table Storage).
        held = row.get(column)
        return held is not None and type(held) is type(value) and compare(held, value)

    return test


@dataclass
class _Message:
    id: str
    content: Any
    inserted_on: datetime
    visible_on: datetime
    dequeue_count: int = 0
    pop_receipt: str = field(default_factory=lambda: uuid.uuid4().hex)


class MemoryQueue:
    """One queue, in the order messages were sent, visible by the clock it was given."""

    def __init__(self, queue_name: str, clock: Callable[[], datetime]) -> None:
        self.queue_name, self._clock = queue_name, clock
        self._messages: dict[str, _Message] = {}
        self._lock = threading.Lock()
        self._order = itertools.count()

    def create_queue(self) -> None:
        """Nothing to create: the queue exists from the start."""

    def get_queue_properties(self) -> QueueProperties:
        properties = QueueProperties()
        with self._lock:
            properties.approximate_message_count = len(self._messages)
        return properties

    def send_message(
        self, content: Any, *, visibility_timeout: int | None = None,
        time_to_live: int | None = None,
    ) -> QueueMessage:  # fmt: skip
        now = self._clock()
        message = _Message(
            f"{next(self._order):012d}-{uuid.uuid4().hex[:8]}", content, now,
            now + timedelta(seconds=visibility_timeout or 0),
        )  # fmt: skip
        with self._lock:
            self._messages[message.id] = message
        return _shown(message)

    def receive_messages(
        self, *, messages_per_page: int | None = None, visibility_timeout: int | None = None,
        max_messages: int | None = None,
    ) -> ItemPaged[QueueMessage]:  # fmt: skip
        """What is visible now (up to `max_messages`), in one page, each hidden again for
        `visibility_timeout` seconds and with a new pop receipt."""
        now = self._clock()
        hidden_for = timedelta(
            seconds=_DEFAULT_VISIBILITY_S if visibility_timeout is None else visibility_timeout
        )
        with self._lock:
            visible = self._visible(now)[: max_messages or messages_per_page or 1]
            for message in visible:
                message.dequeue_count += 1
                message.visible_on = now + hidden_for
                message.pop_receipt = uuid.uuid4().hex
            page = [_shown(message) for message in visible]
        return ItemPaged(lambda _token: page, lambda got: (None, iter(got)))

    def peek_messages(self, max_messages: int | None = None) -> list[QueueMessage]:
        now = self._clock()
        with self._lock:
            visible = self._visible(now)
            return [_shown(message, receipt=False) for message in visible[: max_messages or 1]]

    def update_message(
        self, message: str | QueueMessage, pop_receipt: str | None = None, content: Any = None,
        *, visibility_timeout: int | None = None,
    ) -> QueueMessage:  # fmt: skip
        with self._lock:
            held = self._held(message, pop_receipt)
            if content is not None:
                held.content = content
            held.visible_on = self._clock() + timedelta(seconds=visibility_timeout or 0)
            held.pop_receipt = uuid.uuid4().hex
            return _shown(held)

    def delete_message(self, message: str | QueueMessage, pop_receipt: str | None = None) -> None:
        with self._lock:
            del self._messages[self._held(message, pop_receipt).id]

    def _visible(self, now: datetime) -> list[_Message]:
        """The messages visible at `now`, first sent first."""
        return [m for _, m in sorted(self._messages.items()) if m.visible_on <= now]

    def _held(self, message: str | QueueMessage, pop_receipt: str | None) -> _Message:
        """The message by its id and latest pop receipt: as the queue service answers,
        ResourceNotFoundError when it is gone, and a 400 (PopReceiptMismatch) when the receipt
        is not its latest."""
        if isinstance(message, str):
            message_id, receipt = message, pop_receipt
        else:
            message_id, receipt = message.id, pop_receipt or message.pop_receipt
        held = self._messages.get(message_id)
        if held is None:
            raise ResourceNotFoundError("The specified message does not exist.")
        if held.pop_receipt != receipt:
            mismatch = HttpResponseError("The specified pop receipt did not match.")
            mismatch.status_code = 400
            # Where storage_http.py puts the service's code (azure-core's errors declare none).
            mismatch.error_code = "PopReceiptMismatch"  # type: ignore[attr-defined]
            raise mismatch
        return held


class MemoryQueues:
    """A queue service: its queues by name, made on first use, on one clock."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._queues: dict[str, MemoryQueue] = {}
        self._lock = threading.Lock()

    def __call__(self, queue_name: str) -> MemoryQueue:
        with self._lock:
            return self._queues.setdefault(queue_name, MemoryQueue(queue_name, self._clock))


def _shown(message: _Message, *, receipt: bool = True) -> QueueMessage:
    return QueueMessage(
        content=message.content, id=message.id, inserted_on=message.inserted_on,
        dequeue_count=message.dequeue_count, pop_receipt=message.pop_receipt if receipt else None,
        next_visible_on=message.visible_on,
    )  # fmt: skip
