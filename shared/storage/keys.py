"""Table Storage keys of collections and jobs, made from their validated names.

Names are case-insensitive in ARM, so keys use the folded name. A subscription's collections
share one partition (listing is one query); a collection's jobs share another, with their job
counters, the collection's state and their history beside them (see store.py).
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


def job_partition(job: JobId) -> str:
    return jobs_partition(job.collection)


def job_row(job: JobId) -> str:
    return table_key(job.name)
