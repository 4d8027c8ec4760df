"""The app's own table client (TableHttp) beside the SDK's TableClient on Azurite, call by call:
the same answers and the same errors (type and status) for every call the storage modules make,
with keys and values that need escaping and the largest entities and batches Azure allows.
Each client writes its own partitions (a prefix per client), so the two never meet."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.data.tables import TableServiceClient, UpdateMode

from shared.storage.clients import tables_from_connection_string
from shared.storage.table_terms import transaction_failures

TABLE = "conformance"
KEYS = {
    "plain": "job-1",
    "quote": "it's",
    "percent": "100%25 done",
    "slash": "a/b",
    "hash": "a#b",
    "question": "a?b",
    "non-ascii": "Zürich-東京-🙂",
    "space-and-plus": "a b+c",
    "one-kilobyte": "k" * 1024,
    "too-long": "k" * 1025,
}


@pytest.fixture(scope="module")
def clients(storage: str) -> dict[str, Any]:
    sdk = TableServiceClient.from_connection_string(storage)
    with contextlib.suppress(ResourceExistsError):
        sdk.create_table(TABLE)
    own = tables_from_connection_string(storage)
    return {"own": own.get_table_client(TABLE), "sdk": sdk.get_table_client(TABLE)}


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """What a call gave, comparable across clients: its value, or its error's type and status
    (for a refused batch, the status and the failed operation's index, which the store reads)."""
    try:
        return ("ok", plain(call()))
    except transaction_failures() as error:
        return ("batch refused", error.status_code, error.index)
    except HttpResponseError as error:
        return ("error", type(error).__name__, error.status_code)
    except Exception as error:  # a client's own failure (the SDK's reading of an answer)
        return ("failed", type(error).__name__)


def plain(value: Any) -> Any:
    """Values as both clients mean them (the SDK wraps Int64 in EntityProperty); metadata and
    etags differ between writes, so they are left out."""
    if isinstance(value, list):
        return [plain(each) for each in value]
    if isinstance(value, dict) and "etag" in value:  # a write's metadata: the SDK's has more
        return {"etag": bool(value["etag"])}
    if isinstance(value, dict):
        return {
            name: plain(getattr(each, "value", each)) if name != "PartitionKey" else unprefixed(each)
            for name, each in value.items()
        }
    return value


def unprefixed(partition: str) -> str:
    return partition.split("-", 1)[1]


def both(clients: dict[str, Any], act: Callable[[Any, str], Any]) -> list[tuple[Any, ...]]:
    return [outcome(lambda name=name: act(clients[name], name)) for name in ("own", "sdk")]


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
def test_every_single_entity_call_agrees_for_keys_that_need_escaping(
    clients: dict[str, Any], key: str
) -> None:
    def row(client: str, **properties: Any) -> dict[str, Any]:
        return {"PartitionKey": f"{client}-{key}", "RowKey": key, **properties}

    created = both(clients, lambda table, name: table.create_entity(row(name, N=1, T="x'%/#?")))
    assert created[0] == created[1]
    again = both(clients, lambda table, name: table.create_entity(row(name, N=2)))
    assert again[0] == again[1]
    read = both(clients, lambda table, name: table.get_entity(f"{name}-{key}", key))
    assert read[0] == read[1]
    queried = both(
        clients,
        lambda table, name: list(
            table.query_entities(
                "PartitionKey eq @pk and RowKey eq @rk",
                parameters={"pk": f"{name}-{key}", "rk": key},
            )
        ),
    )
    assert queried[0] == queried[1]

    def merge_checked(table: Any, name: str) -> Any:
        etag = table.get_entity(f"{name}-{key}", key).metadata["etag"]
        table.update_entity(
            row(name, M=datetime(2026, 11, 28, 10, tzinfo=UTC), F=0.5, Flag=True),
            mode=UpdateMode.MERGE, etag=etag, match_condition=MatchConditions.IfNotModified,
        )  # fmt: skip
        return table.get_entity(f"{name}-{key}", key)

    merged = both(clients, merge_checked)
    assert merged[0] == merged[1]
    stale = both(
        clients,
        lambda table, name: table.update_entity(
            row(name), mode=UpdateMode.REPLACE, etag='W/"datetime\'2000-01-01T00%3A00%3A00Z\'"',
            match_condition=MatchConditions.IfNotModified,
        ),
    )  # fmt: skip
    assert stale[0] == stale[1]
    deleted = both(clients, lambda table, name: table.delete_entity(f"{name}-{key}", key))
    assert deleted[0] == deleted[1]
    gone = both(clients, lambda table, name: table.get_entity(f"{name}-{key}", key))
    assert gone[0] == gone[1]


SIZES = {
    "64-kib-string": {"S": "s" * (32 * 1024)},
    "string-past-64-kib": {"S": "s" * (32 * 1024 + 1)},
    "64-kib-binary": {"B": b"b" * (64 * 1024)},
    "binary-past-64-kib": {"B": b"b" * (64 * 1024 + 1)},
    "nearly-1-mib-entity": {f"S{n}": "s" * (30 * 1024) for n in range(16)},
    "past-1-mib-entity": {f"S{n}": "s" * (32 * 1024) for n in range(17)},
    "253-properties": {f"P{n}": n for n in range(252)},
    "past-255-properties": {f"P{n}": n for n in range(256)},
}


@pytest.mark.parametrize("properties", SIZES.values(), ids=SIZES.keys())
def test_the_largest_entities_agree(clients: dict[str, Any], properties: dict[str, Any]) -> None:
    answers = both(
        clients,
        lambda table, name: table.upsert_entity(
            {"PartitionKey": f"{name}-size", "RowKey": str(len(str(properties))), **properties}
        ),
    )
    assert answers[0] == answers[1]


@pytest.mark.parametrize("count", [100, 101])
def test_the_largest_batches_agree(clients: dict[str, Any], count: int) -> None:
    def batch(table: Any, name: str) -> Any:
        return table.submit_transaction(
            [("upsert", {"PartitionKey": f"{name}-batch-{count}", "RowKey": f"{n:04}", "N": n})
             for n in range(count)]
        )  # fmt: skip

    answers = both(clients, batch)
    if count <= 100:
        assert answers[0] == answers[1]
    else:  # refused by both (the SDK fails to read Azurite's answer, which Azure gives as 400)
        assert answers[0][0] != "ok" and answers[1][0] != "ok"


def test_a_batch_refused_by_a_condition_agrees(clients: dict[str, Any]) -> None:
    def batch(table: Any, name: str) -> Any:
        partition = f"{name}-conditional"
        table.upsert_entity({"PartitionKey": partition, "RowKey": "a", "N": 1})
        return table.submit_transaction(
            [
                ("upsert", {"PartitionKey": partition, "RowKey": "b", "N": 2}),
                ("create", {"PartitionKey": partition, "RowKey": "a", "N": 3}),
            ]
        )

    answers = both(clients, batch)
    assert answers[0] == answers[1]


def test_paged_queries_agree(clients: dict[str, Any]) -> None:
    def paged(table: Any, name: str) -> Any:
        partition = f"{name}-paged"
        table.submit_transaction(
            [("upsert", {"PartitionKey": partition, "RowKey": f"{n:03}"}) for n in range(25)]
        )
        return [
            row["RowKey"]
            for row in table.query_entities(
                "PartitionKey eq @pk", parameters={"pk": partition}, results_per_page=7
            )
        ]

    answers = both(clients, paged)
    assert answers[0] == answers[1]
    assert len(answers[0][1]) == 25


def test_queries_of_the_accounts_tables_agree(storage: str, clients: dict[str, Any]) -> None:
    """`clients` made TABLE; no table has the other two names."""
    sdk = TableServiceClient.from_connection_string(storage)
    own = tables_from_connection_string(storage)
    names = {"made": TABLE, "quoted": "it's", "absent": "conformanceabsent"}
    query = "TableName eq @made or TableName eq @quoted or TableName eq @absent"
    answers = [[table.name for table in client.query_tables(query, parameters=names)]
               for client in (sdk, own)]  # fmt: skip
    assert answers == [[TABLE], [TABLE]]


def test_paged_queries_of_the_accounts_tables_agree(storage: str) -> None:
    """A page of one table at a time: each next page asked for where the last one ended."""
    sdk = TableServiceClient.from_connection_string(storage)
    own = tables_from_connection_string(storage)
    names = [f"paged{n}{uuid.uuid4().hex[:8]}" for n in range(3)]
    for name in names:
        own.create_table(name)
    query = " or ".join(f"TableName eq '{name}'" for name in names)
    answers = [[table.name for table in client.query_tables(query, results_per_page=1)]
               for client in (sdk, own)]  # fmt: skip
    assert answers == [sorted(names), sorted(names)]
