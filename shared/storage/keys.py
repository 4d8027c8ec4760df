"""Table Storage keys of collections and jobs, made from their validated names, and the layout
of a collection's jobs partition.

Names are case-insensitive in ARM, so keys use the folded name. A subscription's collections
share one partition (listing is one query); a collection's jobs share another, with their job
counters, the collection's state (the executor's gate) and their history beside them. In key
order: the gate ("!collection"), the mark of the collection's incarnation
("!collection.incarnation-<id>"), the run-now gate ("!collection.run-nows"), counter rows
("!count-<stripe>"), the jobs (their names start with a letter or digit), then history
("~<job row>:<entry id>": "~" sorts after every name).
"""

from __future__ import annotations

from shared.domain.ids import CollectionId, JobId


def table_key(*names: str) -> str:
    """A Table Storage key from validated names: folded to one case, joined by ':'.

    Valid names never hold ':' or any character that Table keys forbid (/ \\ # ? and control
    characters), so the key needs no escaping and sorts by its parts.
    """
    return ":".join(name.casefold() for name in names)


def collection_partition(collection: CollectionId) -> str:
    return table_key(collection.subscription)


def collection_row(collection: CollectionId) -> str:
    return table_key(collection.resource_group, collection.name)


def jobs_partition(collection: CollectionId) -> str:
    return table_key(collection.subscription, collection.resource_group, collection.name)


def job_row(job: JobId) -> str:
    return table_key(job.name)


# Each collection's jobs partition also holds its job count, in counter rows (stripes: see
# counter_rows.py). Their keys sort before every job name, so listings skip them by key range.
COUNTER_PREFIX = "!count-"
AFTER_COUNTERS = "!count."  # "." sorts right after "-"
# The collection's state, which the executor reads beside the job (see executor_records.py).
COLLECTION_GATE = "!collection"
# A row every accepted run-now rewrites, etag-checked, in the batch that counts it in its job:
# run-nows of different jobs then collide on it, so the collection's bound is exact (jobs.py).
# It sorts between the state and the counter rows ("l" < "o" < "u"), outside every job listing.
RUN_NOW_GATE = "!collection.run-nows"
# The mark of one incarnation (creation) of the collection and one version of its terms (what a
# job's write depends on: job_collections.py). Written when either is new; deleted first when the
# collection is, and once the next version's mark is written. A job's write rewrites it in its
# batch, so that the write lands only while that incarnation, with those terms, is there (jobs.py).
# Between the gate and the run-now gate ("i" < "r").
INCARNATION_MARK = "!collection.incarnation-"
AFTER_INCARNATION_MARKS = "!collection.incarnation."  # "." sorts right after "-"
HISTORY_MARK = "~"


def incarnation_row(incarnation: str, version: str = "") -> str:
    """The mark's row; a collection last saved before versions were kept has a mark without."""
    return f"{INCARNATION_MARK}{incarnation}" + (f"-{version}" if version else "")


def history_range(job: JobId) -> tuple[str, str]:
    """The row keys that hold a job's history lie strictly between these two."""
    return f"{HISTORY_MARK}{job_row(job)}:", f"{HISTORY_MARK}{job_row(job)};"  # ";" follows ":"
