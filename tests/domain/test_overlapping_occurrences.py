"""An occurrence that falls due while the previous one still runs (docs/behaviour.md
#overlapping-occurrences): overlapPolicy Wait, Skip and Allow, decided and recorded on a fixed
clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.collection import SkuName
from shared.domain.decisions import (
    MOST_ALONGSIDE,
    Begin,
    Outcome,
    Run,
    Settlement,
    abandoned,
    plan,
    settle,
)
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ActionName, JobBody, OverlapPolicy
from shared.domain.job_document import JobDocument, stored_properties
from shared.domain.job_rules import definition_problems
from shared.storage.job_codec import decode_delivery, decode_job, encode_delivery, encode_job

JOB = JobId(CollectionId("sub", "group", "jc"), "slow")
T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
HTTP = {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}}
NO_RETRIES = HTTP | {"retryPolicy": {"retryType": "none"}}


def job(overlap: str | None, action: dict[str, Any] = NO_RETRIES, **recurrence: Any) -> JobDocument:
    properties = {
        "action": action,
        "recurrence": {"frequency": "Minute", "interval": 1} | recurrence,
    }
    if overlap is not None:
        properties["overlapPolicy"] = overlap
    body = JobBody.model_validate({"properties": properties})
    return JobDocument.defined(stored_properties(body.properties), T0)


def deliver(
    doc: JobDocument, due: datetime, now: datetime, *, redelivered: bool = False,
    sent_at: datetime | None = None,
) -> Any:  # fmt: skip
    [pending] = [
        entry for entry in doc.pending if entry.attempt.expected == due and not entry.attempt.retry
    ]
    delivery = Delivery(JOB, doc.defined_at, pending, sent_at)
    return plan(doc, None, delivery, now=now, redelivered=redelivered)


def ended(
    doc: JobDocument, run: Run, started: datetime, now: datetime, succeeded: bool = True
) -> Settlement:
    return settle(doc, run, Outcome(succeeded, started, now, "Http Action - ..."), now, job=JOB)


def entries(settlement: Settlement) -> list[tuple[str, str, str]]:
    return [
        (entry["expectedExecutionTime"][11:16], entry["status"], entry["message"])
        for _, entry in settlement.history
    ]


def begin(doc: JobDocument, due: datetime, now: datetime) -> tuple[JobDocument, Run, Begin]:
    """Deliver under Allow: what the executor writes before the action, and what it runs."""
    decided = deliver(doc, due, now)
    assert isinstance(decided, Begin)
    assert decided.run is not None
    return decided.settlement.document, decided.run, decided


# --- Wait, the default -------------------------------------------------------------------------


def test_a_job_without_overlap_policy_waits_and_stores_nothing_new() -> None:
    doc = job(None)
    assert doc.overlap is OverlapPolicy.WAIT
    assert doc.properties.overlap_policy is None
    assert "overlapPolicy" not in doc.public_properties()


def test_wait_runs_the_occurrence_due_meanwhile_late_once_the_previous_is_over() -> None:
    doc = job("Wait")
    decided = deliver(doc, T0, T0)
    settled = ended(doc, decided, T0, T0 + 90 * timedelta(seconds=1))
    assert [entry.attempt for entry in settled.follow_ups] == [Attempt(T0 + MINUTE)]  # due already
    doc, now = settled.document, T0 + timedelta(seconds=90)
    late = deliver(doc, T0 + MINUTE, now)
    assert (late.attempt.expected, late.postponed) == (T0 + MINUTE, ())


def test_wait_coalesces_several_occurrences_due_meanwhile_into_the_latest() -> None:
    doc = job("Wait")
    over = T0 + timedelta(minutes=3, seconds=30)
    settled = ended(doc, deliver(doc, T0, T0), T0, over)
    # The next occurrence is sent when the previous one is over, and reached at once.
    late = deliver(settled.document, T0 + MINUTE, over, sent_at=over)
    assert late.attempt.expected == T0 + 3 * MINUTE
    assert late.postponed == (T0 + MINUTE, T0 + 2 * MINUTE)
    recorded = ended(settled.document, late, late.attempt.expected, T0 + 4 * MINUTE)
    assert [status for _, status, _ in entries(recorded)] == ["Postponed", "Postponed", "Completed"]
    for _, _, message in entries(recorded)[:2]:
        assert "the job's previous occurrence was still running (until " in message
        assert "overlapPolicy Wait" in message and "behind" not in message


def test_an_occurrence_sent_on_time_but_reached_late_is_postponed_because_the_service_was_behind() -> None:
    # The executor was busy (or down): the occurrence's message, sent when the one before it
    # ended, in time, was reached four minutes late. Nothing of the job was still running.
    for policy in ("Wait", "Skip"):
        doc = job(policy)
        settled = ended(doc, deliver(doc, T0, T0), T0, T0 + timedelta(seconds=2))
        reached = T0 + timedelta(minutes=5, seconds=10)
        late = deliver(settled.document, T0 + MINUTE, reached, sent_at=T0 + timedelta(seconds=2))
        assert late.postponed == (T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE, T0 + 4 * MINUTE)
        settlement = ended(settled.document, late, reached, reached)
        postponed = [message for _, status, message in entries(settlement) if status == "Postponed"]
        assert len(postponed) == 4, policy
        for message in postponed:
            assert "still running" not in message, policy
            assert "the service was down or behind: it reached the job only at " in message, policy


# --- Skip ----------------------------------------------------------------------------------------


def test_skip_records_the_occurrences_due_meanwhile_as_postponed_with_the_reason() -> None:
    doc = job("skip")  # any case; stored in the service's spelling
    assert doc.properties.overlap_policy.value == "Skip"
    over = T0 + timedelta(minutes=3, seconds=30)
    settled = ended(doc, deliver(doc, T0, T0), T0, over)
    reason = (
        "Skipped: the occurrence of 2026-11-22T09:00:00Z was still running (overlapPolicy Skip)."
    )
    assert entries(settled) == [("09:01", "Postponed", reason), ("09:02", "Postponed", reason),
                                ("09:03", "Postponed", reason), ("09:00", "Completed", "Http Action - ...")]  # fmt: skip
    assert [entry.attempt for entry in settled.follow_ups] == [
        Attempt(T0 + 4 * MINUTE)
    ]  # the next future one
    document = settled.document
    assert document.occurrences == 4  # skipped ones passed, as count counts them
    assert document.history_count == 4
    assert document.status.execution_count == 1
    assert document.status.next_execution_time == T0 + 4 * MINUTE
    assert [entry["repeatCount"] for _, entry in settled.history] == [0, 0, 0, 1]


def test_skip_waits_out_the_retries_of_the_running_occurrence() -> None:
    retrying = HTTP | {
        "retryPolicy": {"retryType": "fixed", "retryInterval": "PT40S", "retryCount": 2}
    }
    doc = job("Skip", retrying)
    now = T0
    decided = deliver(doc, T0, now)
    for _ in range(2):  # fails, and is retried 40 s later: 09:00:40, 09:01:20
        settled = ended(doc, decided, now, now, succeeded=False)
        [retry] = settled.follow_ups
        assert retry.attempt.expected == T0
        assert not [entry for entry in settled.history if entry[1]["status"] == "Postponed"]
        doc, now = settled.document, retry.due
        decided = plan(doc, None, Delivery(JOB, doc.defined_at, retry), now=now, redelivered=False)
    settled = ended(doc, decided, now, now)  # the second retry succeeds at 09:01:20
    assert entries(settled)[0][:2] == ("09:01", "Postponed")
    assert [entry.due for entry in settled.follow_ups] == [T0 + 2 * MINUTE]


def test_skip_with_nothing_due_meanwhile_runs_the_next_occurrence_on_time() -> None:
    doc = job("Skip")
    settled = ended(doc, deliver(doc, T0, T0), T0, T0 + timedelta(seconds=59))
    assert [entry.due for entry in settled.follow_ups] == [T0 + MINUTE]
    assert entries(settled) == [("09:00", "Completed", "Http Action - ...")]


def test_skipped_occurrences_count_toward_count_and_the_job_completes() -> None:
    doc = job("Skip", count=3)
    settled = ended(doc, deliver(doc, T0, T0), T0, T0 + 5 * MINUTE)
    assert [status for _, status, _ in entries(settled)] == ["Postponed", "Postponed", "Completed"]
    assert settled.follow_ups == []
    assert settled.document.state.value == "completed"
    assert settled.document.pending == ()


def test_skip_ends_faulted_when_the_last_occurrence_run_faulted() -> None:
    doc = job("Skip", endTime="2026-11-22T09:02:00Z")
    settled = ended(doc, deliver(doc, T0, T0), T0, T0 + 5 * MINUTE, succeeded=False)
    assert settled.document.state.value == "faulted"
    assert settled.document.status.faulted_count == 1


# --- Allow -----------------------------------------------------------------------------------------


def test_allow_schedules_the_next_occurrence_before_the_action_runs() -> None:
    doc = job("Allow")
    decided = deliver(doc, T0, T0)
    assert isinstance(decided, Begin)
    begun = decided.settlement
    assert [entry.attempt for entry in begun.follow_ups] == [Attempt(T0 + MINUTE)]
    assert begun.history == []
    assert begun.document.occurrences == 1
    [running, following] = begun.document.pending
    assert running.began == Attempt(T0, repeat=1)
    assert following.attempt == Attempt(T0 + MINUTE)
    assert decided.run == Run(Attempt(T0), Attempt(T0, repeat=1), passed=0)


def test_allow_runs_occurrences_alongside_each_with_its_own_counts_and_history() -> None:
    doc = job(
        "Allow",
        action=HTTP
        | {"retryPolicy": {"retryType": "fixed", "retryInterval": "PT30S", "retryCount": 1}},
    )
    doc, first, _ = begin(doc, T0, T0)
    doc, second, _ = begin(doc, T0 + MINUTE, T0 + MINUTE)  # the first is still running
    assert [entry.attempt.expected for entry in doc.pending] == [T0, T0 + MINUTE, T0 + 2 * MINUTE]
    # The second ends first, and well; then the first fails and is retried.
    settled = ended(doc, second, T0 + MINUTE, T0 + MINUTE + timedelta(seconds=5))
    assert settled.follow_ups == []  # the next one was scheduled when this one began
    assert settled.history[-1][1]["repeatCount"] == 2
    doc = settled.document
    settled = ended(doc, first, T0, T0 + timedelta(minutes=1, seconds=10), succeeded=False)
    [retry] = settled.follow_ups
    assert retry.attempt == Attempt(T0, ActionName.MAIN_ACTION, 1, repeat=1)
    assert settled.history[-1][1]["repeatCount"] == 1
    # The latest try to start, not the latest to end, is the last execution.
    assert settled.document.status.last_execution_time == T0 + MINUTE
    doc = settled.document
    decided = plan(
        doc, None, Delivery(JOB, doc.defined_at, retry), now=retry.due, redelivered=False
    )
    settled = ended(doc, decided, retry.due, retry.due, succeeded=False)  # its retries are spent
    assert settled.follow_ups == []
    assert (settled.history[-1][1]["retryCount"], settled.history[-1][1]["repeatCount"]) == (1, 1)
    status = settled.document.status
    assert (status.execution_count, status.failure_count, status.faulted_count) == (3, 2, 1)
    assert status.last_execution_time == retry.due
    assert settled.document.occurrences == 2
    assert settled.document.state.value == "enabled"
    assert [entry.attempt for entry in settled.document.pending] == [Attempt(T0 + 2 * MINUTE)]


@pytest.mark.parametrize(("first_ok", "second_ok", "state"),
                         [(False, True, "faulted"), (True, False, "completed")],
                         ids=["the-last-over-faulted", "the-last-over-succeeded"])  # fmt: skip
def test_allow_ends_the_job_when_its_last_running_occurrence_is_over(
    first_ok: bool, second_ok: bool, state: str
) -> None:
    doc = job("Allow", count=2)
    doc, first, _ = begin(doc, T0, T0)
    doc, second, decided = begin(doc, T0 + MINUTE, T0 + MINUTE)
    assert decided.settlement.follow_ups == []  # count reached: nothing after the second
    settled = ended(
        doc, second, T0 + MINUTE, T0 + MINUTE + timedelta(seconds=1), succeeded=second_ok
    )
    assert settled.document.state.value == "enabled"  # the first is still running
    settled = ended(
        settled.document, first, T0, T0 + timedelta(minutes=1, seconds=30), succeeded=first_ok
    )
    assert settled.document.state.value == state
    assert settled.document.pending == ()
    assert settled.document.status.next_execution_time is None


def test_allow_ends_at_end_time_once_the_occurrences_running_are_over() -> None:
    doc = job("Allow", endTime="2026-11-22T09:01:00Z")
    doc, first, _ = begin(doc, T0, T0)
    doc, second, decided = begin(doc, T0 + MINUTE, T0 + MINUTE)
    assert decided.settlement.follow_ups == []
    doc = ended(doc, second, T0 + MINUTE, T0 + MINUTE).document
    settled = ended(doc, first, T0, T0 + 2 * MINUTE)
    assert settled.document.state.value == "completed"


def test_allow_runs_at_most_a_few_alongside_and_skips_the_next_with_the_reason() -> None:
    doc = job("Allow")
    for minute in range(MOST_ALONGSIDE):
        doc, _, _ = begin(doc, T0 + minute * MINUTE, T0 + minute * MINUTE)
    due = T0 + MOST_ALONGSIDE * MINUTE
    decided = deliver(doc, due, due)
    assert isinstance(decided, Begin)
    assert decided.run is None
    [(_, entry)] = decided.settlement.history
    assert entry["status"] == "Postponed"
    assert entry["expectedExecutionTime"] == "2026-11-22T09:05:00Z"
    assert entry["message"] == ("Skipped: 5 occurrences of the job were still running, the most that run "
                                "alongside (overlapPolicy Allow).")  # fmt: skip
    assert [entry.attempt for entry in decided.settlement.follow_ups] == [Attempt(due + MINUTE)]
    running = [entry for entry in decided.settlement.document.pending if entry.began is not None]
    assert len(running) == MOST_ALONGSIDE


def test_allow_after_downtime_still_runs_the_latest_missed_once() -> None:
    doc = job("Allow")
    now = T0 + timedelta(minutes=10, seconds=5)
    decided = deliver(doc, T0, now)
    assert isinstance(decided, Begin)
    assert decided.run is not None
    assert decided.run.attempt == Attempt(T0 + 10 * MINUTE, repeat=11)
    assert [status for _, status, _ in entries(decided.settlement)] == ["Postponed"] * 10
    assert [entry.due for entry in decided.settlement.follow_ups] == [T0 + 11 * MINUTE]


def test_allow_a_redelivered_first_try_runs_again_and_sends_the_next_occurrence_again() -> None:
    """A crash between recording the beginning and sending the next occurrence loses nothing."""
    doc, run, decided = begin(job("Allow"), T0, T0)
    again = deliver(doc, T0, T0 + timedelta(seconds=30), redelivered=True)
    assert isinstance(again, Begin)
    assert again.run == run
    assert again.settlement.document == doc  # nothing counted twice
    assert again.settlement.follow_ups == decided.settlement.follow_ups
    duplicate = deliver(doc, T0, T0 + timedelta(seconds=1))  # a copy while it runs, not a crash
    assert duplicate == run
    assert abandoned(doc, Delivery(JOB, doc.defined_at, Pending(Attempt(T0), T0))) == run


def test_allow_a_run_now_keeps_out_of_the_series() -> None:
    doc, _, _ = begin(job("Allow"), T0, T0)
    now = T0 + timedelta(seconds=20)
    run_now = Pending(Attempt(now, run_now=True), now)
    doc = decode_job(encode_job(replace(doc, pending=(*doc.pending, run_now))))
    decided = plan(doc, None, Delivery(JOB, doc.defined_at, run_now), now=now, redelivered=False)
    assert decided == Run(run_now.attempt, run_now.attempt)
    settled = ended(doc, decided, now, now)
    assert settled.follow_ups == []
    assert settled.document.occurrences == 1
    assert settled.history[-1][1]["repeatCount"] == 0


def test_begun_attempts_survive_storage_and_messages() -> None:
    doc, _, _ = begin(job("Allow"), T0, T0)
    assert decode_job(encode_job(doc)) == doc
    delivery = Delivery(JOB, doc.defined_at, doc.pending[0], T0)
    assert decode_delivery(encode_delivery(delivery)) == delivery
    plain = Pending(Attempt(T0), T0)
    assert encode_job(replace(doc, pending=(plain,)))["pending"] == [
        {"expected": "2026-11-22T09:00:00Z", "action": "MainAction", "retry": 0, "runNow": False,
         "due": "2026-11-22T09:00:00Z"}
    ]  # as before  # fmt: skip


# --- what the API accepts ------------------------------------------------------------------------


def test_an_unknown_overlap_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="overlapPolicy"):
        JobBody.model_validate({"properties": {"action": HTTP, "overlapPolicy": "Sometimes"}})


@pytest.mark.parametrize("policy", ["Wait", "skip", "ALLOW"])
def test_each_overlap_policy_is_accepted_in_any_case(policy: str) -> None:
    body = JobBody.model_validate({"properties": {"action": HTTP, "overlapPolicy": policy}})
    assert definition_problems(body.properties, sku=SkuName.STANDARD, now=T0) == []
    assert stored_properties(body.properties).overlap_policy.value == policy.capitalize()
