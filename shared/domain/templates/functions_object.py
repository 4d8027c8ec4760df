"""The object functions of ARM templates: `createObject`, `items`, `json`, `null`,
`objectKeys`, `shallowMerge`, `tryGet`. (`contains`, `empty`, `intersection`, `length` and
`union`, which take arrays too, are in functions_array.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.domain.problems import json_type as kind
from shared.domain.templates.expressions import ExpressionError, Scope
from shared.domain.templates.functions_common import arguments, array, at_least, fits, mapping, text
from shared.domain.templates.functions_common import parsed_json as _parsed_json


def create_object(_scope: Scope, given: Sequence[Any]) -> dict[str, Any]:
    if len(given) % 2:
        raise ExpressionError("createObject() takes pairs of a name and a value")
    return {text("createObject", given[i]): given[i + 1] for i in range(0, len(given), 2)}


def json_value(_scope: Scope, given: Sequence[Any]) -> Any:
    arguments("json", given, 1)
    return _parsed_json("json", text("json", given[0]))


def null(_scope: Scope, given: Sequence[Any]) -> None:
    arguments("null", given, 0)


def object_keys(_scope: Scope, given: Sequence[Any]) -> list[str]:
    arguments("objectKeys", given, 1)
    return list(mapping("objectKeys", given[0]))


def items(_scope: Scope, given: Sequence[Any]) -> list[dict[str, Any]]:
    """An object as an array of `{"key": ..., "value": ...}`, sorted by key."""
    arguments("items", given, 1)
    value = mapping("items", given[0])
    ordered = sorted(value, key=lambda key: (key.casefold(), key))
    return [{"key": key, "value": value[key]} for key in ordered]


def shallow_merge(_scope: Scope, given: Sequence[Any]) -> dict[str, Any]:
    """The objects of an array merged at their top level only: a later key replaces an earlier
    one whole."""
    arguments("shallowMerge", given, 1)
    objects = array("shallowMerge", given[0])
    merged: dict[str, Any] = {}
    for each in objects:
        merged.update(mapping("shallowMerge", each))
    fits("shallowMerge", len(merged), "keys")
    return merged


def try_get(_scope: Scope, given: Sequence[Any]) -> Any:
    """A property (in any case) or an item of an array, following each key in turn; null where
    one is missing instead of an error."""
    at_least("tryGet", given, 2)
    found = given[0]
    for key in given[1:]:
        if isinstance(found, dict) and isinstance(key, str):
            found = next((v for k, v in found.items() if k.casefold() == key.casefold()), None)
        elif isinstance(found, list) and isinstance(key, int) and not isinstance(key, bool):
            found = found[key] if 0 <= key < len(found) else None
        elif found is None:
            return None
        else:
            raise ExpressionError(
                f"tryGet() reads an object by a string or an array by an integer, not "
                f"{kind(found)} by {kind(key)}"
            )
    return found
