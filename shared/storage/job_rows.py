"""A job's row in the jobs table: its keys, the names it was created under, its columns (the
document whole as JSON, beside what queries filter on), and the batch operations that write it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypedDict

from shared.domain.ids import CollectionId, JobId
from shared.domain.job_document import JobDocument
from shared.storage.batches import ConditionalUpdate, update_if_unchanged
from shared.storage.documents import StoredCollection, StoredJob, as_json
from shared.storage.job_codec import encode_job
from shared.storage.keys import incarnation_row, job_row, jobs_partition
from shared.storage.table_terms import UpdateMode


class JobColumns(TypedDict):
    """A job's columns beside its keys: its document whole, as JSON, its state (which listings
    filter on) and its run-nows in flight (which the run-now bound of its collection adds up)."""

    State: str
    RunNowsInFlight: int  # the column that jobs.py's _RUN_NOWS names in queries
    Document: str
    ClaimedUntil: str  # claim_column: when its earliest claim runs out; "" for none


class JobRow(JobColumns):
    PartitionKey: str
    RowKey: str


class NamedJobRow(JobRow):
    """A job's row as created or replaced: with its names as they were first written."""

    Subscription: str
    ResourceGroup: str
    Collection: str
    Name: str


def replacement(stored: StoredJob) -> tuple[str, JobRow, ConditionalUpdate]:
    """A batch operation that writes a job's document back, if nobody changed it meanwhile."""
    row: JobRow = {
        "PartitionKey": jobs_partition(stored.id.collection),
        "RowKey": job_row(stored.id),
        **job_columns(stored.document),
    }
    return "update", row, update_if_unchanged(stored.etag, UpdateMode.MERGE)


def mark_rewrite(within: StoredCollection) -> tuple[str, dict[str, str], dict[str, UpdateMode]]:
    """A batch operation that lands only while the collection's mark of `within`'s incarnation
    and version is there: an update without an etag (any version of it will do, but it must
    exist, else 404)."""
    mark = {
        "PartitionKey": jobs_partition(within.id),
        "RowKey": incarnation_row(within.incarnation, within.version),
    }
    return "update", mark, {"mode": UpdateMode.MERGE}


def job_entity(job: JobId, document: JobDocument, current: StoredJob | None) -> NamedJobRow:
    # A replaced job keeps the names' case from when it was created.
    names = current.id if current is not None else job
    return {
        "PartitionKey": jobs_partition(job.collection),
        "RowKey": job_row(job),
        "Subscription": names.collection.subscription,
        "ResourceGroup": names.collection.resource_group,
        "Collection": names.collection.name,
        "Name": names.name,
        **job_columns(document),
    }


def job_columns(document: JobDocument) -> JobColumns:
    """A job document as table columns. A stored job is read back with
    `decode_job`."""
    return {
        "State": document.state.value,
        "RunNowsInFlight": document.run_nows_in_flight,
        "Document": as_json(encode_job(document)),
        "ClaimedUntil": claim_column(document.claimed_until),
    }


def claim_column(until: datetime | None) -> str:
    """A claim's deadline as a column that sorts as time does (every digit, always), so that a
    query can find the jobs with a claim past its deadline; "" for a job with none."""
    return "" if until is None else until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def job_keys(stored: StoredJob) -> dict[str, str]:
    return {"PartitionKey": jobs_partition(stored.id.collection), "RowKey": job_row(stored.id)}


def job_id_of(entity: Any) -> JobId:
    collection = CollectionId(entity["Subscription"], entity["ResourceGroup"], entity["Collection"])
    return JobId(collection, entity["Name"])
