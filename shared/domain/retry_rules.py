"""The rules a retry policy obeys beyond the shape of each value (docs/behaviour.md#limits,
docs/behaviour.md#exponential-retries): how long a wait between tries may be, how many tries,
and which values go with which retryType. Part of `job_rules.definition_problems`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from dateutil.relativedelta import relativedelta

from shared.domain.collection import SkuName
from shared.domain.job_definition import RetryPolicy, RetryType
from shared.domain.job_document import DEFAULT_RETRY_INTERVAL, DEFAULT_RETRY_INTERVAL_FREE
from shared.domain.problems import FieldError

SHORTEST_RETRY = timedelta(seconds=15)
SHORTEST_RETRY_FREE = timedelta(hours=1)
LONGEST_RETRY = relativedelta(months=18)
# Longer than any 18 months: a wait past it is refused before it is added to a date, where a
# TimeSpan such as 10675199.02:48:05.4775807 (.NET's largest) would overflow the calendar.
_LONGER_THAN_LONGEST_RETRY = timedelta(days=18 * 31 + 1)
MOST_RETRIES = 20


def retry_problems(policy: RetryPolicy, path: str, sku: SkuName, now: datetime) -> list[FieldError]:
    """What is wrong with a retry policy at `path`, for a job of a collection of `sku`."""
    if policy.retry_type is RetryType.NONE:
        return []
    problems = []
    for name, interval in (
        ("retryInterval", policy.interval),
        ("minimumInterval", policy.minimum),
        ("maximumInterval", policy.maximum),
    ):
        if interval is not None:
            problems += _interval_problems(interval, f"{path}.{name}", sku, now)
    if policy.retry_count is not None and policy.retry_count > MOST_RETRIES:
        problems.append(
            FieldError(
                f"{path}.retryCount",
                f"{policy.retry_count} is too many: the most allowed is {MOST_RETRIES}",
            )
        )
    if policy.retry_type is RetryType.EXPONENTIAL:
        named = {problem.field for problem in problems}  # a value out of bounds, named once
        problems += [
            problem
            for problem in _exponential_problems(policy, path, sku)
            if problem.field not in named
        ]
    else:
        # Sent with Fixed, they would read as if they changed something; they would not.
        problems += [
            FieldError(f"{path}.{name}", "goes only with retryType exponential")
            for name, value in (
                ("minimumInterval", policy.minimum_interval),
                ("maximumInterval", policy.maximum_interval),
            )
            if value is not None
        ]
    return problems


def _interval_problems(
    interval: timedelta, field: str, sku: SkuName, now: datetime
) -> list[FieldError]:
    """The bounds every wait between tries keeps: 15 seconds (1 hour in Free) to 18 months."""
    shortest = SHORTEST_RETRY_FREE if sku is SkuName.FREE else SHORTEST_RETRY
    if interval < shortest:
        where = " in a Free job collection" if sku is SkuName.FREE else ""
        return [
            FieldError(
                field,
                f"{spoken(interval)} is too short{where}: the least allowed is {spoken(shortest)}",
            )
        ]
    if interval > _LONGER_THAN_LONGEST_RETRY or now + interval > now + LONGEST_RETRY:
        return [FieldError(field, "is longer than 18 months, the most allowed")]
    return []


def _exponential_problems(policy: RetryPolicy, path: str, sku: SkuName) -> list[FieldError]:
    """retryInterval (or its synonym minimumInterval) is the first wait, maximumInterval the
    longest (docs/behaviour.md#exponential-retries)."""
    first, minimum, maximum = policy.interval, policy.minimum, policy.maximum
    problems = []
    if first is not None and minimum is not None and first != minimum:
        problems.append(
            FieldError(
                f"{path}.minimumInterval",
                f"{spoken(minimum)} differs from retryInterval ({spoken(first)}): with "
                "exponential retries both name the first wait; send one of them, or the same",
            )
        )
    default = DEFAULT_RETRY_INTERVAL_FREE if sku is SkuName.FREE else DEFAULT_RETRY_INTERVAL
    first = first or minimum or default
    if maximum is not None and maximum < first:
        problems.append(
            FieldError(
                f"{path}.maximumInterval",
                f"{spoken(maximum)} is shorter than the first wait ({spoken(first)}); "
                "it must be at least as long",
            )
        )
    return problems


def spoken(span: timedelta) -> str:
    if span.microseconds:  # PT0.5S is half a second, not "0 seconds"
        return f"{span.total_seconds():.6f}".rstrip("0") + " seconds"
    seconds = int(span.total_seconds())
    for unit, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= length and seconds % length == 0:
            count = seconds // length
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"
