"""The stored job document: its JSON (what storage keeps) reads back as the same document."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from shared.domain.attempts import Attempt, Pending
from shared.domain.collection import SkuName
from shared.domain.job_definition import ActionName, JobState
from shared.domain.job_document import JobDocument, JobStatus, Retries
from shared.storage.job_codec import decode_job, decode_properties, encode_job

T0 = datetime(2026, 11, 24, 9, 0, 0, 250000, tzinfo=UTC)
DEFINITION: dict[str, Any] = {
    "state": "enabled",
    "action": {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}},
    "recurrence": {"frequency": "minute", "interval": 1, "count": 3},
}


def test_every_field_survives_the_round_trip_through_json() -> None:
    document = JobDocument(
        properties=decode_properties(DEFINITION),
        defined_at=T0,
        retries=Retries(2, timedelta(seconds=20)),
        status=JobStatus(3, 2, 1, last_execution_time=T0, next_execution_time=T0 + timedelta(minutes=1)),
        pending=(Pending(Attempt(T0, ActionName.ERROR_ACTION, retry=2), T0 + timedelta(seconds=30)),
                 Pending(Attempt(T0, run_now=True), T0)),
        occurrences=2,
        history_count=7,
        ended_at=T0 + timedelta(hours=1),
        region="westeurope",
        state_reason="paused for the migration",
    )  # fmt: skip
    assert decode_job(encode_job(document)) == document


def test_a_document_stored_before_the_typed_one_reads_the_same() -> None:
    """Documents written by earlier versions lack the keys that held their defaults."""
    stored = {"definition": DEFINITION, "status": {"executionCount": 0, "failureCount": 0, "faultedCount": 0},
              "definedAt": "2026-11-24T09:00:00.250000Z"}  # fmt: skip
    document = decode_job(stored)
    assert (document.pending, document.occurrences, document.history_count, document.region) == ((), 0, 0, "")
    assert document.ended_at is None
    assert document.retries == Retries(4, timedelta(seconds=30))  # no retryPolicy: the defaults
    assert encode_job(document) == stored | {
        "definedAt": "2026-11-24T09:00:00.25Z",  # written as the API writes times now
        "retries": {"count": 4, "intervalSeconds": 30.0},
        "occurrences": 0, "pending": [], "historyCount": 0, "region": "",
    }  # fmt: skip


def test_an_older_document_takes_its_retries_from_the_policy_it_spelled_out() -> None:
    action = DEFINITION["action"] | {"retryPolicy": {"retryType": "fixed", "retryInterval": "00:01:00",
                                                     "retryCount": 2}}  # fmt: skip
    stored = {"definition": DEFINITION | {"action": action}, "status": {"executionCount": 0},
              "definedAt": "2026-11-24T09:00:00.25Z"}  # fmt: skip
    assert decode_job(stored).retries == Retries(2, timedelta(minutes=1))
    none = DEFINITION["action"] | {"retryPolicy": {"retryType": "none"}}
    assert decode_job(stored | {"definition": DEFINITION | {"action": none}}).retries == Retries()


def test_the_retry_defaults_apply_without_being_written_into_the_definition() -> None:
    standard = JobDocument.defined(decode_properties(DEFINITION), T0)
    assert standard.retries == Retries(4, timedelta(seconds=30))
    free = JobDocument.defined(decode_properties(DEFINITION), T0, sku=SkuName.FREE)
    assert free.retries == Retries(4, timedelta(hours=1))
    assert free.properties.action.retry_policy is None
    assert "retryPolicy" not in free.public_properties()["action"]
    count_only = DEFINITION | {"action": DEFINITION["action"] | {"retryPolicy": {"retryCount": 1}}}
    assert JobDocument.defined(decode_properties(count_only), T0, sku=SkuName.FREE).retries == Retries(1, timedelta(hours=1))
    assert JobDocument.defined(decode_properties(count_only), T0).public_properties()["action"]["retryPolicy"] == {"retryCount": 1}


def test_a_new_definition_waits_for_its_first_occurrence_and_keeps_the_counts_it_replaces() -> None:
    first = JobDocument.defined(decode_properties(DEFINITION), T0)
    assert [entry.due for entry in first.pending] == [T0]
    assert first.status.to_wire() == {"executionCount": 0, "failureCount": 0, "faultedCount": 0,
                                      "nextExecutionTime": "2026-11-24T09:00:00.25Z"}  # fmt: skip
    ran = JobDocument(decode_properties(DEFINITION), T0, status=JobStatus(5, 1, 1, last_execution_time=T0), history_count=7)
    redefined = JobDocument.defined(decode_properties(DEFINITION), T0 + timedelta(hours=1), previous=ran)
    assert (redefined.status.execution_count, redefined.status.last_execution_time) == (5, T0)
    assert redefined.history_count == 7  # its entries stay, and the clean-up must still see them
    assert redefined.occurrences == 0  # count restarts with the new definition


def test_a_disabled_job_shows_no_next_execution_and_a_final_one_is_final() -> None:
    disabled = JobDocument.defined(decode_properties(DEFINITION | {"state": "Disabled"}), T0)
    assert disabled.pending == ()
    assert "nextExecutionTime" not in disabled.status.to_wire()
    completed = JobDocument.defined(decode_properties(DEFINITION), T0).with_state(JobState.COMPLETED)
    assert completed.final and not completed.enabled
    assert completed.status.next_execution_time is None
    assert completed.state.value == "completed"


def test_a_disabled_job_that_never_ran_shows_no_status_and_one_that_ran_does() -> None:
    never_ran = JobDocument.defined(decode_properties(DEFINITION | {"state": "disabled"}), T0)
    assert "status" not in never_ran.public_properties()
    assert never_ran.public_properties()["state"] == "disabled"
    ran = JobDocument(decode_properties(DEFINITION | {"state": "disabled"}), T0, status=JobStatus(1, 0, 0, last_execution_time=T0))
    assert ran.public_properties()["status"] == {"executionCount": 1, "failureCount": 0, "faultedCount": 0,
                                                 "lastExecutionTime": "2026-11-24T09:00:00.25Z"}  # fmt: skip
    assert JobDocument.defined(decode_properties(DEFINITION), T0).public_properties()["status"]["executionCount"] == 0


def test_a_state_reason_belongs_to_the_change_of_state_it_came_with() -> None:
    enabled = JobDocument.defined(decode_properties(DEFINITION), T0)
    paused = enabled.with_state(JobState.DISABLED, "paused for the migration")
    assert paused.state_reason == "paused for the migration"
    assert paused.with_state(JobState.DISABLED).state_reason == "paused for the migration"  # no change
    assert paused.with_state(JobState.DISABLED, "still migrating").state_reason == "still migrating"
    assert paused.with_state(JobState.DISABLED, "").state_reason is None  # cleared, said explicitly
    assert paused.with_state(JobState.ENABLED).state_reason is None  # it explained the old state
    assert paused.with_state(JobState.COMPLETED).state_reason is None  # the service's own change
    # A redefinition keeps the reason while the state stays, and takes a new one with it.
    disabled = {**DEFINITION, "state": "disabled"}
    assert JobDocument.defined(decode_properties(disabled), T0, previous=paused).state_reason == "paused for the migration"
    assert JobDocument.defined(decode_properties(DEFINITION), T0, previous=paused).state_reason is None
    assert JobDocument.defined(decode_properties(DEFINITION), T0, previous=paused, state_reason="done").state_reason == "done"
