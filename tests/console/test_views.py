"""What the console shows, from stored documents and a fixed `now`: no storage, no browser."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from shared.console.views import (
    TIMELINE_RUNS_PER_JOB,
    action_summary,
    collection_view,
    job_detail,
    job_row,
    timeline,
    trouble,
)
from shared.domain.decisions import Outcome, Run, settle
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ErrorAction, JobState
from shared.domain.job_document import JobDocument
from shared.domain.redaction import redact_headers, redact_uri
from shared.storage.collection_codec import decode_collection
from shared.storage.interface import StoredCollection, StoredJob
from shared.storage.job_codec import decode_properties
from tests.factories import utc

NOW = utc("2026-12-01T08:00:00Z")
COLLECTION = CollectionId("sub", "ops", "nightly")


def stored_job(name: str, definition: dict[str, Any], defined_at=NOW) -> StoredJob:  # type: ignore[no-untyped-def]
    return StoredJob(JobId(COLLECTION, name), JobDocument.defined(decode_properties(definition), defined_at), "etag")


def http_job(uri: str = "https://example.org/cleanup?day=1", **more: Any) -> dict[str, Any]:
    return {
        "action": {"type": "Http", "request": {"uri": uri, "method": "POST"}},
        "state": "enabled",
        **more,
    }


EVERY_SIX_HOURS = {"frequency": "hour", "interval": 6}
EVERY_MINUTE = {"frequency": "minute", "interval": 1}


def test_a_collection_counts_its_jobs_by_state() -> None:
    collection = StoredCollection(
        COLLECTION,
        decode_collection({"location": "West Europe", "properties": {"sku": {"name": "Standard"}, "state": "Enabled"}}),
        "etag",
    )
    jobs = [
        stored_job("a", http_job()),
        stored_job("b", http_job()),
        stored_job("c", http_job(state="disabled")),
    ]
    view = collection_view(collection, jobs, NOW)
    assert view["jobs"] == {"total": 3, "enabled": 2, "disabled": 1, "completed": 0, "faulted": 0}
    assert (view["name"], view["resourceGroup"], view["sku"], view["state"]) == (
        "nightly", "ops", "Standard", "Enabled",
    )  # fmt: skip


def test_a_job_row_shows_its_next_run_to_the_second_and_its_last_attempt() -> None:
    start = "2026-12-01T09:30:15Z"
    stored = stored_job("sync", http_job(startTime=start, recurrence=EVERY_SIX_HOURS))
    assert job_row(stored, NOW)["nextRun"] == "2026-12-01T09:30:15Z"
    assert job_row(stored, NOW)["lastRun"] is None

    document = stored.document
    attempt = document.pending[0].attempt
    ran = NOW + timedelta(hours=2)
    outcome = Outcome(False, ran, ran, "Http Action - Response from host: '500' Body: boom")
    settled = settle(document, Run(attempt, attempt), outcome, ran)
    row = job_row(StoredJob(stored.id, settled.document, "etag"), NOW)
    assert row["lastRun"] == {
        "startTime": "2026-12-01T10:00:00Z",
        "endTime": "2026-12-01T10:00:00Z",
        "expectedExecutionTime": "2026-12-01T09:30:15Z",
        "actionName": "MainAction",
        "status": "Failed",
        "retryCount": 0,
        "repeatCount": 1,
    }
    assert row["counts"] == {"executions": 1, "failures": 1, "faulted": 0}
    # A redefinition starts a new schedule but keeps what ran.
    again = JobDocument.defined(stored.document.properties, ran, previous=settled.document)
    assert again.last_attempt == row["lastRun"]


def failed_once(stored: StoredJob, at: datetime) -> StoredJob:
    """The job after its next pending attempt failed at `at`."""
    pending = stored.document.pending[0]
    outcome = Outcome(False, at, at, "Http Action - Response from host: '500' Body: boom")
    settled = settle(stored.document, Run(pending.attempt, pending.attempt), outcome, at)
    return StoredJob(stored.id, settled.document, "etag")


def test_trouble_is_named_a_failing_run_a_retry_a_fault_and_a_late_job() -> None:
    retried = {"retryType": "Fixed", "retryInterval": "PT1M", "retryCount": 1}
    definition = http_job(startTime="2026-12-01T07:00:00Z", recurrence=EVERY_SIX_HOURS)
    definition["action"]["retryPolicy"] = retried
    job = stored_job("flaky", definition, defined_at=utc("2026-12-01T06:00:00Z"))
    at = utc("2026-12-01T07:00:01Z")
    assert trouble(job, at) == []

    retrying = failed_once(job, at)
    assert trouble(retrying, at) == ["retrying"]
    spent = failed_once(retrying, at + timedelta(minutes=1))  # the one retry failed too
    assert trouble(spent, at + timedelta(minutes=1)) == ["failing"]
    assert spent.document.status.faulted_count == 1
    assert job_row(spent, NOW)["trouble"] == [{"kind": "failing", "words": "Last run failed"}]

    late = stored_job("stuck", http_job(startTime="2026-12-01T07:55:00Z", recurrence=EVERY_SIX_HOURS),
                      defined_at=utc("2026-12-01T07:00:00Z"))  # fmt: skip
    assert trouble(late, NOW) == ["late"]  # 5 minutes past its run, not started
    assert trouble(late, utc("2026-12-01T07:56:00Z")) == []  # within the grace of a tick
    faulted = StoredJob(late.id, late.document.with_state(JobState.FAULTED), "etag")
    assert trouble(faulted, NOW) == ["faulted"]

    collection = StoredCollection(
        COLLECTION,
        decode_collection({"location": "West Europe", "properties": {"sku": {"name": "Standard"}, "state": "Enabled"}}),
        "etag",
    )
    counted = collection_view(collection, [spent, late, stored_job("fine", http_job())], NOW)
    assert counted["trouble"] == {"faulted": 0, "retrying": 0, "failing": 1, "late": 1}


@pytest.mark.parametrize("state", ["Suspended", "Disabled"])
def test_a_job_whose_collection_is_off_waits_and_is_not_late(state: str) -> None:
    """Nothing runs in such a collection (its jobs' attempts are parked), so a job past its
    next run is waiting for the collection, not late; a failed attempt still shows."""
    late = stored_job("stuck", http_job(startTime="2026-12-01T07:55:00Z", recurrence=EVERY_SIX_HOURS),
                      defined_at=utc("2026-12-01T07:00:00Z"))  # fmt: skip
    body = {"location": "West Europe", "properties": {"sku": {"name": "Standard"}, "state": state}}
    off = StoredCollection(COLLECTION, decode_collection(body), "etag")
    assert trouble(late, NOW, collection_runs=False) == []
    assert job_row(late, NOW, collection_runs=False)["trouble"] == []
    assert job_detail(late, NOW, collection_runs=False)["trouble"] == []
    failing = failed_once(late, utc("2026-12-01T07:55:01Z"))
    assert collection_view(off, [late, failing], NOW)["trouble"]["late"] == 0
    assert trouble(failing, NOW, collection_runs=False) == ["retrying"]


def test_a_job_in_a_time_zone_names_it_for_local_times() -> None:
    berlin = {"frequency": "day", "timeZone": "W. Europe Standard Time"}
    row = job_row(stored_job("local", http_job(recurrence=berlin)), NOW)
    assert row["timeZone"] == {"name": "W. Europe Standard Time", "iana": "Europe/Berlin"}
    assert job_row(stored_job("utc", http_job(recurrence={"frequency": "day"})), NOW)["timeZone"] is None
    in_utc = {"frequency": "day", "timeZone": "UTC"}
    assert job_row(stored_job("named-utc", http_job(recurrence=in_utc)), NOW)["timeZone"] is None


def test_a_job_page_shows_the_definition_without_secrets_and_its_next_occurrences() -> None:
    definition = http_job(
        uri="https://ops:hunter2@example.org/hook?sig=abc123&code=xyz&day=1",
        startTime="2026-12-01T09:00:00Z",
        recurrence=EVERY_SIX_HOURS,
    )
    definition["action"]["request"] |= {
        "authentication": {"type": "Basic", "username": "ops", "password": "pw-1"},
        "headers": {"Authorization": "Bearer t0ken", "X-Functions-Key": "k", "Accept": "a/b"},
    }
    detail = job_detail(stored_job("hook", definition), NOW)
    request = detail["definition"]["action"]["request"]
    assert request["uri"] == "https://ops:***@example.org/hook?sig=***&code=***&day=1"
    assert request["headers"] == {"Authorization": "***", "X-Functions-Key": "***", "Accept": "a/b"}
    assert "password" not in request["authentication"]
    assert detail["nextOccurrences"][:3] == [
        "2026-12-01T09:00:00Z", "2026-12-01T15:00:00Z", "2026-12-01T21:00:00Z",
    ]  # fmt: skip
    assert len(detail["nextOccurrences"]) == 10
    assert detail["action"] == "POST https://example.org"  # never the user-info or query


def test_the_timeline_holds_the_next_24_hours_of_enabled_jobs() -> None:
    jobs = [
        stored_job("six-hourly", http_job(startTime="2026-12-01T09:00:00Z", recurrence=EVERY_SIX_HOURS)),
        stored_job("off", http_job(state="disabled", recurrence=EVERY_SIX_HOURS)),
        stored_job("busy", http_job(startTime="2026-12-01T08:00:30Z", recurrence=EVERY_MINUTE)),
    ]
    drawn = timeline(jobs, NOW)
    assert (drawn["from"], drawn["until"]) == ("2026-12-01T08:00:00Z", "2026-12-02T08:00:00Z")
    rows = {row["name"]: row for row in drawn["jobs"]}
    assert set(rows) == {"six-hourly", "busy"}
    assert rows["six-hourly"]["runs"] == [
        "2026-12-01T09:00:00Z", "2026-12-01T15:00:00Z", "2026-12-01T21:00:00Z",
        "2026-12-02T03:00:00Z",
    ]  # fmt: skip
    assert rows["six-hourly"]["more"] is False
    assert len(rows["busy"]["runs"]) == TIMELINE_RUNS_PER_JOB and rows["busy"]["more"] is True


def test_the_timeline_marks_the_runs_a_jobs_days_off_skip_or_move_with_the_reason() -> None:
    christmas_eve = utc("2030-12-24T12:30:00Z")
    calendar = {"frequency": "hour", "interval": 6, "timeZone": "Europe/Berlin",
                "exclusions": {"holidays": [{"country": "DE", "subdivision": "BY"}]}}  # fmt: skip
    jobs = [
        stored_job("skips", http_job(startTime="2030-12-01T00:00:00Z", recurrence=calendar), christmas_eve),
        stored_job("moves", http_job(startTime="2030-12-01T00:00:00Z", recurrence=calendar | {"onExcluded": "PreviousBusinessDay"}), christmas_eve),
        stored_job("plain", http_job(startTime="2030-12-01T00:00:00Z", recurrence=EVERY_SIX_HOURS), christmas_eve),
    ]
    rows = {row["name"]: row for row in timeline(jobs, christmas_eve)["jobs"]}
    # 01:00, 07:00, 13:00 and 19:00 in Berlin (an hour ahead of UTC); the 25th is Christmas Day.
    assert rows["skips"]["runs"] == ["2030-12-24T18:00:00Z"]
    christmas = "Christmas Day (public holiday, DE-BY)"
    assert rows["skips"]["excluded"] == [
        {"scheduled": "2030-12-25T00:00:00Z", "reason": christmas},
        {"scheduled": "2030-12-25T06:00:00Z", "reason": christmas},
        {"scheduled": "2030-12-25T12:00:00Z", "reason": christmas},
    ]
    # Moved back onto the 24th's same wall times, all of them past by now.
    assert [entry["movedTo"] for entry in rows["moves"]["excluded"]] == [
        "2030-12-24T00:00:00Z", "2030-12-24T06:00:00Z", "2030-12-24T12:00:00Z",
    ]  # fmt: skip
    assert "excluded" not in rows["plain"]


@pytest.mark.parametrize(
    ("action", "summary"),
    [
        pytest.param({"type": "Https", "request": {"uri": "https://u:p@h.example:8443/x?code=1",
                      "method": "get"}}, "GET https://h.example:8443", id="http"),
        pytest.param({"type": "StorageQueue", "queueMessage": {"storageAccount": "acct",
                      "queueName": "orders", "sasToken": "?sig=1", "message": "m"}},
                     "Storage queue orders of acct", id="storage-queue"),
        pytest.param({"type": "ServiceBusQueue", "serviceBusQueueMessage": {"namespace": "ns",
                      "queueName": "q"}}, "Service Bus queue q in ns", id="service-bus-queue"),
        pytest.param({"type": "ServiceBusTopic", "serviceBusTopicMessage": {"namespace": "ns",
                      "topicPath": "t"}}, "Service Bus topic t in ns", id="service-bus-topic"),
    ],
)
def test_an_action_is_summed_up_without_its_secrets(action: dict[str, Any], summary: str) -> None:
    assert action_summary(ErrorAction.model_validate(action)) == summary


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("https://example.org/a?b=1", "https://example.org/a?b=1"),
        ("https://example.org/a?SIG=x&sv=2020", "https://example.org/a?SIG=***&sv=2020"),
        ("https://user@example.org/", "https://user@example.org/"),
        ("https://user:pw@example.org/", "https://user:***@example.org/"),
        ("http://[::1", "http://[::1"),  # unreadable: left alone, not a failure
    ],
    ids=["plain", "signature", "user-only", "password", "unreadable"],
)
def test_uris_are_masked_where_they_carry_secrets(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown


def test_headers_that_carry_credentials_are_masked() -> None:
    assert redact_headers({"Ocp-Apim-Subscription-Key": "k", "Content-Type": "x"}) == {
        "Ocp-Apim-Subscription-Key": "***",
        "Content-Type": "x",
    }


def test_a_job_shows_the_reason_its_state_was_set_for() -> None:
    quiet = stored_job("quiet", http_job())
    assert job_row(quiet, NOW)["stateReason"] is None
    paused = StoredJob(quiet.id, quiet.document.with_state(JobState.DISABLED, "paused for the migration"), "etag")
    assert (job_row(paused, NOW)["state"], job_row(paused, NOW)["stateReason"]) == ("disabled", "paused for the migration")
    assert job_detail(paused, NOW)["stateReason"] == "paused for the migration"
