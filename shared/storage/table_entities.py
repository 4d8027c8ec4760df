"""Entities of Table Storage as JSON goes on the wire, and back (for `table_http`).

A property's type travels beside it where JSON alone cannot say it, as the SDK writes it: an int
past 32 bits as Edm.Int64, a datetime as Edm.DateTime, bytes as Edm.Binary, a float as
Edm.Double; read back as int, aware datetime, bytes and float. Each entity read carries
`metadata` (`etag`, `timestamp`), as the SDK's do.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TypedDict

from shared.domain.wire import EntityValue, JsonValue

Entity = Mapping[str, EntityValue]
"""An entity to write: PartitionKey, RowKey and its other properties by name."""

INT32 = range(-(2**31), 2**31)


class EntityMetadata(TypedDict):
    """What the SDK puts beside an entity read: its version, and when it was last written."""

    etag: str | None
    timestamp: datetime | None


class WriteMetadata(TypedDict):
    """What a write answers, as the SDK's do: the entity's new version."""

    etag: str | None


class Row(dict[str, EntityValue]):
    """An entity as read: its properties, and `metadata` (etag, timestamp) beside them."""

    metadata: EntityMetadata

    def __init__(self, properties: Entity, metadata: EntityMetadata) -> None:
        super().__init__(properties)
        self.metadata = metadata


def entity_json(entity: Entity) -> dict[str, JsonValue]:
    """An entity's properties as JSON, each typed where JSON alone cannot say its type."""
    out: dict[str, JsonValue] = {}
    for name, value in entity.items():
        if value is None:
            continue
        if isinstance(value, bool | str):
            out[name] = value
        elif isinstance(value, int):
            if value in INT32:
                out[name] = value
            else:
                out[name], out[f"{name}@odata.type"] = str(value), "Edm.Int64"
        elif isinstance(value, float):
            out[name], out[f"{name}@odata.type"] = value, "Edm.Double"
        elif isinstance(value, datetime):
            out[name], out[f"{name}@odata.type"] = edm_datetime(value), "Edm.DateTime"
        elif isinstance(value, bytes):
            out[name] = base64.b64encode(value).decode()
            out[f"{name}@odata.type"] = "Edm.Binary"
        else:
            raise TypeError(f"a table property cannot hold {type(value).__name__}")
    return out


def edm_datetime(value: datetime) -> str:
    """A datetime as the service writes it, in UTC (a naive one is taken to be UTC)."""
    at = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def row_from_json(properties: Mapping[str, JsonValue]) -> Row:
    """An entity as the service answers it (minimal metadata), its properties typed."""
    found: dict[str, EntityValue] = {}
    for name, value in properties.items():
        if name.startswith("odata.") or "@odata.type" in name or name == "Timestamp":
            continue
        found[name] = _typed(value, properties.get(f"{name}@odata.type"))
    stamp = properties.get("Timestamp")
    etag = properties.get("odata.etag")
    metadata = EntityMetadata(
        etag=None if etag is None else str(etag),
        timestamp=_datetime(stamp) if isinstance(stamp, str) and stamp else None,
    )
    return Row(found, metadata)


def _typed(value: JsonValue, kind: JsonValue) -> EntityValue:
    if kind == "Edm.Int64":
        return int(value)
    if kind == "Edm.DateTime":
        return _datetime(value)
    if kind == "Edm.Binary":
        return base64.b64decode(value)
    if kind == "Edm.Double":
        return float(value)
    return value


def _datetime(text: str) -> datetime:
    # The service writes 7 digits of fraction; Python reads at most 6.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.rstrip("Z"))
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def substituted(query_filter: str, parameters: Mapping[str, EntityValue] | None) -> str:
    """`@name` in a filter replaced by the parameter's OData literal (as the SDK does)."""
    if not parameters:
        return query_filter

    def literal(found: re.Match[str]) -> str:
        value = parameters[found.group(1)]
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, int):
            return str(value) if value in INT32 else f"{value}L"
        if isinstance(value, float):
            return str(value)
        if isinstance(value, datetime):
            return f"datetime'{edm_datetime(value)}'"
        return "'" + str(value).replace("'", "''") + "'"

    return re.sub(r"(?<![\w'])@(\w+)", literal, query_filter)
