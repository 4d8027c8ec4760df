"""A job this process wrote last is not read again for its next occurrence, and a job that
someone else changed since is acted on as stored (shared/execution/known_jobs.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from shared.domain.ids import CollectionId, JobId
from shared.execution.known_jobs import KnownJobs
from shared.storage.documents import Stored
from shared.storage.table_store import TableStore
from tests.pipeline import START, Pipeline
from tests.targets import Target
from tests.wrapped_store import WrappedStore

MINUTE = timedelta(minutes=1)


class CountedReads(WrappedStore):
    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.reads: list[JobId] = []

    def job(self, job: JobId) -> Any:
        self.reads.append(job)
        return self.inner.job(job)


def every_minute(target: Target, path: str, **properties: Any) -> dict[str, Any]:
    action = {"type": "Http", "request": {"uri": target.url(path), "method": "POST"},
              "retryPolicy": {"retryType": "None"}}  # fmt: skip
    recurrence = {"frequency": "Minute", "interval": 1}
    return {"startTime": START.isoformat(), "action": action, "recurrence": recurrence} | properties


@pytest.mark.services
def test_a_recurring_job_is_read_once_then_known_from_its_own_writes(
    storage: str, target: Target
) -> None:
    store = CountedReads(TableStore.from_connection_string(storage))
    pipeline = Pipeline(storage, store=store)
    target.answer("/known", 200)
    job = pipeline.put_job("known", every_minute(target, "/known"))
    store.reads.clear()
    pipeline.advance(3 * MINUTE)
    assert len(target.received("/known")) == 3
    assert [entry["status"] for entry in pipeline.history(job)] == ["Completed"] * 3
    assert store.reads.count(job) == 1  # the first occurrence's; the others start from its writes


@pytest.mark.services
def test_a_job_changed_by_another_writer_is_acted_on_as_stored(
    pipeline: Pipeline, target: Target
) -> None:
    """The worker knows the job from its last write; the API then redefines it (a new path),
    and later disables it, behind the worker's back: the next deliveries follow storage."""
    target.answer("/before", 200)
    target.answer("/after", 200)
    job = pipeline.put_job("changed", every_minute(target, "/before"))
    pipeline.advance(MINUTE)
    assert len(target.received("/before")) == 1
    pipeline.put_job("changed", every_minute(target, "/after"))
    pipeline.advance(2 * MINUTE)
    assert len(target.received("/before")) == 1
    assert len(target.received("/after")) >= 1
    pipeline.put_job("changed", every_minute(target, "/after", state="Disabled"))
    called = len(target.received("/after"))
    pipeline.advance(3 * MINUTE)
    assert len(target.received("/after")) == called
    assert pipeline.job(job).document.state.value == "disabled"


def test_the_least_recently_used_job_goes_first_and_a_lost_write_forgets() -> None:
    collection = CollectionId("sub", "group", "jc")
    jobs = [JobId(collection, f"job-{n}") for n in range(3)]
    known = KnownJobs(most=2)
    for job in jobs[:2]:
        known.remember(Stored(job, None, f"etag-{job.name}"))  # type: ignore[arg-type]
    assert known.get(jobs[0]) is not None  # used: job-1 is now the least recent
    known.remember(Stored(jobs[2], None, "etag-job-2"))  # type: ignore[arg-type]
    assert [known.get(job) is not None for job in jobs] == [True, False, True]
    known.forget(jobs[0])
    assert known.get(jobs[0]) is None
