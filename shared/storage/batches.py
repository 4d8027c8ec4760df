"""Table Storage's own limits and conditions, which every write and listing here keeps.

A batch (transaction) holds operations on one partition, at most 100 of them (Azurite accepts
larger ones; Azure does not, so the limit is kept here in code). A query answers at most 1,000
rows at once. A write made only if nobody changed the entity since it was read carries its etag.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypedDict

from azure.core import MatchConditions

from shared.storage.table_entities import Row
from shared.storage.table_http import TableLike
from shared.storage.table_terms import UpdateMode

LARGEST_BATCH = 100
LARGEST_QUERY_PAGE = 1000  # rows a table query answers at most at once
# What a batch answers when a row it changes was changed (412) or deleted (404) since it was read.
RACES_LOST = {412, 404}


def submit_batches(table: TableLike, operations: Iterable[tuple[Any, ...]]) -> None:
    """Run operations on one partition, in batches of at most 100 (Azure's limit)."""
    batch: list[Any] = []
    for operation in operations:
        batch.append(operation)
        if len(batch) == LARGEST_BATCH:
            table.submit_transaction(batch)
            batch = []
    if batch:
        table.submit_transaction(batch)


class EtagCondition(TypedDict):
    """The options of a write made only if the entity is unchanged since it was read."""

    etag: str
    match_condition: MatchConditions


class ConditionalUpdate(EtagCondition):
    """The options of an update in a batch, made only if the entity is unchanged."""

    mode: UpdateMode


def unchanged_since(etag: str) -> EtagCondition:
    """The options of a write made only if the entity still has `etag`."""
    return {"etag": etag, "match_condition": MatchConditions.IfNotModified}


def update_if_unchanged(etag: str, mode: UpdateMode = UpdateMode.REPLACE) -> ConditionalUpdate:
    """The options of a batch update (`mode`: replace or merge) made only if the entity still
    has `etag`."""
    return {"etag": etag, "match_condition": MatchConditions.IfNotModified, "mode": mode}


def row_keys(table: TableLike, partition: str) -> Iterator[Row]:
    """The row keys of one partition, and nothing else of its rows."""
    return iter(
        table.query_entities("PartitionKey eq @pk", parameters={"pk": partition}, select=["RowKey"])
    )
