"""The pipeline's tests (test_pipeline.py) that need only the store, the due index and the
queue, run on the memory store (tests/in_memory.py): no Azurite, so `make test-fast` runs the
executor and scheduling end to end, against a real HTTP target."""

from __future__ import annotations

import pytest

from tests.execution.test_pipeline import (  # noqa: F401 (collected here, on this module's pipeline)
    test_a_deleted_job_stops_at_once,
    test_a_duplicate_delivery_does_not_run_the_action_again,
    test_a_failing_target_is_retried_per_policy_then_the_error_action_runs,
    test_a_one_off_job_runs_once_with_its_identity_and_completes,
    test_a_recurring_job_runs_every_occurrence_then_completes_at_count,
    test_a_redefined_job_never_runs_the_old_action,
    test_disabling_and_enabling_resumes_without_a_catch_up_burst,
)
from tests.in_memory import MemoryPipeline
from tests.pipeline import Pipeline


@pytest.fixture
def pipeline() -> Pipeline:
    return MemoryPipeline()


def test_the_pipeline_here_is_the_memory_one(pipeline: Pipeline) -> None:
    assert isinstance(pipeline, MemoryPipeline)
    assert type(pipeline.store).__name__ == "MemoryStore"
