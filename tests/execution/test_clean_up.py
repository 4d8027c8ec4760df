"""Retention (docs/behaviour.md#retention): 60 days and 1,000 entries of history; finished jobs for 60 days;
the classic API's operation records for two days."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from shared.domain import history
from shared.domain.attempts import Attempt
from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.history import KEPT_FOR, MOST_HISTORY, history_to_remove
from shared.domain.job_definition import JobState
from shared.domain.job_document import JobDocument
from shared.execution.clean_up import OPERATIONS_KEPT_FOR, clean_up
from shared.storage.interface import Preconditions
from tests.job_properties import properties_in
from tests.pipeline import START, Pipeline
from tests.targets import Target

NOW = START


def ids_every_hour(count: int) -> list[str]:
    """History ids of hourly entries ending now, newest first."""
    return [Attempt(NOW - timedelta(hours=n)).history_id for n in range(count)]


def test_history_beyond_the_last_1000_entries_or_60_days_goes() -> None:
    ids = ids_every_hour(1200)
    assert history_to_remove(ids, NOW) == ids[MOST_HISTORY:]
    daily = [Attempt(NOW - timedelta(days=n)).history_id for n in range(100)]
    assert history_to_remove(daily, NOW) == daily[61:]
    assert history.expected_of(daily[7]) == NOW - timedelta(days=7)


def test_finished_jobs_expire_60_days_after_they_ended() -> None:
    enabled = JobDocument(properties_in("enabled"), NOW - 2 * KEPT_FOR)
    ended = replace(enabled.with_state(JobState.COMPLETED), ended_at=NOW - KEPT_FOR)
    assert ended.expired(NOW)
    assert not ended.expired(NOW - timedelta(seconds=1))
    assert not enabled.expired(NOW)


def test_the_clean_up_removes_surplus_history_and_expired_jobs(storage: str) -> None:
    pipeline = Pipeline(storage)
    body = CollectionBody.model_validate({"location": "West Europe", "properties": {"sku": {"name": "P20Premium"}}})
    pipeline.store.collections.save_collection(pipeline.collection, CollectionDocument.created(body), Preconditions())
    target = Target()
    target.answer("/kept", 200)
    busy = pipeline.put_job("busy", {"action": {"type": "Http", "request": {"uri": target.url("/kept"), "method": "GET"}},
                                     "startTime": (NOW + timedelta(days=1)).isoformat(),
                                     "recurrence": {"frequency": "Hour", "interval": 1}})  # fmt: skip
    entries = [(entry_id, {"status": "Completed"}) for entry_id in ids_every_hour(1100)]
    pipeline.store.history.add(busy, entries)
    stored = pipeline.job(busy)
    assert pipeline.store.executor.settle_job(stored, replace(stored.document, history_count=1100), [])
    finished = pipeline.put_job("finished", {"action": {"type": "Http", "request": {"uri": target.url("/kept"), "method": "GET"}}})
    pipeline.advance(timedelta(seconds=1))
    assert pipeline.job(finished).document.state.value == "completed"

    clean_up(pipeline.store, NOW)  # the finished job ended moments ago: it stays
    assert pipeline.store.jobs.job(finished) is not None
    assert pipeline.store.history.ids(busy) == [entry_id for entry_id, _ in entries[:MOST_HISTORY]]
    assert pipeline.job(busy).document.history_count == MOST_HISTORY

    later = NOW + timedelta(days=61)
    clean_up(pipeline.store, later)
    assert pipeline.store.jobs.job(finished) is None
    assert pipeline.store.history.ids(busy) == []  # every entry is now older than 60 days
    target.close()


def test_the_clean_up_forgets_classic_operations_after_two_days(storage: str) -> None:
    store = Pipeline(storage).store
    request_id = uuid.uuid4().hex
    store.classic.record_operation("sub-clean-up", request_id)
    recorded_at = datetime.now(UTC)  # storage stamps the row with its own clock
    clean_up(store, recorded_at + OPERATIONS_KEPT_FOR - timedelta(minutes=1))
    assert store.classic.operation_recorded("sub-clean-up", request_id)
    clean_up(store, recorded_at + OPERATIONS_KEPT_FOR + timedelta(minutes=1))
    assert not store.classic.operation_recorded("sub-clean-up", request_id)
