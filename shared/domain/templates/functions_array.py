"""The array functions of ARM templates, and those of them that take strings and objects too:
`array`, `concat`, `contains`, `createArray`, `empty`, `first`, `last`, `indexOf`,
`lastIndexOf`, `intersection`, `union`, `length`, `range`, `skip`, `take`. Items compare as
JSON (a boolean is never a number); each result's size is known before it is built."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from shared.domain.problems import json_type as kind
from shared.domain.templates.expressions import LARGEST_VALUE, ExpressionError, Scope
from shared.domain.templates.functions_common import (
    arguments,
    as_string,
    at_least,
    comparable,
    fits,
    json_size,
    same,
    whole,
)
from shared.domain.templates.functions_string import text_index

# ARM's own bounds on range(): at most 10,000 integers, none past Int32's largest.
LONGEST_RANGE = 10_000
_LARGEST_INT32 = 2**31 - 1


def to_array(_scope: Scope, given: Sequence[Any]) -> list[Any]:
    arguments("array", given, 1)
    return given[0] if isinstance(given[0], list) else [given[0]]


def create_array(_scope: Scope, given: Sequence[Any]) -> list[Any]:
    return list(given)


def concat(_scope: Scope, given: Sequence[Any]) -> Any:
    """Arrays joined into one array, or anything else joined as text; not both at once."""
    at_least("concat", given, 1)
    arrays = [isinstance(value, list) for value in given]
    if all(arrays):
        fits("concat", sum(len(value) for value in given), "items")
        return [item for value in given for item in value]
    if any(arrays):
        raise ExpressionError("concat() joins arrays or strings, not both at once")
    parts = [as_string("concat", value) for value in given]
    fits("concat", sum(map(len, parts)))
    return "".join(parts)


def contains(_scope: Scope, given: Sequence[Any]) -> bool:
    """A piece of text (in this case), an item of an array, or a key of an object (in any
    case)."""
    arguments("contains", given, 2)
    container, wanted = given
    if isinstance(container, str):
        return as_string("contains", wanted) in container
    if isinstance(container, dict):
        key_wanted = as_string("contains", wanted).casefold()
        return any(key.casefold() == key_wanted for key in container)
    if isinstance(container, list):
        comparable("contains", container, wanted)
        return any(same(item, wanted) for item in container)
    raise ExpressionError(
        f"contains() needs a string, an array or an object, not {kind(container)}"
    )


def empty(_scope: Scope, given: Sequence[Any]) -> bool:
    arguments("empty", given, 1)
    value = given[0]
    if value is None:
        return True
    if isinstance(value, str | list | dict):
        return not value
    raise ExpressionError(f"empty() needs a string, an array or an object, not {kind(value)}")


def length(_scope: Scope, given: Sequence[Any]) -> int:
    arguments("length", given, 1)
    if isinstance(given[0], str | list | dict):
        return len(given[0])
    raise ExpressionError(f"length() needs a string, an array or an object, not {kind(given[0])}")


def _sequence(name: str, value: Any) -> str | list[Any]:
    if not isinstance(value, str | list):
        raise ExpressionError(f"{name}() needs a string or an array, not {kind(value)}")
    return value


def first(_scope: Scope, given: Sequence[Any]) -> Any:
    arguments("first", given, 1)
    value = _sequence("first", given[0])
    return value[0] if value else ("" if isinstance(value, str) else None)


def last(_scope: Scope, given: Sequence[Any]) -> Any:
    arguments("last", given, 1)
    value = _sequence("last", given[0])
    return value[-1] if value else ("" if isinstance(value, str) else None)


def take(_scope: Scope, given: Sequence[Any]) -> Any:
    arguments("take", given, 2)
    value, count = _sequence("take", given[0]), whole("take", given[1])
    return value[: max(0, count)]


def skip(_scope: Scope, given: Sequence[Any]) -> Any:
    arguments("skip", given, 2)
    value, count = _sequence("skip", given[0]), whole("skip", given[1])
    return value[max(0, count) :]


def index_of(_scope: Scope, given: Sequence[Any]) -> int:
    """The first position of a piece of text (in any case) or of an item (exactly), or -1."""
    arguments("indexOf", given, 2)
    return _position("indexOf", given[0], given[1], last=False)


def last_index_of(_scope: Scope, given: Sequence[Any]) -> int:
    arguments("lastIndexOf", given, 2)
    return _position("lastIndexOf", given[0], given[1], last=True)


def _position(name: str, container: Any, wanted: Any, last: bool) -> int:
    if isinstance(container, str):
        return text_index(container, wanted, name, last)
    if isinstance(container, list):
        comparable(name, container, wanted)
        positions = range(len(container) - 1, -1, -1) if last else range(len(container))
        return next((at for at in positions if same(container[at], wanted)), -1)
    raise ExpressionError(f"{name}() needs a string or an array, not {kind(container)}")


def range_of(_scope: Scope, given: Sequence[Any]) -> list[int]:
    arguments("range", given, 2)
    start, count = whole("range", given[0]), whole("range", given[1])
    if not 0 <= count <= LONGEST_RANGE:
        raise ExpressionError(f"range() makes 0 to {LONGEST_RANGE} integers, not {count}")
    if start + count > _LARGEST_INT32:
        raise ExpressionError(f"range() must end by {_LARGEST_INT32}: start plus count is more")
    return list(range(start, start + count))


def _key(item: Any) -> str:
    # Items of arrays compare as JSON; their sizes were checked before this is called.
    return json.dumps(item, sort_keys=True, separators=(",", ":"))


def _all_of_one_kind(name: str, given: Sequence[Any]) -> type:
    if all(isinstance(value, dict) for value in given):
        return dict
    if all(isinstance(value, list) for value in given):
        return list
    raise ExpressionError(f"{name}() needs objects or arrays, all of one kind")


def _check_sizes(name: str, given: Sequence[Any]) -> None:
    total = 0
    for value in given:
        total += json_size(value, LARGEST_VALUE - total)
        fits(name, total)


def union(_scope: Scope, given: Sequence[Any]) -> Any:
    """Arrays: every distinct item, in order. Objects: every key, the last value winning, and
    objects under the same key merged in the same way (arrays under it are not merged)."""
    at_least("union", given, 1)
    if _all_of_one_kind("union", given) is dict:
        comparable("union", *given)
        merged: dict[str, Any] = {}
        for value in given:
            merged = _merged(merged, value)
        return merged
    _check_sizes("union", given)
    distinct: dict[str, Any] = {}
    for value in given:
        for item in value:
            distinct.setdefault(_key(item), item)
    return list(distinct.values())


def _merged(into: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    merged = dict(into)
    for key, item in value.items():
        before = merged.get(key)
        both_objects = isinstance(before, dict) and isinstance(item, dict)
        merged[key] = _merged(before, item) if both_objects else item  # type: ignore[arg-type]
    return merged


def intersection(_scope: Scope, given: Sequence[Any]) -> Any:
    """The items (or keys with their values) that every argument has, in the first's order."""
    at_least("intersection", given, 2)
    if _all_of_one_kind("intersection", given) is dict:
        comparable("intersection", *given)
        head, *rest = given
        return {
            key: item
            for key, item in head.items()
            if all(key in other and same(other[key], item) for other in rest)
        }
    _check_sizes("intersection", given)
    others = [{_key(item) for item in value} for value in given[1:]]
    kept: dict[str, Any] = {}
    for item in given[0]:
        key = _key(item)
        if key not in kept and all(key in other for other in others):
            kept[key] = item
    return list(kept.values())
