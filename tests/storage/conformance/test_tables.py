"""The parts that speak to a table themselves (the due index, the activity log, role
assignments), on a table in memory (shared/storage/memory_tables.py) and on Azurite's: the
queries they send answer the same rows in the same order."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.ids import CollectionId, JobId
from shared.storage.activity_log import ActivityLog
from shared.storage.clients import tables_from_connection_string
from shared.storage.due_index import BUCKET, DueIndex, bucket_of, partitions_of, time_key
from shared.storage.memory_tables import MemoryTables
from shared.storage.role_assignments import Assignment, RoleAssignments
from shared.storage.table_http import TableServiceLike
from shared.storage.table_store import create_tables

START = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["memory", pytest.param("table", marks=pytest.mark.services)])
def tables(request: pytest.FixtureRequest) -> TableServiceLike:
    if request.param == "memory":
        return MemoryTables()
    return tables_from_connection_string(request.getfixturevalue("storage"))


def table_name() -> str:
    return f"conformance{uuid.uuid4().hex[:12]}"


def delivery(name: str, due: datetime) -> Delivery:
    job = JobId(CollectionId("sub", "rg", "jc"), name)
    return Delivery(job, START, Pending(Attempt(due), due))


def test_the_due_index_answers_rows_by_due_time(tables: TableServiceLike) -> None:
    index = DueIndex.in_service(tables, table_name())
    dues = [START + timedelta(seconds=s) for s in (90, 5, 30, 301, 600 * 3)]
    for n, due in enumerate(dues):
        index.add(delivery(f"job-{n}", due))
    found = index.due(START, START + BUCKET)
    assert [row.delivery.pending.due for row in found] == sorted(dues[:3])
    assert [row.delivery.job.name for row in found] == ["job-1", "job-2", "job-0"]
    assert index.due(START + timedelta(seconds=6), START + timedelta(seconds=90)) == [found[1]]
    assert index.first_bucket_after(bucket_of(START)) == bucket_of(dues[3])
    assert index.first_bucket_after(bucket_of(dues[3])) == bucket_of(dues[4])
    assert index.first_bucket_after(bucket_of(dues[4])) is None
    shard = found[0].partition
    rows = index.rows(shard, time_key(START), time_key(START + BUCKET), 1)
    assert rows == [found[0]]
    assert shard in partitions_of(bucket_of(START))
    index.remove(found[:2])
    index.withdraw([delivery("job-0", dues[0]), delivery("job-9", dues[0])])
    assert index.due(START, START + BUCKET) == []


def test_the_watermark_and_last_tick(tables: TableServiceLike) -> None:
    index = DueIndex.in_service(tables, table_name())
    assert index.watermark() is None and index.last_tick() is None
    index.set_watermark(START, START - timedelta(seconds=1))
    index.set_watermark(START + timedelta(minutes=1), START)
    assert index.watermark() == START + timedelta(minutes=1)
    assert index.last_tick() == START


def event(at: datetime, event_id: str, caller: str) -> dict[str, object]:
    return {
        "eventTimestamp": at.isoformat().replace("+00:00", "Z"), "eventDataId": event_id,
        "caller": caller,
    }  # fmt: skip


def test_the_activity_log_answers_newest_first_by_place(tables: TableServiceLike) -> None:
    log = ActivityLog.in_service(tables, table_name())
    times = [
        START - timedelta(days=1, hours=1),
        START - timedelta(hours=2),
        START - timedelta(hours=1),
    ]
    for n, at in enumerate(times):
        log.add(event(at, f"e{n}", "alice" if n != 1 else "bob"))
    everything = list(log.events(START - timedelta(days=3), START, lambda _event: True))
    assert [found["eventDataId"] for _, found in everything] == ["e2", "e1", "e0"]
    alice = [found["eventDataId"] for _, found in log.events(
        START - timedelta(days=3), START, lambda found: found["caller"] == "alice")]  # fmt: skip
    assert alice == ["e2", "e0"]
    after_first = log.events(
        START - timedelta(days=3), START, lambda _: True, after=everything[0][0]
    )
    assert [found["eventDataId"] for _, found in after_first] == ["e1", "e0"]
    log.remove_before(START - timedelta(hours=12), days_back=3)
    assert [found["eventDataId"] for _, found in log.events(
        START - timedelta(days=3), START, lambda _: True)] == ["e2", "e1"]  # fmt: skip


def test_activity_log_events_are_written_behind_within_the_delay_all_in_one_batch(
    tables: TableServiceLike,
) -> None:
    name = table_name()
    log = ActivityLog.in_service(tables, name)
    log.write_behind_s = 0.05
    for n in range(3):
        log.add(event(START - timedelta(hours=n + 1), f"late{n}", "alice"))
    table = tables.get_table_client(name)
    deadline = time.monotonic() + 20  # a bound for a loaded machine; 0.05 s is the delay
    while len(list(table.list_entities())) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    rows = list(table.list_entities())  # written by the timer: no read of the log flushed them
    assert sorted(json.loads(row["Event"])["eventDataId"] for row in rows) == [
        "late0",
        "late1",
        "late2",
    ]
    log.flush()  # nothing held: nothing written again
    assert len(list(table.list_entities())) == 3


def test_role_assignments_by_name_and_principal(tables: TableServiceLike) -> None:
    roles = RoleAssignments.in_service(tables, table_name())
    first = Assignment("a1", "principal-a", "Reader", "/subscriptions/s")
    second = Assignment("a2", "principal-b", "Contributor", "/subscriptions/s")
    roles.save(first)
    roles.save(second)
    roles.save(Assignment("a1", "Principal-A", "Owner", "/subscriptions/s"))
    assert roles.get("a1") == Assignment("a1", "principal-a", "Owner", "/subscriptions/s")
    assert [a.name for a in roles.all()] == ["a1", "a2"]
    assert [a.name for a in roles.of("PRINCIPAL-B")] == ["a2"]
    assert roles.delete("a2") and not roles.delete("a2")
    assert roles.get("a2") is None and roles.of("principal-b") == []


def test_a_query_the_memory_table_does_not_know_is_refused() -> None:
    table = MemoryTables().get_table_client("any")
    with pytest.raises(ValueError, match="does not understand"):
        list(
            table.query_entities(
                "PartitionKey eq 'literal' or RowKey gt @low", parameters={"low": ""}
            )
        )


def test_creating_tables_makes_those_missing_and_a_query_finds_them(
    tables: TableServiceLike,
) -> None:
    there, missing, never = table_name(), table_name(), table_name()
    tables.create_table(there)
    create_tables(tables, [there, missing])
    names = {"a": there, "b": missing, "c": never}
    found = tables.query_tables("TableName eq @a or TableName eq @b or TableName eq @c",
                                parameters=names)  # fmt: skip
    assert sorted(table.name for table in found) == sorted([there, missing])
    assert list(tables.query_tables("TableName eq @c", parameters=names)) == []
