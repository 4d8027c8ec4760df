"""Group commit on Azurite: writers of one partition that come at once share batches, each row
lands, and a row storage refuses fails only its own writer."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

from shared.storage.group_commit import GroupCommit

WRITERS = 24


class SlowCountingTable:
    """The SDK's table client, counting the requests sent, each held a moment longer, as a
    loaded storage account would (so that writers pile up behind the one under way)."""

    def __init__(self, table: TableClient, gate: threading.Event) -> None:
        self._table, self._gate = table, gate
        self.requests: list[str] = []
        self._lock = threading.Lock()

    def _sent(self, kind: str) -> None:
        with self._lock:
            self.requests.append(kind)
        self._gate.wait(10)

    def upsert_entity(self, entity: Any, **options: Any) -> Any:
        self._sent("upsert")
        return self._table.upsert_entity(entity, **options)

    def create_entity(self, entity: Any, **options: Any) -> Any:
        self._sent("create")
        return self._table.create_entity(entity, **options)

    def submit_transaction(self, operations: Any, **options: Any) -> Any:
        self._sent("batch")
        return self._table.submit_transaction(list(operations), **options)


@pytest.fixture(scope="module")
def table(storage: str) -> TableClient:
    name = f"group{uuid.uuid4().hex[:10]}"
    return TableServiceClient.from_connection_string(storage).create_table(name)


def write_all(group: GroupCommit, operations: list[tuple[Any, ...]]) -> list[Any]:
    """Each operation by a thread of its own, all at once; each one's answer or error."""
    outcomes: list[Any] = [None] * len(operations)

    def writer(index: int) -> None:
        try:
            outcomes[index] = group.write(operations[index])
        except Exception as failure:
            outcomes[index] = failure

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(len(operations))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def upsert(partition: str, row: str, **columns: Any) -> tuple[Any, ...]:
    entity = {"PartitionKey": partition, "RowKey": row, **columns}
    return ("upsert", entity, {"mode": UpdateMode.REPLACE})


def test_writers_of_one_partition_at_once_share_batches_and_each_row_lands(
    table: TableClient,
) -> None:
    gate = threading.Event()
    counting = SlowCountingTable(table, gate)
    group = GroupCommit(counting)  # type: ignore[arg-type]
    partition = uuid.uuid4().hex
    operations = [upsert(partition, f"row-{n:02d}", Value=n) for n in range(WRITERS)]
    releaser = threading.Timer(0.5, gate.set)  # the first write is held until all have come
    releaser.start()
    outcomes = write_all(group, operations)
    releaser.cancel()
    assert all(isinstance(outcome, dict) and outcome.get("etag") for outcome in outcomes)
    stored = {e["RowKey"]: e["Value"] for e in table.query_entities(f"PartitionKey eq '{partition}'")}
    assert stored == {f"row-{n:02d}": n for n in range(WRITERS)}
    # The first writer alone, then everyone who came meanwhile in one batch.
    assert counting.requests == ["upsert", "batch"]


def test_a_row_storage_refuses_fails_only_its_own_writer(table: TableClient) -> None:
    gate = threading.Event()
    counting = SlowCountingTable(table, gate)
    group = GroupCommit(counting)  # type: ignore[arg-type]
    partition = uuid.uuid4().hex
    table.create_entity({"PartitionKey": partition, "RowKey": "row-taken", "Value": "first"})
    operations = [upsert(partition, f"row-{n}", Value="ok") for n in range(6)]
    operations.append(("create", {"PartitionKey": partition, "RowKey": "row-taken", "Value": "x"}))
    releaser = threading.Timer(0.5, gate.set)
    releaser.start()
    outcomes = write_all(group, operations)
    releaser.cancel()
    assert isinstance(outcomes[-1], ResourceExistsError)
    assert all(isinstance(outcome, dict) for outcome in outcomes[:-1])
    stored = {e["RowKey"] for e in table.query_entities(f"PartitionKey eq '{partition}'")}
    assert stored == {f"row-{n}" for n in range(6)} | {"row-taken"}


def test_partitions_do_not_wait_for_each_other(table: TableClient) -> None:
    counting = SlowCountingTable(table, threading.Event())
    counting._gate.set()
    group = GroupCommit(counting)  # type: ignore[arg-type]
    operations = [upsert(uuid.uuid4().hex, "only", Value=n) for n in range(4)]
    outcomes = write_all(group, operations)
    assert all(isinstance(outcome, dict) for outcome in outcomes)
    assert sorted(counting.requests) == ["upsert"] * 4
