"""The logical functions of ARM templates: `and`, `or`, `not`, `bool`, `true`, `false`.
(`if` is evaluated by expressions.Scope, which evaluates only the branch it takes.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.domain.problems import json_type as kind
from shared.domain.templates.expressions import ExpressionError, Scope
from shared.domain.templates.functions_common import arguments, at_least


def _booleans(name: str, given: Sequence[Any]) -> list[bool]:
    for value in given:
        if not isinstance(value, bool):
            raise ExpressionError(f"{name}() needs booleans, not {kind(value)}")
    return list(given)


def and_(_scope: Scope, given: Sequence[Any]) -> bool:
    at_least("and", given, 2)
    return all(_booleans("and", given))


def or_(_scope: Scope, given: Sequence[Any]) -> bool:
    at_least("or", given, 2)
    return any(_booleans("or", given))


def not_(_scope: Scope, given: Sequence[Any]) -> bool:
    arguments("not", given, 1)
    return not _booleans("not", given)[0]


def to_bool(_scope: Scope, given: Sequence[Any]) -> bool:
    """A boolean from 'true' or 'false' in any case, or from an integer (0 is false)."""
    arguments("bool", given, 1)
    value = given[0]
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.casefold() in {"true", "false"}:
        return value.casefold() == "true"
    if isinstance(value, int):
        return value != 0
    shown = f"'{value[:40]}'" if isinstance(value, str) else kind(value)
    raise ExpressionError(f"bool() reads 'true', 'false' or an integer, not {shown}")


def true(_scope: Scope, given: Sequence[Any]) -> bool:
    arguments("true", given, 0)
    return True


def false(_scope: Scope, given: Sequence[Any]) -> bool:
    arguments("false", given, 0)
    return False
