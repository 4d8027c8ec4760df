"""Job collections: their body on the wire, and the quotas each SKU brings and caps.

See docs/behaviour.md#collections and #quotas.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from shared.domain.problems import FieldError, InvalidRequest
from shared.domain.schedule.recurrence import Frequency, Positive
from shared.domain.wire import WireEnum, WireModel

# How long each frequency is when a quota's maxRecurrence is compared (docs/behaviour.md#quotas).
_SPAN_OF = {
    Frequency.MINUTE: timedelta(minutes=1),
    Frequency.HOUR: timedelta(hours=1),
    Frequency.DAY: timedelta(days=1),
    Frequency.WEEK: timedelta(weeks=1),
    Frequency.MONTH: timedelta(days=28),  # the shortest month
    Frequency.YEAR: timedelta(days=365),
}
# The longest maxRecurrence: no recurrence spans more than 18 months (548 days).
LONGEST_MAX_RECURRENCE = timedelta(days=548)
SHOWN_JOB_NAMES = 5  # of the jobs a refused change names


class SkuName(WireEnum):
    FREE = "Free"
    STANDARD = "Standard"
    P10_PREMIUM = "P10Premium"
    P20_PREMIUM = "P20Premium"


class CollectionState(WireEnum):
    ENABLED = "Enabled"
    DISABLED = "Disabled"
    SUSPENDED = "Suspended"
    DELETED = "Deleted"


class Sku(WireModel):
    name: SkuName


class MaxRecurrence(WireModel):
    """The most often a job of the collection may recur: once per `interval` `frequency`s."""

    frequency: Frequency
    interval: Positive = 1

    @property
    def span(self) -> timedelta:
        """The least time between two runs it allows (a month counted as 28 days)."""
        try:
            return _SPAN_OF[self.frequency] * self.interval
        except OverflowError:
            return timedelta.max

    def spoken(self) -> str:
        """`once every 2 hours`."""
        unit = self.frequency.value
        return f"once every {self.interval} {unit}{'s' if self.interval != 1 else ''}"


class Quota(WireModel):
    max_job_count: Positive | None = None
    max_job_occurrence: Positive | None = None
    max_recurrence: MaxRecurrence | None = None


class CollectionProperties(WireModel):
    sku: Sku | None = None
    state: CollectionState | None = None
    quota: Quota | None = None

    @field_validator("state", mode="after")
    @classmethod
    def _settable_state(cls, state: CollectionState | None) -> CollectionState | None:
        # Suspended is the recordings': the real service took it from a client and echoed it.
        if state is CollectionState.DELETED:
            raise PydanticCustomError(
                "collection_state",
                "only Enabled, Disabled or Suspended can be set; Deleted is the service's own "
                "(DELETE removes a collection)",
            )
        return state


LARGEST_TAGS = 16 * 1024  # characters of the tags written as JSON, as a job's definition


class CollectionBody(WireModel):
    """A collection as a client sends it (PUT whole, PATCH in part).

    `id`, `type` and `name` are read-only: accepted, so that a client may send back what a GET
    gave it, and ignored.
    """

    id: str | None = None
    type: str | None = None
    name: str | None = None
    location: Annotated[str, Field(max_length=100)] | None = None
    # ARM's limits: 50 tags, names of up to 512 characters and values of up to 256 (a name
    # without a bound could outgrow what a table property holds).
    tags: (
        Annotated[
            dict[Annotated[str, Field(max_length=512)], Annotated[str, Field(max_length=256)]],
            Field(max_length=50),
        ]
        | None
    ) = None
    properties: CollectionProperties | None = None

    @field_validator("tags", mode="after")
    @classmethod
    def _tags_that_fit(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        # ARM's limits alone allow 50 x 768 characters, more than the one table property that
        # holds a collection (32K characters) can take once written as JSON.
        size = len(json.dumps(tags, separators=(",", ":"))) if tags else 0
        if size > LARGEST_TAGS:
            raise PydanticCustomError(
                "tags_size",
                "are {size} characters written as JSON; at most {most} are allowed",
                {"size": size, "most": LARGEST_TAGS},
            )
        return tags


SKU_QUOTAS = {
    SkuName.FREE: Quota(max_job_count=5, max_recurrence=MaxRecurrence(frequency=Frequency.HOUR)),
    SkuName.STANDARD: Quota(
        max_job_count=50, max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE)
    ),
    SkuName.P10_PREMIUM: Quota(
        max_job_count=50, max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE)
    ),
    SkuName.P20_PREMIUM: Quota(
        max_job_count=1000, max_recurrence=MaxRecurrence(frequency=Frequency.MINUTE)
    ),
}
DEFAULT_SKU = SkuName.STANDARD


def quota_problems(sku: SkuName, quota: Quota | None) -> list[FieldError]:
    """What in a quota sent for a collection of `sku` goes beyond the SKU's limits: a quota may
    lower them, never raise them. `maxJobOccurrence` has no SKU limit to check."""
    if quota is None:
        return []
    limits, problems = SKU_QUOTAS[sku], []
    asked_jobs, most_jobs = quota.max_job_count, limits.max_job_count
    if asked_jobs is not None and most_jobs is not None and asked_jobs > most_jobs:
        problems.append(
            FieldError(
                "properties.quota.maxJobCount",
                f"{asked_jobs} is too large for the {sku.value} SKU: "
                f"the most allowed is {most_jobs}",
            )
        )
    most_often, asked = limits.max_recurrence, quota.max_recurrence
    if asked is not None and most_often is not None and asked.span < most_often.span:
        problems.append(
            FieldError(
                "properties.quota.maxRecurrence",
                f"{asked.spoken()} is too often for the {sku.value} SKU: "
                f"the most often allowed is {most_often.spoken()}",
            )
        )
    if asked is not None and asked.span > LONGEST_MAX_RECURRENCE:
        problems.append(
            FieldError(
                "properties.quota.maxRecurrence",
                f"{asked.spoken()} is longer than any recurrence may be: "
                "the longest allowed is 18 months (548 days)",
            )
        )
    return problems


def over_limits(
    quota: Quota, jobs: int, too_often: Sequence[str], *, new_sku: SkuName | None
) -> str | None:
    """Why a collection holding `jobs` jobs, of which those named in `too_often` run more often
    than `quota.max_recurrence`, cannot take `quota` (its new effective quota, with `new_sku`
    when the SKU changes); None when it can."""
    reasons = []
    if quota.max_job_count is not None and jobs > quota.max_job_count:
        reasons.append(f"it holds {jobs} jobs, and maxJobCount would allow {quota.max_job_count}")
    if too_often and quota.max_recurrence is not None:
        count, names = len(too_often), ", ".join(too_often[:SHOWN_JOB_NAMES])
        if count > SHOWN_JOB_NAMES:
            names += f" and {count - SHOWN_JOB_NAMES} more"
        jobs_run = f"{count} job ({names}) runs" if count == 1 else f"{count} jobs ({names}) run"
        reasons.append(
            f"{jobs_run} more often than maxRecurrence would allow "
            f"({quota.max_recurrence.spoken()})"
        )
    if not reasons:
        return None
    change = (
        f"Moving the job collection to {new_sku.value}"
        if new_sku is not None
        else "This change of the job collection's quota"
    )
    return (
        f"{change} would leave it over its limits: {'; '.join(reasons)}. Nothing was changed; "
        "delete or change those jobs first."
    )


def effective_quota(sku: SkuName, own: Quota | None) -> Quota:
    """The limits the jobs of a collection of `sku` live under: its own quota over its SKU's,
    and never beyond the SKU's (a collection stored before quotas were capped may hold more)."""
    return _capped(overlay(SKU_QUOTAS[sku], own), SKU_QUOTAS[sku])


def refuse_quota_above(sku: SkuName, quota: Quota | None) -> None:
    problems = quota_problems(sku, quota)
    if problems:
        raise InvalidRequest(problems)


def overlay(base: Quota, own: Quota | None) -> Quota:
    """`base` with every field that `own` sets taking precedence."""
    if own is None:
        return base
    return base.model_copy(update={name: value for name, value in own if value is not None})


def _capped(quota: Quota, limits: Quota) -> Quota:
    """`quota` held within `limits`: no more jobs, no more often."""
    capped = quota
    if limits.max_job_count is not None and (
        quota.max_job_count is None or quota.max_job_count > limits.max_job_count
    ):
        capped = capped.model_copy(update={"max_job_count": limits.max_job_count})
    if limits.max_recurrence is not None and (
        quota.max_recurrence is None or quota.max_recurrence.span < limits.max_recurrence.span
    ):
        capped = capped.model_copy(update={"max_recurrence": limits.max_recurrence})
    return capped
