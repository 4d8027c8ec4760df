"""The numeric functions of ARM templates: `add`, `sub`, `mul`, `div`, `mod`, `int`, `float`,
`min`, `max`. ARM computes in .NET's 64-bit integers: every result outside that range is an
error (never a Python integer that grows without bound), `div` truncates toward zero and
`mod` takes the sign of the number divided (`mod(-7, 3)` is -1), as C# does."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from shared.domain.problems import json_type as kind
from shared.domain.templates.expressions import ExpressionError, Function, Scope
from shared.domain.templates.functions_common import arguments, at_least, int64, whole

# What .NET's Int64.Parse and Double.Parse read in the invariant culture: ASCII digits only
# (Python's int() would also take '1_000' and other scripts' digits).
_INTEGER = re.compile(r"\s*([+-]?)0*(\d{1,19})\s*", re.ASCII)
_ZEROS = re.compile(r"\s*[+-]?0+\s*", re.ASCII)
_DECIMAL = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,4})?\s*", re.ASCII)


def _truncated_division(left: int, right: int) -> int:
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def _remainder(left: int, right: int) -> int:
    remainder = abs(left) % abs(right)
    return -remainder if left < 0 else remainder


def _arithmetic(name: str, act: Callable[[int, int], int]) -> Function:
    def function(_scope: Scope, given: Sequence[Any]) -> int:
        arguments(name, given, 2)
        left, right = whole(name, given[0]), whole(name, given[1])
        if right == 0 and name in {"div", "mod"}:
            raise ExpressionError(f"{name}() divides by zero")
        # Both operands fit in 64 bits, so the exact result is small and cheap to check.
        return int64(name, act(left, right))

    return function


add = _arithmetic("add", lambda left, right: left + right)
sub = _arithmetic("sub", lambda left, right: left - right)
mul = _arithmetic("mul", lambda left, right: left * right)
div = _arithmetic("div", _truncated_division)
mod = _arithmetic("mod", _remainder)


def to_int(_scope: Scope, given: Sequence[Any]) -> int:
    arguments("int", given, 1)
    value = given[0]
    if isinstance(value, bool):
        raise ExpressionError("int() converts a string or a number, not a boolean")
    if isinstance(value, int):
        return int64("int", value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExpressionError("int() cannot convert a number that is not finite")
        return int64("int", round(value))  # .NET's Convert.ToInt64 rounds half to even
    if isinstance(value, str):
        return int64("int", _integer_text(value))
    raise ExpressionError(f"int() converts a string or a number, not {kind(value)}")


def _integer_text(value: str) -> int:
    if _ZEROS.fullmatch(value):
        return 0
    digits = _INTEGER.fullmatch(value)
    if digits is None:
        shown = value if len(value) <= 40 else value[:37] + "..."
        if _DECIMAL.fullmatch(value) or re.fullmatch(r"\s*[+-]?\d+\s*", value, re.ASCII):
            raise ExpressionError(
                f"int() reads '{shown}', which is not a whole number in the 64-bit range"
            )
        raise ExpressionError(f"int() cannot read '{shown}' as a whole number")
    sign, number = digits.groups()
    return -int(number) if sign == "-" else int(number)


def to_float(_scope: Scope, given: Sequence[Any]) -> float:
    arguments("float", given, 1)
    value = given[0]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ExpressionError(f"float() converts a string or a number, not {kind(value)}")
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise ExpressionError(f"float() cannot read '{value[:40]}' as a number")
    converted = float(value)
    if not math.isfinite(converted):
        raise ExpressionError("float() gives a number too large to hold")
    return converted


def _integers(name: str, given: Sequence[Any]) -> list[int]:
    at_least(name, given, 1)
    values = given[0] if len(given) == 1 and isinstance(given[0], list) else given
    if not values:
        raise ExpressionError(f"{name}() needs at least one integer")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ExpressionError(f"{name}() compares integers, not {kind(value)}")
    return list(values)


def min_(_scope: Scope, given: Sequence[Any]) -> int:
    return min(_integers("min", given))


def max_(_scope: Scope, given: Sequence[Any]) -> int:
    return max(_integers("max", given))
