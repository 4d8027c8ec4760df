"""What the console shows, built from stored documents and `now`: pure, no I/O.

Times are ISO 8601 UTC strings with seconds (the page prints them exactly). Nothing secret
leaves here: definitions come without their secret fields and with keys in URIs and headers
masked; an action is summed up by its kind and where it goes, never its full URI.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NotRequired, TypedDict
from urllib.parse import urlsplit

from shared.domain.history import HistoryProperties
from shared.domain.job_definition import ActionName, ActionType, ErrorAction, JobState
from shared.domain.schedule.exclusion_reasons import ExcludedView, excluded_occurrences
from shared.domain.schedule.recurrence import Recurrence
from shared.domain.schedule.timezones import iana_name
from shared.domain.schedule.words import describe
from shared.domain.wire import JsonObject, iso
from shared.storage.interface import StoredCollection, StoredJob

TIMELINE_SPAN = timedelta(hours=24)
# Runs drawn per job on the timeline; a job that runs more often within the span is drawn as
# busy from its first run on (an every-minute job would otherwise cost 1,440 computations).
TIMELINE_RUNS_PER_JOB = 200
NEXT_OCCURRENCES_SHOWN = 10
# How long past its next run a job may wait before it is called late: the timer hands attempts
# on once a minute, and a message may arrive a second or two after its time.
LATE_AFTER = timedelta(minutes=2)
# The kinds of trouble a job can be in, in the words the console shows them (docs/console.md).
TROUBLE = {
    "faulted": "Faulted: its last occurrence failed every retry",
    "retrying": "Retrying: an attempt failed and is tried again",
    "failing": "Last run failed",
    "late": "Late: past its next run and not started",
}


# The shapes the console's page reads (shared/console/static), in its JSON's own names.


class TimeZoneView(TypedDict):
    name: str  # as the job's schedule writes it
    iana: str


class CollectionView(TypedDict):
    id: str
    subscription: str
    resourceGroup: str
    name: str
    location: str | None
    sku: str
    state: str
    quota: JsonObject  # as the API writes it
    jobs: dict[str, int]  # `total`, and the count in each JobState
    trouble: dict[str, int]  # the count in each kind of TROUBLE


class TroubleView(TypedDict):
    kind: str  # a key of TROUBLE
    words: str


class JobCounts(TypedDict):
    executions: int
    failures: int
    faulted: int


class JobRow(TypedDict):
    id: str
    name: str
    state: str
    stateReason: str | None
    trouble: list[TroubleView]
    timeZone: TimeZoneView | None
    schedule: str
    action: str
    nextRun: str | None
    lastRun: HistoryProperties | None  # the last attempt as the job's document keeps it
    counts: JobCounts


class JobDetail(JobRow):
    collection: str
    definition: JsonObject  # as a reader of the API may see it
    nextOccurrences: list[str]


class TimelineRow(TypedDict):
    name: str
    runs: list[str]
    more: bool  # it runs more often than the timeline draws
    timeZone: TimeZoneView | None
    # Runs its days off skip or move within the span (exclusion_reasons.excluded_occurrences):
    # only for a job whose recurrence has exclusions, and only when there are some.
    excluded: NotRequired[list[ExcludedView]]


# Functional form: `from` is a Python keyword.
Timeline = TypedDict("Timeline", {"from": str, "until": str, "jobs": list[TimelineRow]})


def collection_view(
    stored: StoredCollection, jobs: Iterable[StoredJob], now: datetime
) -> CollectionView:
    """A collection's row: where it is, its plan and state, its jobs counted by state, and how
    many of them are in each kind of trouble."""
    document = stored.document
    jobs = list(jobs)
    by_state = Counter(job.document.state.value for job in jobs)
    runs = document.enabled
    in_trouble = Counter(kind for job in jobs for kind in trouble(job, now, collection_runs=runs))
    return {
        "id": stored.id.arm_id,
        "subscription": stored.id.subscription,
        "resourceGroup": stored.id.resource_group,
        "name": stored.id.name,
        "location": document.location,
        "sku": document.sku.value,
        "state": document.state.value,
        "quota": document.quota.to_wire() if document.quota is not None else {},
        "jobs": {"total": sum(by_state.values()), **{s.value: by_state[s.value] for s in JobState}},
        "trouble": {kind: in_trouble[kind] for kind in TROUBLE},
    }


def job_row(stored: StoredJob, now: datetime, *, collection_runs: bool = True) -> JobRow:
    """A job as the collection's list shows it (`collection_runs`: as for `trouble`)."""
    document = stored.document
    status = document.status
    return {
        "id": stored.id.arm_id,
        "name": stored.id.name,
        "state": document.state.value,
        "stateReason": document.state_reason,  # why it was put in that state, if a client said
        "trouble": [
            {"kind": kind, "words": TROUBLE[kind]}
            for kind in trouble(stored, now, collection_runs=collection_runs)
        ],
        "timeZone": time_zone(document.properties.recurrence),
        "schedule": describe(document.properties.starts_at, document.properties.recurrence),
        "action": action_summary(document.properties.action),
        "nextRun": iso(status.next_execution_time) if status.next_execution_time else None,
        "lastRun": document.last_attempt,
        "counts": {
            "executions": status.execution_count,
            "failures": status.failure_count,
            "faulted": status.faulted_count,
        },
    }


def job_detail(stored: StoredJob, now: datetime, *, collection_runs: bool = True) -> JobDetail:
    """A job's page: its row, its definition as a reader may see it, and its next occurrences
    (those it would have if enabled, when it is not)."""
    document = stored.document
    upcoming = document.schedule.upcoming(
        NEXT_OCCURRENCES_SHOWN, after=now, executions_done=document.occurrences
    )
    return {
        **job_row(stored, now, collection_runs=collection_runs),
        "collection": stored.id.collection.arm_id,
        "definition": document.public_properties(),
        "nextOccurrences": [iso(instant) for instant in upcoming if not document.final],
    }


def trouble(stored: StoredJob, now: datetime, *, collection_runs: bool = True) -> list[str]:
    """What is wrong with a job, worst first: the keys of TROUBLE that apply. A job whose
    collection is disabled or suspended (`collection_runs` false) waits for it, and is not late."""
    document = stored.document
    found = []
    if document.state is JobState.FAULTED:
        found.append("faulted")
    if any(
        pending.attempt.retry > 0 or pending.attempt.action is ActionName.ERROR_ACTION
        for pending in document.pending
    ):
        found.append("retrying")
    last = document.last_attempt
    if last is not None and last.get("status") == "Failed" and "retrying" not in found:
        found.append("failing")
    next_run = document.status.next_execution_time
    runs = collection_runs and document.enabled
    if runs and next_run is not None and next_run + LATE_AFTER < now:
        found.append("late")
    return found


def time_zone(recurrence: Recurrence | None) -> TimeZoneView | None:
    """The job's time zone as written and as its IANA name (which a browser can format in),
    or None for a job in UTC."""
    written = recurrence.time_zone if recurrence is not None else None
    iana = iana_name(written)
    return None if iana is None else {"name": str(written), "iana": iana}


def timeline(jobs: Iterable[StoredJob], now: datetime) -> Timeline:
    """When each enabled job runs within the next TIMELINE_SPAN."""
    until = now + TIMELINE_SPAN
    rows: list[TimelineRow] = []
    for stored in jobs:
        document = stored.document
        if not document.enabled:
            continue
        upcoming = document.schedule.upcoming(
            TIMELINE_RUNS_PER_JOB, after=now, executions_done=document.occurrences
        )
        runs = [instant for instant in upcoming if instant <= until]
        busy = len(runs) == TIMELINE_RUNS_PER_JOB and runs[-1] < until
        row: TimelineRow = {
            "name": stored.id.name,
            "runs": [iso(run) for run in runs],
            "more": busy,
            "timeZone": time_zone(document.properties.recurrence),
        }
        excluded = excluded_occurrences(document.schedule, now, until, TIMELINE_RUNS_PER_JOB)
        if excluded:
            row["excluded"] = excluded
        rows.append(row)
    return {"from": iso(now), "until": iso(until), "jobs": rows}


def action_summary(action: ErrorAction) -> str:
    """What an action does, in a few words: its kind and where it goes, never its full URI."""
    request, queue_message = action.request, action.queue_message
    if action.type in (ActionType.HTTP, ActionType.HTTPS) and request is not None:
        try:
            target = urlsplit(request.uri)
            where = f"{target.scheme}://{target.netloc.rpartition('@')[2]}"  # no user-info
        except ValueError:
            where = "an unreadable URI"
        return f"{request.method.upper()} {where}"
    if action.type is ActionType.STORAGE_QUEUE and queue_message is not None:
        return f"Storage queue {queue_message.queue_name} of {queue_message.storage_account}"
    queue, topic = action.service_bus_queue_message, action.service_bus_topic_message
    if action.type is ActionType.SERVICE_BUS_QUEUE and queue is not None:
        return f"Service Bus queue {queue.queue_name} in {queue.namespace}"
    if action.type is ActionType.SERVICE_BUS_TOPIC and topic is not None:
        return f"Service Bus topic {topic.topic_path} in {topic.namespace}"
    return action.type.value
