"""A job this process wrote last is not read again for its next occurrence, a job whose message
came early is read while the message waits rather than at its due time, and a job that someone
else changed since is acted on as stored (shared/execution/known_jobs.py)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from shared.domain.ids import CollectionId, JobId
from shared.execution import messages
from shared.execution.known_jobs import KnownJobs
from shared.execution.worker import READ_AHEAD_UNTIL, THREAD_SLEEPS_LAST
from shared.storage.documents import Stored
from shared.storage.table_store import table_storage_from_connection_string
from tests.pipeline import START, Pipeline
from tests.targets import Target
from tests.wrapped_store import Wrapped

MINUTE = timedelta(minutes=1)


class CountedReads(Wrapped):
    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.reads: list[JobId] = []

    def job(self, job: JobId) -> Any:
        self.reads.append(job)
        return self.inner.job(job)


def counting_reads(storage: str) -> tuple[CountedReads, Pipeline]:
    """A pipeline on storage whose jobs note which of them are read."""
    real = table_storage_from_connection_string(storage)
    jobs = CountedReads(real.jobs)
    return jobs, Pipeline(storage, store=dataclasses.replace(real, jobs=jobs))


def once(target: Target, path: str, **properties: Any) -> dict[str, Any]:
    action = {"type": "Http", "request": {"uri": target.url(path), "method": "POST"},
              "retryPolicy": {"retryType": "None"}}  # fmt: skip
    return {"startTime": START.isoformat(), "action": action} | properties


def taken_off_the_queue(pipeline: Pipeline) -> tuple[str, messages.Deliveries]:
    """The one message the next minute brings, not handled: the test hands it in itself."""
    received: list[str] = []
    pipeline.advance(MINUTE, on_message=lambda text, count: received.append(text))
    [text] = received
    message = messages.received(text)
    assert isinstance(message, messages.Deliveries)
    return text, message


def every_minute(target: Target, path: str, **properties: Any) -> dict[str, Any]:
    action = {"type": "Http", "request": {"uri": target.url(path), "method": "POST"},
              "retryPolicy": {"retryType": "None"}}  # fmt: skip
    recurrence = {"frequency": "Minute", "interval": 1}
    return {"startTime": START.isoformat(), "action": action, "recurrence": recurrence} | properties


@pytest.mark.services
def test_a_recurring_job_is_read_once_then_known_from_its_own_writes(
    storage: str, target: Target
) -> None:
    store, pipeline = counting_reads(storage)
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


@pytest.mark.services
def test_a_job_is_read_while_its_early_message_waits_and_not_again_at_its_due_time(
    storage: str, target: Target
) -> None:
    store, pipeline = counting_reads(storage)
    target.answer("/ahead", 200)
    job = pipeline.put_job("ahead", once(target, "/ahead"))
    text, message = taken_off_the_queue(pipeline)
    store.reads.clear()
    pipeline.clock.at = message.due - timedelta(seconds=1)  # as the queue hands it: early
    pipeline.executor.read_ahead(message)
    assert store.reads == [job]
    # The function awaits all but the last few milliseconds, which the thread sleeps.
    assert pipeline.executor.seconds_until_due(message) == (
        timedelta(seconds=1) - THREAD_SLEEPS_LAST
    ).total_seconds()
    pipeline.clock.at = message.due
    pipeline.handle(text, 1)
    assert store.reads == [job]  # its first request at its time was its claim
    assert len(target.received("/ahead")) == 1
    assert [entry["status"] for entry in pipeline.history(job)] == ["Completed"]


@pytest.mark.services
def test_a_job_changed_after_it_was_read_ahead_is_acted_on_as_stored(
    storage: str, target: Target
) -> None:
    store, pipeline = counting_reads(storage)
    target.answer("/changed-ahead", 200)
    job = pipeline.put_job("changed-ahead", once(target, "/changed-ahead"))
    text, message = taken_off_the_queue(pipeline)
    pipeline.clock.at = message.due - timedelta(seconds=1)
    pipeline.executor.read_ahead(message)
    pipeline.put_job("changed-ahead", once(target, "/changed-ahead", state="Disabled"))
    store.reads.clear()
    pipeline.clock.at = message.due
    pipeline.handle(text, 1)
    assert target.received("/changed-ahead") == []
    assert store.reads == [job]  # the claim on the job as read ahead lost: read, then skipped
    assert pipeline.job(job).document.state.value == "disabled"


@pytest.mark.services
def test_nothing_is_read_ahead_when_the_due_time_is_too_near_or_too_far(
    storage: str, target: Target
) -> None:
    store, pipeline = counting_reads(storage)
    target.answer("/near", 200)
    pipeline.put_job("near", once(target, "/near"))
    _, message = taken_off_the_queue(pipeline)
    store.reads.clear()
    for early in (READ_AHEAD_UNTIL / 2, timedelta(minutes=1)):
        pipeline.clock.at = message.due - early
        pipeline.executor.read_ahead(message)
    assert store.reads == []


def test_a_read_does_not_replace_what_this_process_wrote_meanwhile() -> None:
    job = JobId(CollectionId("sub", "group", "jc"), "job")
    known = KnownJobs()
    known.remember(Stored(job, None, "written"))  # type: ignore[arg-type]
    known.offer(Stored(job, None, "read before the write"))  # type: ignore[arg-type]
    assert known.get(job) == Stored(job, None, "written")  # type: ignore[arg-type]
    known.forget(job)
    known.offer(Stored(job, None, "read"))  # type: ignore[arg-type]
    assert known.get(job) == Stored(job, None, "read")  # type: ignore[arg-type]


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
