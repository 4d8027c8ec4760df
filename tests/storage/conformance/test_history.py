"""Each job's history, as every storage keeps it."""

from __future__ import annotations

from shared.domain.ids import JobId
from shared.domain.job_definition import HistoryStatus
from shared.storage.interface import PageBounds, Storage, StoredCollection
from tests.storage.conformance.conftest import entry


def test_history_newest_first_by_status_rewritten_and_removed(
    store: Storage, collection: StoredCollection
) -> None:
    job = JobId(collection.id, "storied")
    other = JobId(collection.id, "storied2")  # a name that extends this one's: kept apart
    store.history.add(other, [("0000", entry("Completed"))])
    store.history.add(job, [("0003", entry("Failed")), ("0001", entry("Completed"))])
    store.history.add(job, [("0002", entry("Completed")), ("0003", entry("Completed", "again"))])
    assert store.history.entries(job) == [
        ("0001", entry("Completed")), ("0002", entry("Completed")),
        ("0003", entry("Completed", "again")),
    ]  # fmt: skip
    assert [i for i, _ in store.history.entries(job, HistoryStatus.COMPLETED)] == ["0001", "0002", "0003"]
    assert store.history.entries(job, HistoryStatus.FAILED) == []
    assert store.history.ids(job) == ["0001", "0002", "0003"]
    assert store.history.ids(job, after="0001") == ["0002", "0003"]
    store.history.remove(job, ["0002", "9999"])
    assert store.history.ids(job) == ["0001", "0003"]
    assert store.history.entries(other) == [("0000", entry("Completed"))]


def test_history_pages(store: Storage, collection: StoredCollection) -> None:
    job = JobId(collection.id, "paged")
    store.history.add(
        job, [(f"{n:04d}", entry("Failed" if n % 3 == 0 else "Completed")) for n in range(7)]
    )
    ids = lambda page: [i for i, _ in page]  # noqa: E731
    page, more = store.history.page(job, PageBounds(3))
    assert ids(page) == ["0000", "0001", "0002"] and more
    page, more = store.history.page(job, PageBounds(3, after="0002"))
    assert ids(page) == ["0003", "0004", "0005"] and more
    page, more = store.history.page(job, PageBounds(3, after="0005"))
    assert ids(page) == ["0006"] and not more
    page, more = store.history.page(job, PageBounds(2, skip=4))
    assert ids(page) == ["0004", "0005"] and more
    page, more = store.history.page(job, PageBounds(2, skip=1), HistoryStatus.FAILED)
    assert ids(page) == ["0003", "0006"] and not more
    assert store.history.page(job, PageBounds(2, skip=7)) == ([], False)
    assert store.history.page(job, PageBounds(2, skip=9)) == ([], False)
