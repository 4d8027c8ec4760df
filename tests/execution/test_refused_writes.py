"""A refused write leaves nothing behind (docs/architecture.md#three-rules-that-make-it-safe):
what was sent ahead of it is taken back, and a message whose write never landed is dropped
SAVE_GRACE after it was first sent, however often it was sent again. Run-nows in flight are
bounded per job and per collection (docs/behaviour.md#run-now). On real Azurite, with the
clock in the test's hands."""

from __future__ import annotations

import base64
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest

from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.collection import CollectionBody
from shared.domain.collection_document import CollectionDocument
from shared.domain.decisions import SAVE_GRACE
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import JobBody
from shared.domain.problems import Refused
from shared.domain.run_now import MOST_PER_COLLECTION, MOST_PER_JOB
from shared.execution import worker
from shared.storage.due_index import BUCKET, bucket_of
from shared.storage.errors import EtagMismatch, ModifiedConcurrently, QuotaExceeded
from shared.storage.interface import Preconditions
from shared.storage.table_store import table_storage_from_connection_string
from tests.pipeline import START, Pipeline
from tests.targets import Target
from tests.wrapped_store import Wrapped, wrapping

SECOND = timedelta(seconds=1)


def one_off(target: Target, path: str, at: datetime) -> dict[str, Any]:
    return {"startTime": at.isoformat(), "action": {"type": "Http", "request": {"uri": target.url(path), "method": "POST"}}}


def messages_on_the_queue(pipeline: Pipeline) -> int:
    """Every message the queue holds, invisible ones too (Azurite counts them exactly)."""
    return int(pipeline.queue.get_queue_properties().approximate_message_count or 0)


def indexed(pipeline: Pipeline, job: JobId, due: datetime) -> list[Delivery]:
    """The due-index rows of `job` due at `due`."""
    rows = pipeline.index.due(bucket_of(due), bucket_of(due) + BUCKET)
    return [row.delivery for row in rows if row.delivery.job == job and row.delivery.pending.due == due]


def save(pipeline: Pipeline, job: JobId, properties: dict[str, Any], **preconditions: str) -> None:
    body = JobBody.model_validate({"properties": properties})
    pipeline.services.scheduling.save_definition(
        job, body.properties, pipeline.clock(), preconditions=Preconditions(**preconditions)
    )


def test_creates_refused_by_the_job_quota_leave_nothing_on_the_queue_or_in_the_due_index(pipeline: Pipeline, target: Target) -> None:
    free = CollectionId("sub-pipeline", "group", f"{pipeline.collection.name}-free")
    document = CollectionDocument.created(CollectionBody.model_validate({"location": "westeurope", "properties": {"sku": {"name": "Free"}}}))
    pipeline.services.scheduling.save_collection_with_jobs(free, document, pipeline.clock(), preconditions=Preconditions(), previous=None)
    later = START + timedelta(minutes=30)
    for n in range(5):  # a Free collection's quota
        save(pipeline, JobId(free, f"job-{n}"), one_off(target, "/quota", later))
    assert messages_on_the_queue(pipeline) == 0  # all five wait in the due index
    now = pipeline.clock()
    with pytest.raises(QuotaExceeded):  # its first attempt due at once: sent to the queue first
        save(pipeline, JobId(free, "sixth-now"), one_off(target, "/quota", now))
    with pytest.raises(QuotaExceeded):  # due later: put into the due index first
        save(pipeline, JobId(free, "sixth-later"), one_off(target, "/quota", later))
    assert messages_on_the_queue(pipeline) == 0
    assert indexed(pipeline, JobId(free, "sixth-later"), later) == []
    assert len(pipeline.index.due(bucket_of(later), bucket_of(later) + BUCKET)) == 5
    assert pipeline.drain() == 0


def test_a_redefinition_refused_by_if_match_leaves_nothing_and_the_job_runs_as_defined(pipeline: Pipeline, target: Target) -> None:
    target.answer("/kept", 200)
    job = JobId(pipeline.collection, "kept")
    due = START + timedelta(minutes=10)
    save(pipeline, job, one_off(target, "/kept", due))
    stored = pipeline.job(job)
    pipeline.clock.at += SECOND
    # The same schedule: the refused definition's first attempt has the same time as the stored
    # one's, and must not take the place of its row in the due index.
    with pytest.raises(EtagMismatch):
        save(pipeline, job, one_off(target, "/kept", due), if_match='W/"bogus"')
    with pytest.raises(EtagMismatch):  # and one due at once, sent to the queue
        save(pipeline, job, one_off(target, "/kept", pipeline.clock()), if_match='W/"bogus"')
    assert messages_on_the_queue(pipeline) == 0
    [row] = indexed(pipeline, job, due)
    assert row.defined_at == stored.document.defined_at
    pipeline.advance(timedelta(minutes=11))
    assert len(target.received("/kept")) == 1
    assert [entry["status"] for entry in pipeline.history(job)] == ["Completed"]


def test_a_run_now_refused_because_every_write_lost_its_race_leaves_nothing(storage: str, target: Target) -> None:
    class LosingJobs(Wrapped):
        """Other writers change the job every time: no write of a run-now lands."""

        def accept_run_now(self, *args: Any, **kwargs: Any) -> None:
            return None

    real = table_storage_from_connection_string(storage)
    pipeline = Pipeline(storage, store=wrapping(real, jobs=LosingJobs))
    job = JobId(pipeline.collection, "contended")
    save(pipeline, job, one_off(target, "/contended", START + timedelta(minutes=10)))
    with pytest.raises(ModifiedConcurrently):
        pipeline.services.scheduling.run_now(job, pipeline.clock())
    assert messages_on_the_queue(pipeline) == 0


def test_a_message_whose_write_never_landed_is_dropped_after_save_grace_however_often_it_came_back(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Sent, and then the writer crashed (or the job was deleted at once): nothing will ever
    # make the attempt pending. The executor looks again (NotYet), visible at once here so that
    # the test needs no real second per look.
    monkeypatch.setattr(worker, "LOOK_AGAIN_AFTER", timedelta(0))
    now = pipeline.clock()
    ghost = JobId(pipeline.collection, "never-written")
    pipeline.dispatcher.dispatch([Delivery(ghost, now, Pending(Attempt(now, run_now=True), now))], now)
    incoming = pipeline._incoming
    looks, bound = 0, 3 * int(SAVE_GRACE.total_seconds())
    caplog.set_level(logging.INFO, logger="scheduler.executor")
    while looks < bound and messages_on_the_queue(pipeline):
        for message in list(next(incoming.receive_messages(messages_per_page=32).by_page(), [])):
            looks += 1
            pipeline.handle(base64.b64decode(message.content).decode(), message.dequeue_count)
            incoming.delete_message(message)
        pipeline.clock.at += SECOND
    assert messages_on_the_queue(pipeline) == 0
    assert looks <= SAVE_GRACE.total_seconds() + 1  # one look a second until its age passed the grace
    assert any("never-written" in line and "does not exist" in line for line in caplog.messages)


def test_run_nows_in_flight_are_bounded_per_job_and_per_collection(pipeline: Pipeline, target: Target) -> None:
    target.answer("/run", 200)
    later = START + timedelta(minutes=30)
    jobs = [JobId(pipeline.collection, f"run-{n}") for n in range(5)]
    for job in jobs:
        save(pipeline, job, one_off(target, "/run", later))
    def run_now(job: JobId, now: datetime) -> None:
        pipeline.clock.at += timedelta(milliseconds=1)  # run-nows of one instant are one attempt
        pipeline.services.scheduling.run_now(job, pipeline.clock())

    for _ in range(MOST_PER_JOB):
        run_now(jobs[0], pipeline.clock())
    with pytest.raises(Refused) as refused:
        run_now(jobs[0], pipeline.clock())
    assert refused.value.message == (
        "The job 'run-0' already has 3 run-nows in flight (pending or running), the most one job "
        "may have (3); try again when one has ended."
    )
    accepted = MOST_PER_JOB
    for job in jobs[1:]:
        while accepted < MOST_PER_COLLECTION and pipeline.job(job).document.run_nows_in_flight < MOST_PER_JOB:
            run_now(job, pipeline.clock())
            accepted += 1
    with pytest.raises(Refused) as refused:
        run_now(jobs[4], pipeline.clock())
    assert refused.value.message == (
        "The job collection already has 10 run-nows in flight (pending or running), the most one "
        "collection may have (10); try again when one has ended."
    )
    assert messages_on_the_queue(pipeline) == MOST_PER_COLLECTION  # the refused ones sent nothing
    assert pipeline.drain() == MOST_PER_COLLECTION
    assert len(target.received("/run")) == MOST_PER_COLLECTION
    run_now(jobs[0], pipeline.clock())  # once they have ended, a run-now goes again
    run_now(jobs[4], pipeline.clock())


def test_simultaneous_run_nows_of_different_jobs_never_pass_the_collections_bound(
    pipeline: Pipeline, target: Target
) -> None:
    target.answer("/racing", 200)
    later = START + timedelta(minutes=30)
    jobs = [JobId(pipeline.collection, f"racing-{n}") for n in range(60)]
    for job in jobs:
        save(pipeline, job, one_off(target, "/racing", later))
    start = threading.Barrier(len(jobs))

    def run_now(job: JobId) -> str:
        start.wait(timeout=30)
        try:
            pipeline.services.scheduling.run_now(job, pipeline.clock())
        except Refused as refused:
            return refused.message
        return "accepted"

    with ThreadPoolExecutor(len(jobs)) as pool:
        answers = list(pool.map(run_now, jobs))
    assert answers.count("accepted") == MOST_PER_COLLECTION, answers
    refusal = "The job collection already has 10 run-nows in flight"
    assert all(answer == "accepted" or answer.startswith(refusal) for answer in answers), answers
    assert messages_on_the_queue(pipeline) == MOST_PER_COLLECTION  # the refused ones sent nothing
    assert sum(pipeline.job(job).document.run_nows_in_flight for job in jobs) == MOST_PER_COLLECTION
