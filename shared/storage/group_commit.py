"""Writes to one partition that come while another write to it is under way go together, in the
next entity group transaction (group commit): a burst of N writers of a partition costs about as
many requests as it has rounds, not N.

A writer that finds the partition idle writes at once, alone, as a single-entity request (a
batch costs several times the CPU of one write). Writers that come meanwhile wait; when the
write under way ends, the first of them writes for all who waited (at most LARGEST_BATCH), and
each is answered with its own outcome. Every batch is sent after all its writers arrived, so a
writer's row is in storage before its call returns, as with a write of its own.

Only writes that cannot conflict with each other belong here: upserts and inserts of distinct
rows. If a batch fails as a whole (one row refused), each of its writers writes alone, so a
writer is refused only for its own row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.storage.batches import LARGEST_BATCH
from shared.storage.table_http import TableLike
from shared.storage.table_terms import transaction_failures

# An operation as a batch takes it: ("upsert" | "create", entity[, options]).
Operation = tuple[Any, ...]


@dataclass
class _Writer:
    operation: Operation
    turn: threading.Event = field(default_factory=threading.Event)
    leads: bool = False  # woken to write for those waiting, not with its outcome
    outcome: Any = None
    failure: BaseException | None = None


class GroupCommit:
    """Group-committed writes to the partitions of one table (see the module's text)."""

    def __init__(self, table: TableLike) -> None:
        self._table = table
        self._waiting: dict[str, list[_Writer]] = {}  # by partition; [0] writes next
        self._lock = threading.Lock()

    def write(self, operation: Operation) -> Any:
        """Run one upsert or insert (its entity's partition decides whom it goes with); what
        storage answered for it (its metadata), or the error it alone raised."""
        writer = _Writer(operation)
        partition = str(operation[1]["PartitionKey"])
        with self._lock:
            waiting = self._waiting.setdefault(partition, [])
            waiting.append(writer)
            writer.leads = len(waiting) == 1
        if not writer.leads:
            writer.turn.wait()
        if writer.leads:
            self._write_round(partition)
        if writer.failure is not None:
            raise writer.failure
        return writer.outcome

    def _write_round(self, partition: str) -> None:
        """Write for the writers waiting at the head of the partition's line (this one first),
        then wake the next round's leader, if any."""
        with self._lock:
            batch = self._waiting[partition][:LARGEST_BATCH]
        try:
            if len(batch) == 1:
                _write_alone(self._table, batch[0])
            else:
                try:
                    answers = self._table.submit_transaction([w.operation for w in batch])
                    for writer, answer in zip(batch, answers, strict=True):
                        writer.outcome = answer
                except transaction_failures():
                    for writer in batch:  # one row refused: each answers for its own
                        _write_alone(self._table, writer)
        except BaseException as failure:  # unreachable storage: every writer of the round
            for writer in batch:
                writer.failure = writer.failure or failure
        finally:
            with self._lock:
                waiting = self._waiting[partition]
                del waiting[: len(batch)]
                if waiting:
                    waiting[0].leads = True
                    waiting[0].turn.set()
                else:
                    del self._waiting[partition]
            for writer in batch:
                writer.leads = False
                writer.turn.set()


def _write_alone(table: TableLike, writer: _Writer) -> None:
    kind, entity, *rest = writer.operation
    options: dict[str, Any] = rest[0] if rest else {}
    call: Callable[..., Any] = {"upsert": table.upsert_entity, "create": table.create_entity}[kind]
    try:
        writer.outcome = call(entity, **options)
    except Exception as failure:  # handed to its own writer, raised in its thread
        writer.failure = failure
