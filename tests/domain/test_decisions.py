"""What the executor decides and records, from the behaviour reference's execution rules:
pure, on a fixed clock."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.domain import decisions
from shared.domain.attempts import Attempt, Claim, Delivery, Pending
from shared.domain.collection import SkuName
from shared.domain.decisions import NotYet, Outcome, Park, Resend, Run, Skip, plan, resumed, settle
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ActionName, JobBody, JobState
from shared.domain.job_document import JobDocument, stored_properties
from shared.execution.messages import Deliveries, MalformedMessage, from_wire, to_wire
from shared.storage.job_codec import decode_delivery, decode_job, encode_delivery, encode_job

JOB = JobId(CollectionId("sub", "group", "jc"), "job")
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
HTTP = {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}}


def document(defined_at: datetime = T0, **properties: Any) -> JobDocument:
    body = JobBody.model_validate({"properties": {"action": HTTP} | properties})
    return JobDocument.defined(stored_properties(body.properties), defined_at, sku=SkuName.STANDARD)


def every_minute(**extra: Any) -> dict[str, Any]:
    return {"recurrence": {"frequency": "Minute", "interval": 1, **extra}}


def delivery_of(doc: JobDocument, sent_at: datetime | None = None, index: int = 0) -> Delivery:
    return Delivery(JOB, doc.defined_at, doc.pending[index], sent_at)


def decide(doc: JobDocument | None, delivery: Delivery, now: datetime, *, state: str | None = None,
           redelivered: bool = False) -> Any:  # fmt: skip
    return plan(doc, state, delivery, now=now, redelivered=redelivered)


def outcome(succeeded: bool, at: datetime) -> Outcome:
    return Outcome(succeeded, at, at + timedelta(milliseconds=20), "Http Action - Response ...")


def run_once(doc: JobDocument, now: datetime, succeeded: bool = True) -> Any:
    """Deliver the job's first pending attempt at `now`, perform it, and settle."""
    decided = decide(doc, delivery_of(doc), now)
    assert isinstance(decided, Run)
    return settle(doc, decided, outcome(succeeded, now), now)


# --- on time ----------------------------------------------------------------------------------


def test_an_on_time_occurrence_runs_and_the_next_one_is_scheduled() -> None:
    doc = document(**every_minute())
    assert [entry.due for entry in doc.pending] == [T0]
    settled = run_once(doc, T0)
    assert [entry.attempt for entry in settled.follow_ups] == [Attempt(T0 + timedelta(minutes=1))]
    status = settled.document.status.to_wire()
    assert status["executionCount"] == 1
    assert status["failureCount"] == 0
    assert status["lastExecutionTime"] == "2026-11-22T10:00:00Z"
    assert status["nextExecutionTime"] == "2026-11-22T10:01:00Z"
    [(_, entry)] = settled.history
    assert entry["status"] == "Completed"
    assert entry["actionName"] == "MainAction"
    assert entry["expectedExecutionTime"] == "2026-11-22T10:00:00Z"
    assert entry["repeatCount"] == 1


def test_a_one_off_job_completes_after_its_run() -> None:
    settled = run_once(document(), T0)
    assert settled.follow_ups == []
    assert settled.document.state.value == "completed"
    assert "nextExecutionTime" not in settled.document.status.to_wire()
    assert settled.document.pending == ()


def test_count_completes_the_job_after_that_many_occurrences() -> None:
    doc = document(**every_minute(count=2))
    doc = run_once(doc, T0).document
    assert doc.state.value == "enabled"
    doc = run_once(doc, T0 + timedelta(minutes=1)).document
    assert doc.state.value == "completed"
    assert doc.status.execution_count == 2


def test_end_time_completes_the_job_at_its_last_occurrence() -> None:
    doc = document(**every_minute(endTime="2026-11-22T10:01:30Z"))
    doc = run_once(doc, T0).document
    doc = run_once(doc, T0 + timedelta(minutes=1)).document
    assert doc.state.value == "completed"


# --- duplicates, changes, states --------------------------------------------------------------


def test_a_duplicate_of_a_finished_attempt_does_not_run_again() -> None:
    doc = document(**every_minute())
    delivered = delivery_of(doc)
    settled = run_once(doc, T0)
    assert isinstance(decide(settled.document, delivered, T0 + timedelta(seconds=5)), Skip)


def test_a_redelivered_finished_attempt_sends_what_followed_it_again() -> None:
    """The crash between recording an outcome and sending its follow-up loses nothing."""
    doc = document(**every_minute())
    delivered = delivery_of(doc)
    settled = run_once(doc, T0)
    decided = decide(settled.document, delivered, T0 + timedelta(seconds=30), redelivered=True)
    assert isinstance(decided, Resend)
    assert decided.follow_ups == tuple(settled.follow_ups)


def test_an_attempt_of_a_replaced_definition_is_skipped() -> None:
    old = document(**every_minute())
    new = document(T0 + timedelta(seconds=10), **every_minute())
    assert isinstance(decide(new, delivery_of(old), T0 + timedelta(seconds=20)), Skip)


def test_a_deleted_job_runs_nothing() -> None:
    doc = document()
    assert isinstance(decide(None, delivery_of(doc), T0 + timedelta(minutes=1)), Skip)


def test_a_message_sent_just_before_its_write_waits_for_it() -> None:
    """The API sends first and writes second; the executor must not give up on it meanwhile."""
    doc = document()
    delivered = delivery_of(doc, sent_at=T0)
    assert isinstance(decide(None, delivered, T0 + timedelta(milliseconds=5)), NotYet)
    older = document(T0 - timedelta(hours=1))
    assert isinstance(decide(older, delivered, T0 + timedelta(milliseconds=5)), NotYet)
    assert isinstance(decide(None, delivered, T0 + timedelta(seconds=11)), Skip)


@pytest.mark.parametrize(("job_state", "collection_state"), [("disabled", None), ("enabled", "Disabled"),
                                                             ("enabled", "Suspended")])  # fmt: skip
def test_a_job_that_is_off_is_parked_and_forgets_the_attempt(
    job_state: str, collection_state: str | None
) -> None:
    doc = document(**every_minute())
    delivered = delivery_of(doc)
    doc = replace(doc, properties=doc.properties.model_copy(update={"state": JobState(job_state)}))
    decided = decide(doc, delivered, T0, state=collection_state)
    assert isinstance(decided, Park)
    assert decided.document.pending == ()


def test_enabling_resumes_at_the_next_future_occurrence_without_catch_up() -> None:
    doc = document(**every_minute())
    doc = replace(doc, pending=())
    later = T0 + timedelta(hours=3, seconds=20)
    resumed_doc, added = resumed(doc, later)
    assert [entry.attempt for entry in added] == [Attempt(T0 + timedelta(hours=3, minutes=1))]
    assert resumed_doc.status.to_wire()["nextExecutionTime"] == "2026-11-22T13:01:00Z"
    assert resumed(resumed_doc, later)[1] == []  # it waits already: nothing sent twice


def test_run_now_runs_even_a_disabled_job_and_leaves_its_schedule_alone() -> None:
    doc = document(**every_minute())
    now = T0 + timedelta(seconds=7)
    run_now = Pending(Attempt(now, run_now=True), now)
    doc = replace(
        doc, properties=doc.properties.model_copy(update={"state": JobState.DISABLED}), pending=(*doc.pending, run_now)
    )
    decided = decide(doc, Delivery(JOB, doc.defined_at, run_now), now)
    assert isinstance(decided, Run)
    settled = settle(doc, decided, outcome(True, now), now)
    assert settled.follow_ups == []
    assert settled.document.pending == doc.pending[:1]
    assert settled.history[0][1]["repeatCount"] == 0


# --- retries and errorAction ------------------------------------------------------------------


def retrying(count: int, error_action: bool = True) -> JobDocument:
    action = HTTP | {
        "retryPolicy": {"retryType": "fixed", "retryInterval": "PT20S", "retryCount": count}
    }
    if error_action:
        action |= {
            "errorAction": {
                "type": "Http",
                "request": {"uri": "https://example.org/err", "method": "POST"},
            }
        }
    return document(action=action, **every_minute())


def test_failed_attempts_are_retried_per_policy_then_the_error_action_runs() -> None:
    doc = retrying(2)
    now = T0
    for retry in range(3):
        settled = run_once(doc, now, succeeded=False)
        [follow_up] = settled.follow_ups
        doc = settled.document
        if retry < 2:
            assert follow_up.attempt == Attempt(T0, ActionName.MAIN_ACTION, retry + 1)
            assert follow_up.due == now + timedelta(seconds=20)
        else:
            assert follow_up.attempt == Attempt(T0, ActionName.ERROR_ACTION, 0)
            assert follow_up.due == now
        assert settled.history[-1][1]["retryCount"] == retry
        assert settled.history[-1][1]["status"] == "Failed"
        now = follow_up.due
    status = doc.status
    assert (status.execution_count, status.failure_count, status.faulted_count) == (3, 3, 1)
    settled = run_once(doc, now)  # the error action succeeds
    [entry] = [entry for _, entry in settled.history]
    assert entry["actionName"] == "ErrorAction"
    assert [follow_up.attempt for follow_up in settled.follow_ups] == [
        Attempt(T0 + timedelta(minutes=1))
    ]
    assert settled.document.status.execution_count == 3  # the error action is not an execution


@pytest.mark.parametrize(("sku", "interval"), [(SkuName.STANDARD, timedelta(seconds=30)),
                                               (SkuName.FREE, timedelta(hours=1))])  # fmt: skip
def test_without_a_retry_policy_the_defaults_still_retry_four_times(
    sku: SkuName, interval: timedelta
) -> None:
    body = JobBody.model_validate({"properties": {"action": HTTP} | every_minute()})
    doc = JobDocument.defined(stored_properties(body.properties), T0, sku=sku)
    assert doc.properties.action.retry_policy is None  # not echoed: the client sent none
    now = T0
    for retry in range(4):
        settled = run_once(doc, now, succeeded=False)
        [follow_up] = settled.follow_ups
        assert follow_up.attempt == Attempt(T0, ActionName.MAIN_ACTION, retry + 1)
        assert follow_up.due == now + interval
        doc, now = settled.document, follow_up.due
    settled = run_once(doc, now, succeeded=False)  # the fifth failure: retries spent
    assert [entry.attempt for entry in settled.follow_ups] == [Attempt(T0 + timedelta(minutes=1))]
    assert settled.document.status.failure_count == 5
    assert settled.document.status.faulted_count == 1


def test_every_attempt_has_its_own_history_entry_newest_first() -> None:
    doc = retrying(1)
    ids = []
    now = T0
    for _ in range(3):
        settled = run_once(doc, now, succeeded=False)
        ids.append(settled.history[-1][0])
        doc, now = settled.document, settled.follow_ups[0].due
    assert len(set(ids)) == 3
    assert sorted(ids) == ids[::-1]


def test_a_one_off_job_that_fails_without_retries_is_faulted() -> None:
    action = HTTP | {"retryPolicy": {"retryType": "none"}}
    settled = run_once(document(action=action), T0, succeeded=False)
    assert settled.document.state.value == "faulted"
    assert settled.document.status.faulted_count == 1


# --- missed occurrences -----------------------------------------------------------------------


def test_missed_occurrences_run_once_for_the_latest_and_the_rest_are_postponed() -> None:
    doc = document(**every_minute())
    now = T0 + timedelta(minutes=30, seconds=30)
    decided = decide(doc, delivery_of(doc), now)
    assert isinstance(decided, Run)
    assert decided.attempt.expected == T0 + timedelta(minutes=30)
    assert decided.postponed == tuple(T0 + timedelta(minutes=n) for n in range(30))
    settled = settle(doc, decided, outcome(True, now), now)
    statuses = [entry["status"] for _, entry in settled.history]
    assert statuses == ["Postponed"] * 30 + ["Completed"]
    assert settled.document.occurrences == 31
    assert settled.document.status.execution_count == 1
    assert [entry.due for entry in settled.follow_ups] == [T0 + timedelta(minutes=31)]


def test_missed_occurrences_stop_at_count() -> None:
    doc = document(**every_minute(count=3))
    decided = decide(doc, delivery_of(doc), T0 + timedelta(minutes=30))
    assert decided.attempt.expected == T0 + timedelta(minutes=2)
    settled = settle(doc, decided, outcome(True, T0), T0 + timedelta(minutes=30))
    assert settled.document.state.value == "completed"


def test_an_occurrence_a_little_late_is_not_a_missed_one() -> None:
    doc = document(**every_minute())
    decided = decide(doc, delivery_of(doc), T0 + timedelta(seconds=59))
    assert decided.attempt.expected == T0
    assert decided.postponed == ()


def test_messages_round_trip() -> None:
    doc = retrying(1)
    delivered = delivery_of(doc, sent_at=T0)
    assert decode_delivery(encode_delivery(delivered)) == delivered


def test_deliveries_due_in_one_second_travel_in_one_message() -> None:
    first = Delivery(JOB, T0, Pending(Attempt(T0), T0))
    second = Delivery(JobId(JOB.collection, "other"), T0, Pending(Attempt(T0), T0))
    alone = Deliveries((first,))
    assert json.loads(to_wire(alone)) == encode_delivery(first)  # one alone keeps the single shape
    assert from_wire(to_wire(alone)) == alone
    grouped = Deliveries((first, second))
    assert list(json.loads(to_wire(grouped))) == ["deliveries"]
    assert from_wire(to_wire(grouped)) == grouped


@pytest.mark.parametrize("message", [{"deliveries": []}, {"deliveries": "x"}, {"deliveries": [{"job": {}}]}],
                         ids=["empty", "not-a-list", "malformed-member"])  # fmt: skip
def test_a_malformed_group_is_refused(message: dict[str, Any]) -> None:
    with pytest.raises(MalformedMessage):
        from_wire(json.dumps(message))


# --- claims: a try's target is called once ------------------------------------------------


def test_a_try_claimed_by_another_delivery_is_held_until_its_claim_runs_out() -> None:
    doc = document(**every_minute())
    delivered = delivery_of(doc)
    claim = Claim("holder-a", T0 + timedelta(seconds=80))
    held = doc.claimed(delivered.pending.attempt, claim)
    assert [entry.claim for entry in held.pending] == [claim]
    assert decide(held, delivered, T0 + timedelta(seconds=30), redelivered=True) == decisions.Held(
        claim.until
    )
    assert decide(held, delivered, T0 + timedelta(seconds=79, microseconds=999_999)) == decisions.Held(
        claim.until
    )


def test_a_claim_past_its_deadline_is_taken_over_while_its_try_is_unrecorded() -> None:
    doc = document(**every_minute())
    delivered = delivery_of(doc)
    held = doc.claimed(delivered.pending.attempt, Claim("died", T0 + timedelta(seconds=80)))
    taken_over = decide(held, delivered, T0 + timedelta(seconds=80), redelivered=True)
    assert isinstance(taken_over, Run) and taken_over.delivered == delivered.pending.attempt
    # Recorded by its holder before the deadline: the try is gone, nothing is called again.
    recorded = settle(held, decide(doc, delivered, T0), outcome(True, T0), T0).document
    assert isinstance(
        decide(recorded, delivered, T0 + timedelta(seconds=90)), Skip
    )


def test_a_claim_is_kept_in_the_document_and_dropped_with_its_try() -> None:
    doc = document(**every_minute())
    delivered = delivery_of(doc)
    held = doc.claimed(delivered.pending.attempt, Claim("a", T0 + timedelta(seconds=80)))
    assert decode_job(json.loads(json.dumps(encode_job(held)))).pending == held.pending
    settled = settle(held, decide(doc, delivered, T0), outcome(True, T0), T0).document
    assert all(entry.claim is None for entry in settled.pending)


def test_under_allow_a_begun_occurrence_claimed_by_another_is_held() -> None:
    doc = document(**every_minute(), overlapPolicy="Allow")
    delivered = delivery_of(doc)
    begun = decide(doc, delivered, T0)
    assert isinstance(begun, decisions.Begin) and begun.run is not None
    held = begun.settlement.document.claimed(
        delivered.pending.attempt, Claim("a", T0 + timedelta(seconds=80))
    )
    assert decide(held, delivered, T0 + timedelta(seconds=40), redelivered=True) == decisions.Held(
        T0 + timedelta(seconds=80)
    )
