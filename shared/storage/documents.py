"""Documents in tables: a resource's JSON kept whole in one string property of one entity, so
that what a client stored is what it reads back, written with optimistic concurrency.

`Stored` is a resource as read (its id, document and etag), `JobSlot` a job as read for a
write, `HistoryEntry` an entry of a job's history, `Preconditions` a write's If-Match /
If-None-Match, `PageBounds` which entries of a listing a page holds, and `DocumentTable` one
table of documents.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)

from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import CloudServiceId, CollectionId, JobId
from shared.domain.job_document import JobDocument
from shared.domain.wire import JsonObject
from shared.storage.concurrency import optimistic_attempts
from shared.storage.counter_rows import Counter
from shared.storage.errors import EtagMismatch, ModifiedConcurrently
from shared.storage.table_http import TableLike
from shared.storage.table_terms import UpdateMode

# The collections table's columns that tell a collection's creations apart (Stored.incarnation)
# and the versions of its terms for jobs (Stored.version).
INCARNATION = "Incarnation"
VERSION = "Version"

Id = TypeVar("Id", CloudServiceId, CollectionId, JobId)
# What each table keeps: collections, jobs, and the classic API's cloud services (label,
# description and region).
Document = TypeVar("Document", CollectionDocument, JobDocument, dict[str, str])


@dataclass(frozen=True)
class Stored(Generic[Id, Document]):
    """A resource as stored: its id, its document, and the etag of that version.

    A collection's `incarnation` tells its creations apart: a collection deleted and created
    again under the same name has a new one (empty for other resources, and for collections
    created before incarnations were recorded). Its `version` changes when what its jobs' writes
    depend on does (job_collections.py; empty for collections last saved before versions were
    recorded)."""

    id: Id
    document: Document
    etag: str
    incarnation: str = ""
    version: str = ""

    def has_terms_of(self, other: Stored[Id, Document]) -> bool:
        """Whether two reads of a collection are of the same incarnation and the same version
        of its terms: what a job's write built on one may assume of the other."""
        return (self.incarnation, self.version) == (other.incarnation, other.version)


StoredCollection = Stored[CollectionId, CollectionDocument]
StoredJob = Stored[JobId, JobDocument]
StoredCloudService = Stored[CloudServiceId, dict[str, str]]


@dataclass(frozen=True)
class JobSlot:
    """A job's place in its collection as read for a write: the job (if any) and the job count
    (read only for a job that is not there, or when asked for; empty otherwise)."""

    current: StoredJob | None
    counters: dict[str, Counter]  # counter row -> what it holds; absent rows count 0
    spares: dict[str, int] = field(default_factory=dict)  # this process's unused places, by row

    @property
    def jobs_in_collection(self) -> int:
        return sum(counter.jobs for counter in self.counters.values()) - sum(self.spares.values())


@dataclass(frozen=True)
class RunNowsInFlight:
    """The run-nows in flight of all a collection's jobs, counted just after its run-now gate
    was read with `gate` as its etag (None: no gate row yet). A run-now accepted on the strength
    of this count is written only if the gate still has that etag (`JobStore.accept_run_now`)."""

    count: int
    gate: str | None


@dataclass(frozen=True)
class PageBounds:
    """Which entries of a listing a page holds: up to `count` of them, from those whose key
    sorts after `after` (the last of the previous page; "" for the first), and `skip` more."""

    count: int
    after: str = ""
    skip: int = 0


@dataclass(frozen=True)
class Preconditions:
    """The If-Match / If-None-Match headers of a write."""

    if_match: str | None = None
    if_none_match: str | None = None

    def check(self, current: Stored[Any, Any] | None) -> None:
        if self.if_none_match == "*" and current is not None:
            raise EtagMismatch()
        if self.if_match is None:
            return
        if current is None or self.if_match not in ("*", current.etag):
            raise EtagMismatch()


class DocumentTable(Generic[Id, Document]):
    """One table of JSON documents, each in one entity with optimistic concurrency.

    `encode` and `decode` write a document as JSON and read it back (the one place a stored
    resource becomes its document type).
    """

    def __init__(
        self,
        table: TableLike,
        id_of: Callable[[Any], Id],
        encode: Callable[[Document], JsonObject],
        decode: Callable[[JsonObject], Document],
        kind: str,
    ) -> None:
        self.table = table
        self._id_of: Callable[[Any], Id] = id_of
        self._encode: Callable[[Document], JsonObject] = encode
        self._decode: Callable[[JsonObject], Document] = decode
        self._kind = kind

    def get(self, partition: str, row: str) -> Stored[Id, Document] | None:
        try:
            return self.from_entity(self.table.get_entity(partition, row))
        except ResourceNotFoundError:
            return None

    def query(self, query: str, **parameters: str) -> Iterator[Stored[Id, Document]]:
        for entity in self.table.query_entities(query, parameters=parameters):
            yield self.from_entity(entity)

    def save(
        self,
        *,
        partition: str,
        row: str,
        columns: dict[str, str],
        document: Document,
        preconditions: Preconditions,
        keep_from_current: tuple[str, ...] = (),
    ) -> tuple[Stored[Id, Document], Stored[Id, Document] | None]:
        """Create or replace; returns what is now stored and what it replaced (None: created).

        `keep_from_current` names columns that a replace keeps from the stored entity (a name
        keeps the case it was created with).
        """
        entity = {"PartitionKey": partition, "RowKey": row, **columns}
        entity["Document"] = as_json(self._encode(document))
        for _ in optimistic_attempts():
            try:
                current_entity = self.table.get_entity(partition, row)
            except ResourceNotFoundError:
                current_entity = None
            current = self.from_entity(current_entity) if current_entity is not None else None
            preconditions.check(current)
            try:
                if current_entity is None:
                    metadata = self.table.create_entity(entity)
                else:
                    for name in keep_from_current:  # absent from older rows: stays absent
                        if name in current_entity:
                            entity[name] = current_entity[name]
                        else:
                            entity.pop(name, None)
                    metadata = self.table.update_entity(
                        entity,
                        mode=UpdateMode.REPLACE,
                        etag=current_entity.metadata["etag"],
                        match_condition=MatchConditions.IfNotModified,
                    )
            except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
                continue
            return self.from_entity(entity, metadata["etag"]), current
        raise ModifiedConcurrently(self._kind)

    def delete(self, partition: str, row: str, preconditions: Preconditions) -> bool:
        """Delete; returns whether there was anything to delete."""
        current = self.get(partition, row)
        preconditions.check(current)
        if current is None:
            return False
        try:
            self.table.delete_entity(
                partition, row, etag=current.etag, match_condition=MatchConditions.IfNotModified
            )
        except ResourceModifiedError:
            raise ModifiedConcurrently(self._kind) from None
        return True

    def from_entity(self, entity: Any, etag: str | None = None) -> Stored[Id, Document]:
        return Stored(
            id=self._id_of(entity),
            document=self._decode(json.loads(entity["Document"])),
            etag=etag or entity.metadata["etag"],
            incarnation=str(entity.get(INCARNATION, "")),
            version=str(entity.get(VERSION, "")),
        )


def as_json(document: Mapping[str, object]) -> str:
    """A document as the string property that holds it: compact JSON."""
    return json.dumps(document, separators=(",", ":"))
