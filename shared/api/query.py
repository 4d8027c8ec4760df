"""The query parameters that listings share: `$top`, `$skip` and `$filter=<field> eq '<value>'`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

from shared.domain.problems import InvalidRequest
from shared.domain.wire import WireEnum

Value = TypeVar("Value", bound=WireEnum)
LARGEST_PAGE = 100
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,18}")


def page_bounds(query: Mapping[str, str]) -> tuple[int, int]:
    """`$skip` and `$top` (at most 100, and 100 when not given)."""
    top = whole_number(query, "$top", default=LARGEST_PAGE, least=1, most=LARGEST_PAGE)
    skip = whole_number(query, "$skip", default=0, least=0, most=None)
    return skip, top


def whole_number(
    query: Mapping[str, str], name: str, *, default: int, least: int, most: int | None
) -> int:
    """The whole number `name` in `least..most`; `default` when it is not given."""
    given = query.get(name.lower())
    if given is None:
        return default
    # ASCII digits only: int() would also read other scripts' digits, spaces and underscores.
    if not _WHOLE_NUMBER.fullmatch(given):
        raise InvalidRequest.because(name, f"'{given[:20]}' is not a whole number")
    value = int(given)
    if value < least or (most is not None and value > most):
        allowed = f"{least}..{most}" if most is not None else f"at least {least}"
        raise InvalidRequest.because(name, f"{value} is out of range: {allowed}")
    return value


def equality_filter(expression: str | None, field: str, values: type[Value]) -> Value | None:
    """`<field> eq '<value>'`, the one kind of $filter that listing supports."""
    if not expression:
        return None
    words = expression.split(None, 2)
    if len(words) == 3 and words[0].lower() == field and words[1].lower() == "eq":
        try:
            return values(words[2].strip().strip("'"))
        except ValueError:
            pass
    allowed = ", ".join(member.value for member in values)
    raise InvalidRequest.because(
        "$filter", f"'{expression[:60]}' is not supported; use {field} eq '<one of {allowed}>'"
    )
