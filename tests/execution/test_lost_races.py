"""A write of the API that loses its race builds its document again on the job as it now is.

A PUT reads the job, builds the new document on it (the counts of what already ran stay) and
writes it, checked against the etag it read. When the executor's settlement, or another
creator, lands in between, the write must not put back what that write changed: the PUT reads
the job again, checks it again (a job that became final is refused) and builds anew. Run on the
memory store and on Azurite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from azure.core.exceptions import ServiceRequestError

from shared.domain.ids import JobId
from shared.domain.job_definition import JobBody, JobProperties, JobState
from shared.domain.job_document import JobDocument
from shared.domain.problems import Refused
from shared.execution.scheduling import Scheduling
from shared.storage.due_index import BUCKET, bucket_of
from shared.storage.interface import Storage
from tests.in_memory import MemoryPipeline
from tests.pipeline import Pipeline
from tests.wrapped_store import Wrapped


@pytest.fixture(params=["memory", pytest.param("table", marks=pytest.mark.services)])
def pipeline(request: pytest.FixtureRequest) -> Pipeline:
    if request.param == "memory":
        return MemoryPipeline()
    return Pipeline(request.getfixturevalue("storage"))


class RacedJobs(Wrapped):
    """The real jobs, but `meanwhile` runs once just before the first job write is sent: a
    write of someone else that lands between the writer's read and its write."""

    def __init__(self, inner: Any, meanwhile: Callable[[], None]) -> None:
        super().__init__(inner)
        self._meanwhile: Callable[[], None] | None = meanwhile
        self.job_writes = 0

    def save_job(self, *args: Any, **kwargs: Any) -> Any:
        self.job_writes += 1
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile()
        return self.inner.save_job(*args, **kwargs)


def raced(pipeline: Pipeline, meanwhile: Callable[[], None]) -> tuple[Scheduling, RacedJobs]:
    """Scheduling on the pipeline's storage, with its jobs raced by `meanwhile`."""
    jobs = RacedJobs(pipeline.store.jobs, meanwhile)
    storage: Storage = dataclasses.replace(pipeline.store, jobs=jobs)
    return Scheduling(storage, pipeline.dispatcher), jobs


def definition(pipeline: Pipeline, path: str) -> JobProperties:
    start = pipeline.clock() + timedelta(days=1)
    body = {
        "properties": {
            "startTime": start.isoformat(),
            "action": {
                "type": "Http",
                "request": {"uri": f"https://example.org{path}", "method": "GET"},
            },
            "recurrence": {"frequency": "Hour", "interval": 1},
        }
    }
    return JobBody.model_validate(body).properties


def settle(pipeline: Pipeline, job: JobId, change: Callable[[JobDocument], JobDocument]) -> None:
    """The executor's write of the job's outcome (its settlement), as the store takes it."""
    stored = pipeline.job(job)
    assert pipeline.store.executor.settle_job(stored, change(stored.document), []) is not None


def ran_once(document: JobDocument) -> JobDocument:
    return replace(
        document,
        status=replace(document.status, execution_count=document.status.execution_count + 1),
    )


def indexed_dues(pipeline: Pipeline, job: JobId, document: JobDocument) -> list[Any]:
    """The due-index rows of the job's pending attempts that belong to this definition."""
    found = []
    for pending in document.pending:
        rows = pipeline.index.due(bucket_of(pending.due), bucket_of(pending.due) + BUCKET)
        found += [
            row
            for row in rows
            if row.delivery.job == job and row.delivery.defined_at == document.defined_at
        ]
    return found


def test_a_put_racing_a_settlement_keeps_the_executors_counts_with_the_puts_definition(
    pipeline: Pipeline,
) -> None:
    job = JobId(pipeline.collection, "raced")
    pipeline.services.scheduling.save_definition(
        job, definition(pipeline, "/old"), pipeline.clock()
    )
    settle(pipeline, job, ran_once)  # one run recorded before the PUT reads the job
    scheduling, jobs = raced(pipeline, lambda: settle(pipeline, job, ran_once))
    pipeline.clock.at += timedelta(seconds=1)

    stored, created = scheduling.save_definition(
        job, definition(pipeline, "/new"), pipeline.clock()
    )

    assert not created
    kept = pipeline.job(job)
    assert kept.document.status.execution_count == 2  # the settlement that landed in between
    assert kept.document.properties.action.request.uri == "https://example.org/new"
    assert stored.etag == kept.etag and stored.document == kept.document
    assert jobs.job_writes == 2  # the first write was refused, the second built anew
    assert len(indexed_dues(pipeline, job, kept.document)) == len(kept.document.pending) == 1


def test_a_put_racing_a_settlement_that_completes_the_job_is_refused(pipeline: Pipeline) -> None:
    job = JobId(pipeline.collection, "completed")
    pipeline.services.scheduling.save_definition(
        job, definition(pipeline, "/old"), pipeline.clock()
    )
    scheduling, _ = raced(
        pipeline, lambda: settle(pipeline, job, lambda d: d.with_state(JobState.COMPLETED))
    )
    pipeline.clock.at += timedelta(seconds=1)

    with pytest.raises(Refused):
        scheduling.save_definition(job, definition(pipeline, "/new"), pipeline.clock())

    kept = pipeline.job(job)
    assert kept.document.state is JobState.COMPLETED
    assert kept.document.properties.action.request.uri == "https://example.org/old"
    new_defined_at = pipeline.clock()
    start = pipeline.clock() + timedelta(days=1)
    rows = pipeline.index.due(bucket_of(start), bucket_of(start) + BUCKET)
    assert [
        row for row in rows if row.delivery.job == job and row.delivery.defined_at == new_defined_at
    ] == []


def test_a_create_that_loses_to_another_creator_replaces_the_job_it_finds(
    pipeline: Pipeline,
) -> None:
    job = JobId(pipeline.collection, "contended")
    other = pipeline.services.scheduling
    scheduling, _ = raced(
        pipeline,
        lambda: other.save_definition(job, definition(pipeline, "/first"), pipeline.clock()),
    )

    stored, created = scheduling.save_definition(
        job, definition(pipeline, "/second"), pipeline.clock()
    )

    assert not created  # the other creator's job was there: this write replaced it
    kept = pipeline.job(job)
    assert kept.etag == stored.etag
    assert kept.document.properties.action.request.uri == "https://example.org/second"
    counted = pipeline.store.jobs.job_slot(JobId(pipeline.collection, "any"), counted=True)
    assert counted.jobs_in_collection == len(pipeline.store.jobs.jobs(pipeline.collection)) == 1


def test_a_write_that_landed_stands_when_taking_back_what_its_lost_attempt_sent_fails(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = JobId(pipeline.collection, "stands")
    pipeline.services.scheduling.save_definition(
        job, definition(pipeline, "/old"), pipeline.clock()
    )
    scheduling, jobs = raced(pipeline, lambda: settle(pipeline, job, ran_once))

    def storage_down(_: object) -> None:
        raise ServiceRequestError("storage unreachable")

    monkeypatch.setattr(pipeline.dispatcher, "withdraw", storage_down)
    pipeline.clock.at += timedelta(seconds=1)

    stored, created = scheduling.save_definition(job, definition(pipeline, "/new"), pipeline.clock())

    assert not created and jobs.job_writes == 2
    kept = pipeline.job(job)
    assert kept.etag == stored.etag
    assert kept.document.properties.action.request.uri == "https://example.org/new"
