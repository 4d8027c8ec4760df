"""The executor's line for each outcome: level and exact words, from real decisions (`plan`,
`settle`) on a fixed clock, without storage."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.collection import SkuName
from shared.domain.decisions import Outcome, Run, Settlement, plan, settle
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ActionName, JobBody
from shared.domain.job_document import JobDocument, stored_properties
from shared.execution.outcome_log import attempt_line, outcome_line, summary

JOB = JobId(CollectionId("sub", "group", "nightly"), "cleanup")
T0 = datetime(2026, 12, 1, 2, 30, tzinfo=UTC)
HTTP = {"type": "Http", "request": {"uri": "https://example.org/run?code=secret", "method": "GET"}}
ERROR_ACTION = {"type": "Http", "request": {"uri": "https://example.org/alarm", "method": "POST"}}
OK = "Http Action - Response from host 'example.org': '200 OK' Body: done"
BUSY = "Http Action - Response from host 'example.org': '503 Service Unavailable' Body: busy"
EVERY_HOUR = {"recurrence": {"frequency": "Hour", "interval": 1}}


def job(*, retries: int = 0, error_action: bool = False, **properties: Any) -> JobDocument:
    action: dict[str, Any] = HTTP | {
        "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT20S", "retryCount": retries}
        if retries
        else {"retryType": "None"}
    }
    if error_action:
        action["errorAction"] = ERROR_ACTION
    body = JobBody.model_validate({"properties": {"startTime": T0.isoformat(), "action": action} | properties})
    return JobDocument.defined(stored_properties(body.properties), T0, sku=SkuName.STANDARD)


def run(document: JobDocument, message: str, *, succeeded: bool, at: datetime) -> tuple[int, str, Settlement]:
    """Perform the job's first pending attempt at `at` (it takes 120 ms), settle, log."""
    delivery = Delivery(JOB, document.defined_at, document.pending[0])
    decided = plan(document, None, delivery, now=at, redelivered=False)
    assert isinstance(decided, Run)
    ended = at + timedelta(milliseconds=120)
    outcome = Outcome(succeeded, at, ended, message)
    settled = settle(document, decided, outcome, ended)
    level, line = outcome_line(JOB, decided.attempt, outcome, settled, ended)
    return level, line, settled


def test_a_success_is_info_with_the_job_by_name_the_occurrence_and_the_retry() -> None:
    level, line, _ = run(job(**EVERY_HOUR), OK, succeeded=True, at=T0)
    assert level == logging.INFO
    assert line == (
        "nightly/cleanup: completed (occurrence 2026-12-01T02:30:00Z, retry 0) in 120 ms: "
        "Http Action - Response from host 'example.org': '200 OK' Body: done"
    )


def test_a_failure_that_is_retried_is_a_warning_with_the_retrys_time() -> None:
    document = job(retries=2, error_action=True, **EVERY_HOUR)
    level, line, settled = run(document, BUSY, succeeded=False, at=T0)
    assert level == logging.WARNING
    assert line == (
        "nightly/cleanup: failed (occurrence 2026-12-01T02:30:00Z, retry 0) in 120 ms; "
        "retry 1 at 2026-12-01T02:30:20Z, in 20 s: "
        "Http Action - Response from host 'example.org': '503 Service Unavailable' Body: busy"
    )
    level, line, _ = run(settled.document, BUSY, succeeded=False, at=settled.follow_ups[0].due)
    assert level == logging.WARNING
    assert "(occurrence 2026-12-01T02:30:00Z, retry 1) in 120 ms; retry 2 at 2026-12-01T02:30:40Z, in 20 s: " in line


def test_retry_numbers_are_historys_retry_count() -> None:
    document, at = job(retries=3, **EVERY_HOUR), T0
    for _ in range(4):
        _, line, settled = run(document, BUSY, succeeded=False, at=at)
        [(_, entry)] = settled.history
        assert f", retry {entry['retryCount']}) in 120 ms" in line
        document = settled.document
        at = settled.follow_ups[0].due
    assert entry["retryCount"] == 3


def test_a_failure_after_which_the_error_action_runs_is_a_warning_saying_so() -> None:
    document = job(retries=1, error_action=True, **EVERY_HOUR)
    _, _, settled = run(document, BUSY, succeeded=False, at=T0)
    level, line, settled = run(settled.document, BUSY, succeeded=False, at=settled.follow_ups[0].due)
    assert level == logging.WARNING
    assert line == (
        "nightly/cleanup: failed (occurrence 2026-12-01T02:30:00Z, retry 1) in 120 ms; "
        "the errorAction runs next: "
        "Http Action - Response from host 'example.org': '503 Service Unavailable' Body: busy"
    )
    assert [entry.attempt.action for entry in settled.follow_ups] == [ActionName.ERROR_ACTION]


def test_an_occurrence_failed_for_good_of_a_recurring_job_is_an_error_naming_the_next() -> None:
    level, line, _ = run(job(**EVERY_HOUR), BUSY, succeeded=False, at=T0)
    assert level == logging.ERROR
    assert line == (
        "nightly/cleanup: failed (occurrence 2026-12-01T02:30:00Z, retry 0) in 120 ms; "
        "occurrence failed for good, next at 2026-12-01T03:30:00Z: "
        "Http Action - Response from host 'example.org': '503 Service Unavailable' Body: busy"
    )


def test_a_one_off_job_that_fails_for_good_is_an_error_saying_the_job_faulted() -> None:
    level, line, settled = run(job(), BUSY, succeeded=False, at=T0)
    assert settled.document.state.value == "faulted"
    assert level == logging.ERROR
    assert line == (
        "nightly/cleanup: failed (occurrence 2026-12-01T02:30:00Z, retry 0) in 120 ms; "
        "occurrence failed for good, job faulted: "
        "Http Action - Response from host 'example.org': '503 Service Unavailable' Body: busy"
    )


def test_a_job_whose_series_ends_with_a_success_completes_at_info() -> None:
    level, line, settled = run(job(), OK, succeeded=True, at=T0)
    assert settled.document.state.value == "completed"
    assert level == logging.INFO
    assert line == (
        "nightly/cleanup: completed (occurrence 2026-12-01T02:30:00Z, retry 0) in 120 ms; "
        "job completed: Http Action - Response from host 'example.org': '200 OK' Body: done"
    )


def test_error_action_outcomes_are_marked_as_the_error_actions() -> None:
    recurring = job(retries=1, error_action=True, **EVERY_HOUR)
    _, _, failed = run(recurring, BUSY, succeeded=False, at=T0)
    _, _, failed = run(failed.document, BUSY, succeeded=False, at=failed.follow_ups[0].due)
    error_action_due = failed.follow_ups[0].due

    level, line, _ = run(failed.document, OK, succeeded=True, at=error_action_due)
    assert level == logging.INFO  # the errorAction did what it is for; the series goes on
    assert line.startswith(
        "nightly/cleanup: errorAction completed (occurrence 2026-12-01T02:30:00Z, retry 0) in 120 ms; "
        "next at 2026-12-01T03:30:00Z: "
    )

    level, line, retried = run(failed.document, BUSY, succeeded=False, at=error_action_due)
    assert level == logging.WARNING
    assert line.startswith(
        "nightly/cleanup: errorAction failed (occurrence 2026-12-01T02:30:00Z, retry 0) in 120 ms; "
        "retry 1 at 2026-12-01T02:30:40Z, in 20 s: "
    )

    level, line, _ = run(retried.document, BUSY, succeeded=False, at=retried.follow_ups[0].due)
    assert level == logging.ERROR
    assert line.startswith(
        "nightly/cleanup: errorAction failed (occurrence 2026-12-01T02:30:00Z, retry 1) in 120 ms; "
        "occurrence failed for good, next at 2026-12-01T03:30:00Z: "
    )


def test_an_error_action_that_ends_a_one_off_job_still_leaves_it_faulted() -> None:
    _, _, failed = run(job(error_action=True), BUSY, succeeded=False, at=T0)
    level, line, settled = run(failed.document, OK, succeeded=True, at=failed.follow_ups[0].due)
    assert settled.document.state.value == "faulted"
    assert level == logging.ERROR
    assert line.startswith(
        "nightly/cleanup: errorAction completed (occurrence 2026-12-01T02:30:00Z, retry 0) in 120 ms; "
        "job faulted: "
    )


@pytest.mark.parametrize(
    ("succeeded", "level", "then"),
    [(True, logging.INFO, ""), (False, logging.ERROR, "; run-now failed for good")],
    ids=["completed", "failed"],
)
def test_a_run_now_says_so_and_never_ends_the_series(succeeded: bool, level: int, then: str) -> None:
    document = job(**EVERY_HOUR)
    now = T0 + timedelta(minutes=7)
    run_now = Pending(Attempt(now, run_now=True), now)
    document = replace(document, pending=(run_now, *document.pending))
    got, line, _ = run(document, OK if succeeded else BUSY, succeeded=succeeded, at=now)
    assert got == level
    verb = "completed" if succeeded else "failed"
    assert line.startswith(f"nightly/cleanup: {verb} (run-now of 2026-12-01T02:37:00Z, retry 0) in 120 ms{then}: ")


def test_a_long_message_is_cut_to_its_first_line_without_urls() -> None:
    message = (
        "Http Action - Response from host 'example.org': '500 Internal Server Error' Body: "
        "see https://example.org/trace?sig=secret123 for details " + "x" * 200 + "\nsecond line"
    )
    cut = summary(message)
    assert len(cut) == 120
    assert cut.endswith("...")
    assert "secret123" not in cut
    assert "example.org/trace" not in cut
    assert "see <url> for details" in cut
    assert "second line" not in cut


def test_other_lines_name_the_attempt_the_same_short_way() -> None:
    attempt = Attempt(T0, ActionName.ERROR_ACTION, retry=1)
    assert attempt_line(JOB, attempt, "nothing to run") == (
        "nightly/cleanup: nothing to run (occurrence 2026-12-01T02:30:00Z, errorAction retry 1)"
    )
