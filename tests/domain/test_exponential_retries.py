"""Exponential retries (docs/behaviour.md#exponential-retries): the first wait doubles for each
retry, up to maximumInterval, moved by a jitter that the execution id fixes: pure, on a fixed
clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.domain.attempts import Attempt, Delivery, execution_id
from shared.domain.collection import SkuName
from shared.domain.decisions import RETRY_JITTER, Outcome, plan, retry_wait, settle
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import JobBody, RetryPolicy, RetryType
from shared.domain.job_document import JobDocument, Retries, stored_properties
from shared.domain.job_rules import definition_problems
from shared.storage.job_codec import decode_job, encode_job

JOB = JobId(CollectionId("sub", "group", "jc"), "backing-off")
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
HTTP = {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}}
ERROR_ACTION = {"type": "Http", "request": {"uri": "https://example.org/err", "method": "POST"}}


def exponential(sku: SkuName = SkuName.STANDARD, **policy: Any) -> JobDocument:
    action = HTTP | {"retryPolicy": {"retryType": "Exponential"} | policy}
    body = JobBody.model_validate({"properties": {"action": action}})
    return JobDocument.defined(stored_properties(body.properties), T0, sku=sku)


def base_waits(first: float, most: float, count: int) -> list[float]:
    """The waits before jitter: the first, doubled each time, at most `most` (seconds)."""
    return [min(first * 2**n, most) for n in range(count)]


def failing_waits(doc: JobDocument, job: JobId = JOB) -> list[timedelta]:
    """Fail every try of the job's occurrence (the errorAction's too): the waits between tries."""
    waits, now = [], T0
    while doc.pending:
        decided = plan(
            doc, None, Delivery(job, doc.defined_at, doc.pending[0]), now=now, redelivered=False
        )
        settled = settle(doc, decided, Outcome(False, now, now, "Http Action - 500"), now, job=job)
        if not settled.follow_ups:
            break
        [follow_up] = settled.follow_ups
        waits.append(follow_up.due - now)
        doc, now = settled.document, follow_up.due
    return waits


def test_the_wait_doubles_from_retry_interval_up_to_maximum_interval_within_the_jitter() -> None:
    doc = exponential(retryInterval="PT15S", maximumInterval="PT2M", retryCount=7)
    waits = [wait.total_seconds() for wait in failing_waits(doc)]
    assert len(waits) == 7
    for wait, base in zip(waits, base_waits(15, 120, 7), strict=True):
        assert max(15, base * (1 - RETRY_JITTER)) <= wait <= min(120, base * (1 + RETRY_JITTER))
    # Without the jitter's share, the doubling shows: each wait is near twice the one before,
    # until the maximum holds it.
    assert waits[1] > waits[0] * 1.3
    assert waits[2] > waits[1] * 1.3
    assert all(wait <= 120 for wait in waits)
    assert waits[-3:] == [pytest.approx(120, abs=24)] * 3


def test_the_same_occurrence_always_waits_the_same_and_others_wait_differently() -> None:
    doc = exponential(retryInterval="PT1M", maximumInterval="PT1H", retryCount=5)
    assert failing_waits(doc) == failing_waits(doc)
    others = [failing_waits(doc, JobId(JOB.collection, f"job-{n}")) for n in range(5)]
    assert len({tuple(waits) for waits in others}) == 5  # the jitter spreads jobs apart


def test_the_jitter_is_bounded_and_spread_over_the_whole_range() -> None:
    """Over many occurrences, a 2-minute wait (the third retry of PT30S) moves by up to 20% either way."""
    retries = Retries(count=10, interval=timedelta(seconds=30), maximum=timedelta(hours=1))
    third = Attempt(T0, retry=3)
    shares = []
    for minute in range(500):
        occurrence = Attempt(T0 + timedelta(minutes=minute))
        wait = retry_wait(retries, third, execution_id(JOB, occurrence)).total_seconds()
        assert 96 <= wait <= 144
        shares.append((wait - 120) / 120)
    assert min(shares) < -0.18
    assert max(shares) > 0.18
    assert abs(sum(shares) / len(shares)) < 0.03  # centred: no drift either way


def test_the_jitter_never_goes_below_the_first_wait_nor_above_the_maximum() -> None:
    retries = Retries(count=20, interval=timedelta(seconds=15), maximum=timedelta(seconds=20))
    for minute in range(200):
        execution = execution_id(JOB, Attempt(T0 + timedelta(minutes=minute)))
        for retry in range(1, 21):
            wait = retry_wait(retries, Attempt(T0, retry=retry), execution)
            assert timedelta(seconds=15) <= wait <= timedelta(seconds=20)


def test_a_maximum_equal_to_the_first_wait_makes_every_wait_that_long() -> None:
    doc = exponential(retryInterval="PT5M", maximumInterval="PT5M", retryCount=4)
    assert failing_waits(doc) == [timedelta(minutes=5)] * 4


def test_fixed_retries_keep_their_interval_without_jitter() -> None:
    retries = Retries(count=3, interval=timedelta(seconds=40))
    assert not retries.exponential
    assert {retry_wait(retries, Attempt(T0, retry=n), "any") for n in (1, 2, 3)} == {
        timedelta(seconds=40)
    }


def test_the_error_action_starts_again_from_the_first_wait() -> None:
    action = HTTP | {"retryPolicy": {"retryType": "exponential", "retryInterval": "PT20S", "retryCount": 2,
                                     "maximumInterval": "PT10M"}, "errorAction": ERROR_ACTION}  # fmt: skip
    body = JobBody.model_validate({"properties": {"action": action}})
    waits = failing_waits(JobDocument.defined(stored_properties(body.properties), T0))
    # main action: 2 retries; the errorAction at once; then its 2 retries
    assert len(waits) == 5
    assert waits[2] == timedelta(0)
    assert timedelta(seconds=20) <= waits[3] <= timedelta(seconds=24)  # its first retry
    assert timedelta(seconds=32) <= waits[4] <= timedelta(seconds=48)


def test_without_maximum_interval_the_waits_stop_growing_at_a_day() -> None:
    assert exponential(retryInterval="PT1H").retries == Retries(
        4, timedelta(hours=1), timedelta(days=1)
    )
    longer = exponential(retryInterval="P2D")
    assert longer.retries.maximum == timedelta(days=2)  # never below the first wait
    assert exponential().retries == Retries(4, timedelta(seconds=30), timedelta(days=1))
    assert exponential(SkuName.FREE).retries == Retries(4, timedelta(hours=1), timedelta(days=1))


@pytest.mark.parametrize(
    ("policy", "first"),
    [({"minimumInterval": "PT45S"}, timedelta(seconds=45)),
     ({"retryInterval": "PT45S"}, timedelta(seconds=45)),
     ({"retryInterval": "PT45S", "minimumInterval": "00:00:45"}, timedelta(seconds=45))],
    ids=["minimum-alone", "retry-interval-alone", "both-agreeing-in-two-forms"],
)  # fmt: skip
def test_minimum_interval_is_a_synonym_of_the_first_wait(
    policy: dict[str, str], first: timedelta
) -> None:
    doc = exponential(**policy)
    assert doc.retries.interval == first
    assert (
        doc.properties.action.retry_policy.to_wire() == {"retryType": "exponential"} | policy
    )  # as sent


def test_the_stored_retries_round_trip_and_fixed_ones_are_stored_as_before() -> None:
    retries = exponential(retryInterval="PT15S", maximumInterval="PT10M").retries
    doc = exponential(retryInterval="PT15S", maximumInterval="PT10M")
    assert decode_job(encode_job(doc)).retries == retries
    fixed = replace(doc, retries=Retries(4, timedelta(seconds=30)))
    assert set(encode_job(fixed)["retries"]) == {"count", "intervalSeconds"}


def test_settling_an_exponential_retry_without_the_job_is_refused() -> None:
    doc = exponential()
    decided = plan(doc, None, Delivery(JOB, T0, doc.pending[0]), now=T0, redelivered=False)
    with pytest.raises(ValueError, match="job's id"):
        settle(doc, decided, Outcome(False, T0, T0, "failed"), T0)


# --- what the API refuses ----------------------------------------------------------------------


def problems_of(
    sku: SkuName = SkuName.STANDARD, action: dict[str, Any] | None = None, **policy: Any
) -> dict[str, str]:
    action = (action or HTTP) | {"retryPolicy": policy}
    body = JobBody.model_validate({"properties": {"action": action}})
    return {
        problem.field: problem.problem
        for problem in definition_problems(body.properties, sku=sku, now=T0)
    }


POLICY = "properties.action.retryPolicy"


@pytest.mark.parametrize(
    ("policy", "field", "words"),
    [({"retryInterval": "PT1M", "maximumInterval": "PT30S"}, "maximumInterval", "shorter than the first wait (1 minute)"),
     ({"maximumInterval": "PT20S"}, "maximumInterval", "shorter than the first wait (30 seconds)"),
     ({"retryInterval": "PT20S", "minimumInterval": "PT30S"}, "minimumInterval", "differs from retryInterval"),
     ({"maximumInterval": "PT10S"}, "maximumInterval", "10 seconds is too short"),
     ({"minimumInterval": "PT5S"}, "minimumInterval", "5 seconds is too short"),
     ({"maximumInterval": "P19M"}, "maximumInterval", "longer than 18 months"),
     ({"retryCount": 21}, "retryCount", "21 is too many"),
     ({"retryType": "fixed", "maximumInterval": "PT5M"}, "maximumInterval", "goes only with retryType exponential"),
     ({"retryType": "fixed", "minimumInterval": "PT5M"}, "minimumInterval", "goes only with retryType exponential")],
    ids=["maximum-below-retry-interval", "maximum-below-the-default", "minimum-at-odds", "maximum-too-short",
         "minimum-too-short", "maximum-too-long", "too-many-retries", "maximum-with-fixed", "minimum-with-fixed"],
)  # fmt: skip
def test_a_policy_that_breaks_a_limit_is_refused_naming_its_field(
    policy: dict[str, Any], field: str, words: str
) -> None:
    problems = problems_of(**({"retryType": "exponential"} | policy))
    assert list(problems) == [f"{POLICY}.{field}"]
    assert words in problems[f"{POLICY}.{field}"]


def test_a_free_collection_allows_no_wait_under_an_hour() -> None:
    problems = problems_of(
        SkuName.FREE, retryType="exponential", retryInterval="PT1H", maximumInterval="PT30M"
    )
    assert problems == {f"{POLICY}.maximumInterval": "30 minutes is too short in a Free job collection: "
                                                     "the least allowed is 1 hour"}  # fmt: skip
    assert problems_of(SkuName.FREE, retryType="exponential", maximumInterval="PT2H") == {}


def test_the_error_actions_policy_is_checked_too() -> None:
    error_action = ERROR_ACTION | {
        "retryPolicy": {"retryType": "exponential", "maximumInterval": "PT1S"}
    }
    problems = problems_of(action=HTTP | {"errorAction": error_action}, retryType="exponential")
    assert list(problems) == ["properties.action.errorAction.retryPolicy.maximumInterval"]


def test_a_policy_of_none_ignores_the_rest_as_before() -> None:
    assert problems_of(retryType="none", maximumInterval="PT1S") == {}


def test_the_model_reads_the_new_values_in_any_case() -> None:
    policy = RetryPolicy.model_validate({"RETRYTYPE": "EXPONENTIAL", "MaximumInterval": "PT5M"})
    assert policy.retry_type is RetryType.EXPONENTIAL
    assert policy.maximum == timedelta(minutes=5)
    assert policy.to_wire() == {"retryType": "exponential", "maximumInterval": "PT5M"}
