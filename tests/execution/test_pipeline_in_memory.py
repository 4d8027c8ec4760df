"""The pipeline's tests (test_pipeline.py) that need only the store, the due index and the
queue, run on the memory store (tests/in_memory.py): no Azurite, so `make test-fast` runs the
executor and scheduling end to end, against a real HTTP target."""

from __future__ import annotations

import pytest

from tests.execution.test_pipeline import (  # noqa: F401 (collected here, on this module's pipeline)
    test_a_collection_disabled_between_two_due_times_stops_the_later_jobs,
    test_a_crash_between_recording_and_sending_loses_no_occurrence,
    test_a_deleted_job_stops_at_once,
    test_a_duplicate_delivery_does_not_run_the_action_again,
    test_a_failing_target_is_retried_per_policy_then_the_error_action_runs,
    test_a_job_deleted_while_its_collection_is_enabled_is_left_deleted,
    test_a_job_written_while_its_collection_is_disabled_is_read_again_not_a_failure,
    test_a_one_off_job_runs_once_with_its_identity_and_completes,
    test_a_recurring_job_runs_every_occurrence_then_completes_at_count,
    test_a_redefined_job_never_runs_the_old_action,
    test_a_shared_read_of_a_collection_state_serves_only_deliveries_soon_after_it,
    test_a_tick_reads_only_the_due_rows,
    test_after_downtime_each_job_runs_once_and_the_missed_occurrences_are_postponed,
    test_an_outcome_waits_for_other_actions_only_so_long,
    test_disabling_and_enabling_resumes_without_a_catch_up_burst,
    test_follow_ups_of_one_second_from_many_threads_leave_in_one_message,
    test_follow_ups_of_one_second_that_fill_more_than_a_message_leave_in_messages_of_even_size,
    test_jobs_due_in_the_same_second_share_one_message,
    test_messages_on_the_queue_are_json_with_the_attempt,
    test_outcomes_are_recorded_after_the_actions_due_with_them_have_gone_out,
    test_the_executors_logs_name_the_collection_job_and_occurrence,
)
from tests.in_memory import MemoryPipeline
from tests.pipeline import Pipeline


@pytest.fixture
def pipeline() -> Pipeline:
    return MemoryPipeline()


def test_the_pipeline_here_is_the_memory_one(pipeline: Pipeline) -> None:
    assert isinstance(pipeline, MemoryPipeline)
    assert type(pipeline.store.jobs).__name__ == "JobsInMemory"
