"""The JSON conventions of the Microsoft.Scheduler API, shared by every body the service reads.

ARM matches property names without regard to case (the published 2016-03-01 description spells
`monthlyOccurrences[].Occurrence` with a capital O, the docs write `occurrence`), accepts enum
values in any case (the docs' own examples say "week" and "http"), and answers in camelCase. Each
enum answers in the spelling the real service used in its recorded responses (docs/behaviour.md
#spellings): some camelCase (`enabled`, `week`, `netMessaging`), some PascalCase (`Standard`,
`Http`). A property the API does not know is ignored, as ARM resource providers ignore them
(templates written for the real service carry some), but never silently: `ignored_properties`
names each one, with where a known property of that name belongs, for the API to warn about.
"""

from __future__ import annotations

import enum
import functools
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Union, get_args, get_origin

from dateutil.parser import isoparse
from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

JsonObject = dict[str, Any]
"""A JSON object whose shape this code does not own: a request or response body at the API's
edge before a wire model reads it (or after one wrote it), a stored document's text, an OpenAPI
schema, an ARM template and the values given for it. Only for those: a record the code builds
and reads itself (a plan, an outcome, a view the console reads, rrule's arguments) gets a real
type instead (a wire model, a dataclass, a TypedDict)."""

JsonValue = Any
"""Any JSON value, as json.loads gives it: an HTTP body or a part of one before code that knows
its shape reads it (a Table Storage answer, a queue message's text)."""

EntityValue = Any
"""One property of a Table Storage entity, as Table Storage's JSON gives it once its Edm type is
applied: str, bool, int, float, datetime or bytes. Each storage module reads a property as the
type it wrote there, so this stays open rather than a union every reader would narrow again."""

SdkAnswer = Any
"""What an Azure SDK client answers, or this project's own client standing in for it (a table's
TableEntity or Row, a write's metadata dict): read by key (`metadata["etag"]`, an entity's
properties) by code that runs on either, so no one Python type covers both."""

SdkOption = Any
"""A keyword option of an Azure SDK client (a transport, a request hook, an encode policy, a CA
bundle), passed on to the client as given: each SDK types its own, and its constructors take
them as keywords of many types."""


class WireEnum(enum.StrEnum):
    """An enum whose values are read in any case and written in the service's own spelling."""

    @classmethod
    def _missing_(cls, value: object) -> WireEnum | None:
        if isinstance(value, str):
            folded = value.casefold()
            for member in cls:
                if member.value.casefold() == folded:
                    return member
        return None


class WireModel(BaseModel):
    """A request or response body: camelCase on the wire, names matched in any case."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        # Validators are built on a model's first use, so a cold start pays only for the
        # models its one request touches (issue 49).
        defer_build=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _match_names_in_any_case(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = _aliases_by_folded_name(cls)
        return {known.get(str(key).casefold(), key): value for key, value in data.items()}

    def to_wire(self) -> JsonObject:
        """The JSON-ready body: camelCase names, absent values left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


@functools.cache
def _aliases_by_folded_name(model: type[BaseModel]) -> dict[str, str]:
    return {
        (field.alias or name).casefold(): field.alias or name
        for name, field in model.model_fields.items()
    }


@dataclass(frozen=True)
class IgnoredProperty:
    """A property that was sent but that the API does not know there, by its JSON path; if a
    property of that name is known elsewhere in the body, `belongs_in` is that place."""

    path: str
    belongs_in: str | None = None

    def warning(self) -> str:
        """`properties.action.request.retryPolicy was ignored; it belongs in properties.action`."""
        if self.belongs_in is None:
            return f"{self.path} was ignored"
        return f"{self.path} was ignored; it belongs in {self.belongs_in or 'the top level'}"


def ignored_properties(model: type[BaseModel], sent: Any, *at: str) -> list[IgnoredProperty]:
    """Every property of `sent` (JSON) that `model` does not know, and so ignores; `at` is where
    `sent` sits in the request body (`"properties"` for a job's properties)."""
    places = _known_places(model)
    found = []
    for path, name in _unknown_names(model, sent, tuple(at)):
        parent = tuple(part for part in path[:-1] if isinstance(part, str))
        known_in = [(*at, *place) for place in places.get(name.casefold(), ())]
        known_in = [place for place in known_in if place != parent]
        belongs = max(
            known_in, key=lambda place: (_shared_prefix(place, parent), -len(place)), default=None
        )
        found.append(IgnoredProperty(_path(path), None if belongs is None else _path(belongs)))
    return found


def _unknown_names(
    model: type[BaseModel], sent: Any, at: tuple[str | int, ...]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if not isinstance(sent, dict):
        return
    known = _aliases_by_folded_name(model)
    for name, value in sent.items():
        alias = known.get(str(name).casefold())
        if alias is None:
            yield (*at, str(name)), str(name)
            continue
        field = next(f for n, f in model.model_fields.items() if (f.alias or n) == alias)
        yield from _unknown_within(field.annotation, value, (*at, alias))


def _unknown_within(
    annotation: Any, value: Any, at: tuple[str | int, ...]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _unknown_within(get_args(annotation)[0], value, at)
    elif origin in (Union, types.UnionType):
        for option in get_args(annotation):
            yield from _unknown_within(option, value, at)
    elif origin in (list, tuple) and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unknown_within(get_args(annotation)[0], item, (*at, index))
    elif origin is dict and isinstance(value, dict):
        for key, item in value.items():
            yield from _unknown_within(get_args(annotation)[1], item, (*at, str(key)))
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _unknown_names(annotation, value, at)


_DEEPEST_MODEL = 8


@functools.cache
def _known_places(model: type[BaseModel]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Each property name known anywhere in `model`'s tree (folded), with the paths of the
    objects that know it (list items and map values left out of the path)."""
    places: dict[str, list[tuple[str, ...]]] = {}

    def visit(current: type[BaseModel], at: tuple[str, ...]) -> None:
        if len(at) > _DEEPEST_MODEL:  # a guard against models that hold themselves
            return
        for name, field in current.model_fields.items():
            alias = field.alias or name
            places.setdefault(alias.casefold(), []).append(at)
            for inner in _models_in(field.annotation):
                visit(inner, (*at, alias))

    visit(model, ())
    return {name: tuple(paths) for name, paths in places.items()}


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    args = get_args(annotation)
    if get_origin(annotation) is Annotated:
        args = args[:1]
    for arg in args:
        yield from _models_in(arg)


def _path(parts: tuple[str | int, ...]) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path


def _shared_prefix(one: tuple[str, ...], other: tuple[str, ...]) -> int:
    shared = 0
    for mine, theirs in zip(one, other, strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON Merge Patch (RFC 7396), with names matched in any case as ARM matches them.

    A name set to null is removed (`"authentication": null` drops it); objects merge name by
    name; anything else replaces what was there.
    """
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        existing = next((key for key in merged if key.casefold() == str(name).casefold()), name)
        if value is None:
            merged.pop(existing, None)
        else:
            merged[existing] = merge_patch(merged.get(existing), value)
    return merged


def _read_instant(value: Any) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = isoparse(value.strip())
        except (ValueError, OverflowError):
            raise PydanticCustomError(
                "iso_datetime",
                "'{value}' is not an ISO 8601 date or date-time",
                {"value": value[:64]},
            ) from None
    else:
        raise PydanticCustomError("iso_datetime", "must be an ISO 8601 date-time string")
    # The API's rule: a date-time without an offset is UTC.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError(
            "iso_datetime",
            "'{value}' is outside the years 1 to 9999 in UTC",
            {"value": str(value)[:64]},
        ) from None


Instant = Annotated[datetime, BeforeValidator(_read_instant)]
"""An ISO 8601 date or date-time, read as an aware UTC datetime (no offset means UTC)."""

# The digit after the microseconds: .NET clients send times to the 100 ns (7 digits).
_SEVENTH_DIGIT = re.compile(r"T[^.,]*[.,]\d{6}(\d)")


def _read_sent_instant(value: Any) -> str:
    moment = _read_instant(value)
    seventh = _SEVENTH_DIGIT.search(value) if isinstance(value, str) else None
    return iso(moment, hundred_ns=int(seventh.group(1)) if seventh else 0)


SentInstant = Annotated[str, BeforeValidator(_read_sent_instant)]
"""An ISO 8601 date or date-time, kept as the API echoes it (docs/behaviour.md#times): in UTC
with a Z, to the 100 ns that .NET clients send (a datetime holds only microseconds). Read it
with `parse_iso`."""


def iso(instant: datetime, *, hundred_ns: int = 0) -> str:
    """An instant as the API writes it: ISO 8601 in UTC with a Z, the fraction of a second only
    as long as it needs to be (`...:55.4695Z`, `...:00Z`), as the real service wrote times."""
    utc = instant.astimezone(UTC)
    whole_seconds = utc.replace(microsecond=0, tzinfo=None).isoformat()
    fraction = f"{utc.microsecond:06d}{hundred_ns}".rstrip("0")
    return f"{whole_seconds}.{fraction}Z" if fraction else f"{whole_seconds}Z"


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ticks(instant: datetime) -> int:
    """An instant in 100-ns ticks since 1970, exactly (no float rounding): for sortable keys."""
    delta = instant - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 10_000_000 + delta.microseconds * 10


def parse_iso(text: str) -> datetime:
    """An instant the service wrote with `iso` (to the microsecond: a seventh digit is cut)."""
    return datetime.fromisoformat(text)
