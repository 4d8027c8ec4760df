"""The comparison functions of ARM templates: `coalesce`, `equals`, `greater`,
`greaterOrEquals`, `less`, `lessOrEquals`. Integers compare by value and strings as .NET's
invariant culture orders them (so `greater('A', 'a')` is true: lower case sorts first)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shared.domain.templates.expressions import Function, Scope
from shared.domain.templates.functions_common import (
    arguments,
    at_least,
    comparable,
    compare,
    same,
)


def coalesce(_scope: Scope, given: Sequence[Any]) -> Any:
    at_least("coalesce", given, 1)
    return next((value for value in given if value is not None), None)


def equals(_scope: Scope, given: Sequence[Any]) -> bool:
    arguments("equals", given, 2)
    comparable("equals", given[0], given[1])
    return same(given[0], given[1])


def _ordering(name: str, holds: Callable[[int], bool]) -> Function:
    def function(_scope: Scope, given: Sequence[Any]) -> bool:
        arguments(name, given, 2)
        return holds(compare(name, given[0], given[1]))

    return function


greater = _ordering("greater", lambda order: order > 0)
greater_or_equals = _ordering("greaterOrEquals", lambda order: order >= 0)
less = _ordering("less", lambda order: order < 0)
less_or_equals = _ordering("lessOrEquals", lambda order: order <= 0)
