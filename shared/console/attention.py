"""What needs an operator's look, as the console lists it: pure, no I/O.

Two kinds of thing the service cannot settle alone. Poison messages: deliveries whose last
dequeue failed, moved by the host to `<executions queue>-poison` (their attempts were recorded
as Failed). Claims past their deadline: a try claimed by a delivery that died mid-call, with no
copy of its message come back to take it over, so that its job still waits for it.

Nothing secret leaves here: a message names only its job and try, a claim only its try and
deadline; an unreadable message is said to be one, its text is not shown (it is not the app's,
and may hold anything).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TypedDict

from shared.domain.attempts import Attempt, Delivery
from shared.domain.ids import JobId
from shared.domain.job_definition import ActionName
from shared.domain.wire import iso
from shared.execution.dispatch import PoisonMessage
from shared.execution.messages import DueRange, MalformedMessage, from_wire
from shared.storage.interface import StoredJob

# Messages and claims listed at most: a peek of a queue returns at most 32 messages.
MOST_LISTED = 32
# Deliveries listed per message: the app puts at most 64 in one (messages.MOST_PER_MESSAGE).
MOST_DELIVERIES_LISTED = 64


# The shapes the console's page reads (shared/console/static/attention.js), in its JSON's names.


class JobLink(TypedDict):
    subscription: str
    resourceGroup: str
    collection: str
    job: str


class TryView(TypedDict):
    expected: str  # the occurrence's time
    action: str  # "action" or "errorAction"
    retry: int  # 0 for the occurrence's first try
    runNow: bool


class DeliveryView(TypedDict):
    job: JobLink
    attempt: TryView
    due: str


class DueRangeView(TypedDict):
    partition: str
    low: str
    high: str


class PoisonView(TypedDict):
    kind: str  # "deliveries", "dueRange" or "unreadable"
    inserted: str | None
    dequeueCount: int
    deliveries: list[DeliveryView]
    moreDeliveries: int  # carried beyond those listed
    dueRange: DueRangeView | None


class PoisonList(TypedDict):
    queue: str
    depth: int  # about how many wait there (the queue's own count)
    messages: list[PoisonView]
    more: bool  # more wait than are listed


class ClaimView(TypedDict):
    job: JobLink
    attempt: TryView
    deadline: str
    secondsOverdue: int


class ClaimList(TypedDict):
    overdueAfterSeconds: int  # a claim is listed this long after its deadline
    claims: list[ClaimView]
    more: bool  # more jobs hold one than are listed


class Attention(TypedDict):
    poison: PoisonList
    claimsPastDeadline: ClaimList


class AttentionCounts(TypedDict):
    """What the overview shows: how many of each (claims counted up to /health's limit)."""

    poisonMessages: int
    claimsPastDeadline: int
    claimsCountedUpTo: int  # the count stops there


def poison_list(queue: str, depth: int, peeked: Sequence[PoisonMessage]) -> PoisonList:
    """The peeked messages of the poison queue, each read as the executor would read it."""
    listed = [poison_view(message) for message in peeked[:MOST_LISTED]]
    return {
        "queue": queue,
        "depth": max(depth, len(peeked)),  # the queue's count is approximate
        "messages": listed,
        "more": max(depth, len(peeked)) > len(listed),
    }


def poison_view(message: PoisonMessage) -> PoisonView:
    """One poison message: the jobs and tries it carries, or that it is unreadable."""
    view: PoisonView = {
        "kind": "unreadable",
        "inserted": iso(message.inserted) if message.inserted else None,
        "dequeueCount": message.dequeue_count,
        "deliveries": [],
        "moreDeliveries": 0,
        "dueRange": None,
    }
    try:
        read = from_wire(message.text)
        if isinstance(read, DueRange):
            view["dueRange"] = {"partition": read.partition, "low": read.low, "high": read.high}
            view["kind"] = "dueRange"
            return view
        listed = [delivery_view(delivery) for delivery in read.carried[:MOST_DELIVERIES_LISTED]]
    except (MalformedMessage, ValueError, KeyError, TypeError, AttributeError):
        return view  # what it holds is not shown: not the app's, it may hold anything
    view["kind"], view["deliveries"] = "deliveries", listed
    view["moreDeliveries"] = len(read.carried) - len(listed)
    return view


def delivery_view(delivery: Delivery) -> DeliveryView:
    """A delivery's job and try; TypeError if its names are not names."""
    return {
        "job": job_link(delivery.job),
        "attempt": try_view(delivery.pending.attempt),
        "due": iso(delivery.pending.due),
    }


def claim_list(jobs: Iterable[StoredJob], before: datetime, now: datetime) -> ClaimList:
    """The tries of these jobs claimed until before `before`, most overdue first; `more` when
    there are more than MOST_LISTED (or more jobs than were read, as the caller passes one
    past what it lists)."""
    jobs = list(jobs)
    found: list[ClaimView] = []
    for stored in jobs:
        for entry in stored.document.pending:
            claim = entry.claim
            if claim is None or claim.until >= before:
                continue
            found.append(
                {
                    "job": job_link(stored.id),
                    "attempt": try_view(entry.attempt),
                    "deadline": iso(claim.until),
                    "secondsOverdue": max(0, round((now - claim.until).total_seconds())),
                }
            )
    found.sort(key=lambda claim: -claim["secondsOverdue"])
    return {
        "overdueAfterSeconds": round((now - before).total_seconds()),
        "claims": found[:MOST_LISTED],
        "more": len(found) > MOST_LISTED or len(jobs) > MOST_LISTED,
    }


def job_link(job: JobId) -> JobLink:
    """A job's names, which the page makes its link from; TypeError if one is not a string."""
    collection = job.collection
    names = (collection.subscription, collection.resource_group, collection.name, job.name)
    if not all(isinstance(name, str) and name for name in names):
        raise TypeError("a job is named by four strings")
    return {
        "subscription": collection.subscription,
        "resourceGroup": collection.resource_group,
        "collection": collection.name,
        "job": job.name,
    }


def try_view(attempt: Attempt) -> TryView:
    return {
        "expected": iso(attempt.expected),
        "action": "errorAction" if attempt.action is ActionName.ERROR_ACTION else "action",
        "retry": attempt.retry,
        "runNow": attempt.run_now,
    }
