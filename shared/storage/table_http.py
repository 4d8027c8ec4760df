"""A table of Table Storage, spoken to over plain HTTP (`storage_http` says why): the calls of
the SDK's `TableClient` this app makes, with the same arguments, answers and errors, so that
the storage modules run on either (`TableLike`).

Entities go as JSON with minimal metadata, written and read as `table_entities` says.

A batch is one multipart request holding one changeset (the Table service's transaction): its
parts are written here as text, and the answer's parts read back in order.

A write that a second copy could apply twice (an insert, an etag-checked update, a batch) is not
sent again once its answer was lost (`storage_http.AnswerLost`): what storage now holds is read,
and if it shows the write the write succeeded (with the etag read); if it does not, the write is
sent again, and meets the service's own checks (409, 412) like any other.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple, Protocol, TypedDict, TypeVar, Unpack
from urllib.parse import quote, urlencode

from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)

from shared.domain.wire import EntityValue, SdkAnswer
from shared.storage.storage_http import (
    Answer,
    AnswerLost,
    SendOptions,
    StorageEndpoint,
    error_message,
    raise_for,
)
from shared.storage.table_entities import (
    Entity,
    Row,
    WriteMetadata,
    entity_json,
    row_from_json,
    substituted,
)
from shared.storage.table_terms import TransactionFailed, UpdateMode

JSON_MINIMAL = "application/json;odata=minimalmetadata"
# Sent with every Table request: the OData protocol version, and the answers' format.
_TABLE_HEADERS = {
    "DataServiceVersion": "3.0",
    "MaxDataServiceVersion": "3.0;NetFx",
    "Accept": JSON_MINIMAL,
}
_NO_ENTITY = "ResourceNotFound: The specified resource does not exist."
_Error = TypeVar("_Error", bound=HttpResponseError)
# Sends of one write whose answers were lost, each followed by a read, before giving up.
LOST_ANSWER_ROUNDS = 3


class TableLike(Protocol):
    """What the storage modules call on a table: the SDK's TableClient, or TableHttp. The
    answers stay `SdkAnswer`: the SDK's TableEntity and TableHttp's Row, its dicts and
    WriteMetadata, are read alike by the storage modules but are not one Python type."""

    def get_entity(self, partition_key: str, row_key: str, **options: object) -> SdkAnswer: ...
    def create_entity(self, entity: Entity, **options: object) -> SdkAnswer: ...
    def update_entity(self, entity: Entity, mode: object = ..., **options: object) -> SdkAnswer: ...
    def upsert_entity(self, entity: Entity, mode: object = ..., **options: object) -> SdkAnswer: ...
    def delete_entity(self, *args: object, **options: object) -> None: ...
    def submit_transaction(
        self, operations: Iterable[Sequence[object]], **options: object
    ) -> SdkAnswer: ...
    def query_entities(self, query_filter: str, **options: object) -> SdkAnswer: ...
    def list_entities(self, **options: object) -> SdkAnswer: ...


class TableServiceLike(Protocol):
    """The account's side: the SDK's TableServiceClient, or clients.TableAccount."""

    def get_table_client(self, table_name: str) -> SdkAnswer: ...
    def create_table(self, table_name: str) -> object: ...
    def query_tables(
        self, query_filter: str, *, parameters: dict[str, EntityValue]
    ) -> SdkAnswer: ...


class ListedTable(NamedTuple):
    """A table as a query of the account's tables names it (read by `name`, as the SDK's
    TableItem is)."""

    name: str


class BatchOptions(TypedDict, total=False):
    """The keywords of one operation in a transaction, as the SDK takes them."""

    mode: UpdateMode
    etag: str | None
    match_condition: MatchConditions | None


_Operation = tuple[str, Entity, BatchOptions]
"""One operation of a transaction, read: its kind in lower case, its entity, its keywords."""


class TableHttp:
    def __init__(self, endpoint: StorageEndpoint, table: str) -> None:
        self._endpoint, self.table_name = endpoint, table

    # --- reads -------------------------------------------------------------------------

    def get_entity(
        self, partition_key: str, row_key: str, *, select: list[str] | None = None
    ) -> Row:
        query = urlencode({"$select": ",".join(select)}, safe=",$") if select else ""
        answer = self._send("GET", self._entity_path(partition_key, row_key), query=query)
        raise_for(answer)
        return row_from_json(json.loads(answer.body))

    def query_entities(
        self,
        query_filter: str,
        *,
        parameters: Mapping[str, EntityValue] | None = None,
        select: list[str] | None = None,
        results_per_page: int | None = None,
    ) -> Iterator[Row]:
        """The entities that match, fetched a page at a time as they are read."""
        return self._pages(substituted(query_filter, parameters), select, results_per_page)

    def list_entities(
        self, *, select: list[str] | None = None, results_per_page: int | None = None
    ) -> Iterator[Row]:
        return self._pages(None, select, results_per_page)

    def _pages(
        self, query_filter: str | None, select: list[str] | None, per_page: int | None
    ) -> Iterator[Row]:
        asked: dict[str, str] = {}
        if query_filter:
            asked["$filter"] = query_filter
        if select:
            asked["$select"] = ",".join(select)
        if per_page:
            asked["$top"] = str(per_page)
        path = self._endpoint.path(f"{quote(self.table_name)}()")
        found = _query(self._endpoint, path, asked, "NextPartitionKey", "NextRowKey")
        return (row_from_json(properties) for properties in found)

    # --- writes ------------------------------------------------------------------------

    def create(self) -> None:
        """Create this table; ResourceExistsError if it is there already (as with the SDK)."""
        body = json.dumps({"TableName": self.table_name}).encode()
        answer = self._send(
            "POST", self._endpoint.path("Tables"), headers=_write_headers(), body=body
        )
        raise_for(answer)

    def create_entity(self, entity: Entity) -> WriteMetadata:
        path = self._endpoint.path(quote(self.table_name))
        body = json.dumps(entity_json(entity)).encode()
        for _ in range(LOST_ANSWER_ROUNDS - 1):
            try:
                answer = self._send(
                    "POST", path, headers=_write_headers(), body=body, repeatable=False
                )
            except AnswerLost:
                stored = self._stored(entity)
                if stored is None:
                    continue  # not applied: insert again
                if _shows(stored, entity, UpdateMode.REPLACE):
                    return WriteMetadata(etag=stored.metadata["etag"])
                raise _exists() from None
            raise_for(answer)
            return WriteMetadata(etag=str(answer.headers.get("ETag")))
        answer = self._send("POST", path, headers=_write_headers(), body=body, repeatable=False)
        raise_for(answer)
        return WriteMetadata(etag=str(answer.headers.get("ETag")))

    def update_entity(
        self,
        entity: Entity,
        mode: UpdateMode = UpdateMode.MERGE,
        *,
        etag: str | None = None,
        match_condition: MatchConditions | None = None,
    ) -> WriteMetadata:
        return self._put(entity, mode, _if_match(etag, match_condition))

    def upsert_entity(self, entity: Entity, mode: UpdateMode = UpdateMode.MERGE) -> WriteMetadata:
        return self._put(entity, mode, None)

    def _put(self, entity: Entity, mode: UpdateMode, if_match: str | None) -> WriteMetadata:
        headers = _write_headers()
        if if_match is not None:
            headers["If-Match"] = if_match
        method = "PUT" if mode == UpdateMode.REPLACE else "PATCH"
        path = self._entity_path(entity["PartitionKey"], entity["RowKey"])
        body = json.dumps(entity_json(entity)).encode()
        # Only a write checked against an etag could meet its own first copy (a 412).
        checked = if_match not in (None, "*")
        for round_ in range(LOST_ANSWER_ROUNDS):
            try:
                answer = self._send(
                    method, path, headers=headers, body=body, repeatable=not checked
                )
            except AnswerLost:
                if round_ == LOST_ANSWER_ROUNDS - 1:
                    raise
                stored = self._stored(entity)
                if stored is not None and _shows(stored, entity, mode):
                    return WriteMetadata(etag=stored.metadata["etag"])
                if stored is None:  # as the service answers a checked write of no entity
                    raise _coded(ResourceNotFoundError(message=_NO_ENTITY), 404) from None
                if stored.metadata["etag"] != if_match:
                    raise _modified() from None
                continue  # still the version it was checked against: not applied
            raise_for(answer)
            return WriteMetadata(etag=str(answer.headers.get("ETag")))
        raise AssertionError("unreachable: the last round returns or raises")

    def delete_entity(
        self,
        partition_key: str | Entity,
        row_key: str | None = None,
        *,
        etag: str | None = None,
        match_condition: MatchConditions | None = None,
    ) -> None:
        """Delete; nothing happens if the entity is not there (as with the SDK)."""
        if isinstance(partition_key, str):
            assert row_key is not None
            path = self._entity_path(partition_key, row_key)
        else:  # an entity, as the SDK also takes
            path = self._entity_path(partition_key["PartitionKey"], partition_key["RowKey"])
        headers = {"If-Match": _if_match(etag, match_condition)}
        answer = self._send("DELETE", path, headers=headers)
        if answer.status != 404:
            raise_for(answer)

    def submit_transaction(self, given: Iterable[Sequence[object]]) -> list[WriteMetadata]:
        """Run operations on one partition as one transaction: each one's metadata (etag), or
        TransactionFailed (`status_code`, and `index`, the operation that failed)."""
        operations = [_operation(operation) for operation in given]
        if not operations:
            return []
        batch, changeset = f"batch_{uuid.uuid4()}", f"changeset_{uuid.uuid4()}"
        parts = [self._part(operation, changeset) for operation in operations]
        body = (
            f"--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
            + "".join(parts)
            + f"--{changeset}--\r\n\r\n--{batch}--\r\n"
        ).encode()
        answer = self._batch_sent(operations, batch, body)
        if answer is None:  # applied, its answer lost: the etags as read
            return [
                WriteMetadata(etag=stored.metadata["etag"] if stored is not None else None)
                for stored in self._stored_all(operations)
            ]
        if answer.status != 202:
            raise TransactionFailed(error_message(answer), answer.status)
        results = _part_answers(answer.body)
        for status, _, part_body in results:
            if not 200 <= status < 300:
                failed = Answer(status, {}, part_body)
                raise TransactionFailed(_plain(failed), status)
        if len(results) != len(operations):
            raise HttpResponseError(
                message=f"a batch of {len(operations)} got {len(results)} answers"
            )
        return [WriteMetadata(etag=headers.get("etag")) for _, headers, _ in results]

    def _batch_sent(self, operations: list[_Operation], batch: str, body: bytes) -> Answer | None:
        """The batch's answer; None if an answer was lost but storage shows it applied. Sent
        again only while storage shows it was not."""
        headers = {
            "Content-Type": f"multipart/mixed; boundary={batch}",
            "Accept": "application/json",
        }
        path = self._endpoint.path("$batch")
        for round_ in range(LOST_ANSWER_ROUNDS):
            try:
                return self._send("POST", path, headers=headers, body=body, repeatable=False)
            except AnswerLost:
                if round_ == LOST_ANSWER_ROUNDS - 1:
                    raise
                stored = self._stored_all(operations)
                if all(map(_applied, operations, stored)):
                    return None
        raise AssertionError("unreachable: the last round returns or raises")

    def _stored(self, entity: Entity) -> Row | None:
        """The entity with this one's keys as storage holds it now; None if there is none."""
        answer = self._send("GET", self._entity_path(entity["PartitionKey"], entity["RowKey"]))
        if answer.status == 404:
            return None
        raise_for(answer)
        return row_from_json(json.loads(answer.body))

    def _stored_all(self, operations: list[_Operation]) -> list[Row | None]:
        return [self._stored(operation[1]) for operation in operations]

    def _part(self, operation: _Operation, changeset: str) -> str:
        kind, entity, options = operation
        key_path = self._entity_path(entity["PartitionKey"], entity["RowKey"])
        headers = {"Accept": JSON_MINIMAL, "Prefer": "return-no-content"}
        body = ""
        if kind == "create":
            method, path = "POST", self._endpoint.path(quote(self.table_name))
        elif kind == "delete":
            method, path = "DELETE", key_path
        elif kind in ("update", "upsert"):
            mode = options.get("mode", UpdateMode.MERGE)
            method, path = ("PUT" if mode == UpdateMode.REPLACE else "PATCH"), key_path
        else:
            raise ValueError(f"unknown batch operation {kind!r}")
        if kind in ("delete", "update"):  # an upsert carries no condition: it always writes
            headers["If-Match"] = _if_match(options.get("etag"), options.get("match_condition"))
        if kind != "delete":
            headers["Content-Type"] = "application/json"
            body = json.dumps(entity_json(entity))
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        return (
            f"--{changeset}\r\nContent-Type: application/http\r\n"
            "Content-Transfer-Encoding: binary\r\n\r\n"
            f"{method} {self._endpoint.absolute(path)} HTTP/1.1\r\n{lines}\r\n{body}\r\n"
        )

    def _entity_path(self, partition_key: str, row_key: str) -> str:
        keys = f"PartitionKey='{_key(partition_key)}',RowKey='{_key(row_key)}'"
        return self._endpoint.path(f"{quote(self.table_name)}({keys})")

    def _send(self, method: str, path: str, **options: Unpack[SendOptions]) -> Answer:
        options["headers"] = {**_TABLE_HEADERS, **(options.get("headers") or {})}
        return self._endpoint.send(method, path, **options)


def listed_tables(
    endpoint: StorageEndpoint, query_filter: str, per_page: int | None = None
) -> Iterator[ListedTable]:
    """The account's tables that match the filter, a page at a time (Query Tables)."""
    asked = {"$filter": query_filter} | ({"$top": str(per_page)} if per_page else {})
    found = _query(endpoint, endpoint.path("Tables"), asked, "NextTableName")
    return (ListedTable(table["TableName"]) for table in found)


def _query(
    endpoint: StorageEndpoint, path: str, asked: Mapping[str, str], *continued_by: str
) -> Iterator[dict[str, EntityValue]]:
    """What a query answers (its `value`), a page at a time as it is read: each next page is
    asked for where the last one ended, which the answer's `x-ms-continuation-<name>` headers
    say for each of `continued_by`, until an answer has none."""
    following: dict[str, str] = {}
    while True:
        query = urlencode({**asked, **following}, quote_via=quote, safe=",$")
        answer = endpoint.send("GET", path, query=query, headers=dict(_TABLE_HEADERS))
        raise_for(answer)
        yield from json.loads(answer.body)["value"]
        headers = {name: answer.headers.get(f"x-ms-continuation-{name}") for name in continued_by}
        following = {name: value for name, value in headers.items() if value is not None}
        if not following:
            return


def _shows(stored: Row, entity: Entity, mode: UpdateMode) -> bool:
    """Whether a stored entity holds what writing `entity` in `mode` leaves: its properties,
    as they come back from the wire (a replace: those only; a merge: those among others)."""
    written = row_from_json(entity_json(entity))
    if mode == UpdateMode.REPLACE:
        return dict(stored) == dict(written)
    return all(name in stored and stored[name] == value for name, value in written.items())


def _operation(given: Sequence[object]) -> _Operation:
    """An operation as the SDK takes it, (kind, entity) or (kind, entity, keywords), read; the
    kind is a TransactionOperation or its name."""
    kind, entity, options = (*given, {})[:3] if len(given) == 2 else tuple(given)
    if not isinstance(entity, Mapping) or not isinstance(options, Mapping):
        raise TypeError(f"a batch operation is (kind, entity[, keywords]), not {given!r}")
    picked = BatchOptions()
    for name in ("mode", "etag", "match_condition"):
        if name in options:
            picked[name] = options[name]
    return str(getattr(kind, "value", kind)).lower(), entity, picked


def _applied(operation: _Operation, stored: Row | None) -> bool:
    """Whether storage shows a batch operation carried out."""
    kind, entity, options = operation
    if kind == "delete":
        return stored is None
    if stored is None:
        return False
    mode = UpdateMode.REPLACE if kind == "create" else options.get("mode", UpdateMode.MERGE)
    return _shows(stored, entity, mode)


def _exists() -> ResourceExistsError:
    """What the service answers an insert of keys already taken, as the SDK raises it."""
    error = ResourceExistsError(message="EntityAlreadyExists: The specified entity already exists.")
    error.error_code = "EntityAlreadyExists"  # type: ignore[attr-defined]
    return _coded(error, 409)


def _modified() -> ResourceModifiedError:
    """What the service answers a write checked against an etag no longer current."""
    error = ResourceModifiedError(
        message="UpdateConditionNotSatisfied: The update condition specified in the request was "
        "not satisfied."
    )
    error.error_code = "UpdateConditionNotSatisfied"  # type: ignore[attr-defined]
    return _coded(error, 412)


def _coded(error: _Error, status: int) -> _Error:
    error.status_code = status
    return error


def _key(value: str) -> str:
    """A key as it goes in a resource path: quoted for OData, then for the URL."""
    return quote(value.replace("'", "''"), safe="")


def _if_match(etag: str | None, condition: MatchConditions | None) -> str:
    """The If-Match header of a conditional write: the etag, or any version ("*")."""
    return etag if condition == MatchConditions.IfNotModified and etag else "*"


def _write_headers() -> dict[str, str]:
    return {"Content-Type": "application/json", "Prefer": "return-no-content"}


_STATUS_LINE = re.compile(rb"^HTTP/1\.1 (\d{3})", re.MULTILINE)


def _part_answers(body: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The answers in a batch's response, in order: status, headers (lower-case names), body."""
    found: list[tuple[int, dict[str, str], bytes]] = []
    for match in _STATUS_LINE.finditer(body):
        head_end = body.find(b"\r\n\r\n", match.end())
        head = body[match.end() : head_end].decode("latin-1")
        headers: dict[str, str] = {}
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        next_boundary = body.find(b"\r\n--", head_end + 4)
        found.append((int(match.group(1)), headers, body[head_end + 4 : next_boundary]))
    return found


def _plain(answer: Answer) -> str:
    """A failed part's message as the SDK gives it: the service's text, which starts with the
    failed operation's index (`1:The update condition specified in the request was not
    satisfied.`), so that TransactionFailed reads its `index` from it."""
    try:
        return str(json.loads(answer.body)["odata.error"]["message"]["value"])
    except (ValueError, KeyError, TypeError):
        return error_message(answer)
