"""The string functions of ARM templates that work on text: `format`, `padLeft`, `replace`,
`split`, `join`, `string`, `substring`, `toLower`, `toUpper`, `trim`, `startsWith`, `endsWith`,
and `indexOf` / `lastIndexOf` of text. Each result's size is known before it is built.
(`concat`, `contains`, `length` and the others that also take arrays are in
functions_array.py; the encodings and hashes in functions_encoding.py.)"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from shared.domain.problems import json_type as kind
from shared.domain.templates.expressions import LARGEST_VALUE, ExpressionError, Scope
from shared.domain.templates.functions_common import (
    LONGEST_PADDING,
    arguments,
    as_string,
    at_least,
    fits,
    simple_lower,
    simple_upper,
    text,
    whole,
)

# What .NET's String.Trim() removes (char.IsWhiteSpace): Python's isspace() would also take
# the four information separators U+001C to U+001F.
_DOTNET_WHITE_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# split() by more delimiters than this is refused: they become one regular expression.
MOST_DELIMITERS = 1000


def to_string(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("string", given, 1)
    return as_string("string", given[0])


def to_lower(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("toLower", given, 1)
    return simple_lower(text("toLower", given[0]))


def to_upper(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("toUpper", given, 1)
    return simple_upper(text("toUpper", given[0]))


def trim(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("trim", given, 1)
    return text("trim", given[0]).strip(_DOTNET_WHITE_SPACE)


def starts_with(_scope: Scope, given: Sequence[Any]) -> bool:
    arguments("startsWith", given, 2)
    value, prefix = (text("startsWith", each) for each in given)
    return simple_upper(value).startswith(simple_upper(prefix))


def ends_with(_scope: Scope, given: Sequence[Any]) -> bool:
    arguments("endsWith", given, 2)
    value, suffix = (text("endsWith", each) for each in given)
    return simple_upper(value).endswith(simple_upper(suffix))


def text_index(value: str, wanted: Any, name: str, last: bool) -> int:
    """Where a piece of text first (or last) starts, in any case; -1 when it is absent."""
    piece = simple_upper(text(name, wanted))
    folded = simple_upper(value)
    return folded.rfind(piece) if last else folded.find(piece)


def substring(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("substring", given, 1, 3)
    value = text("substring", given[0])
    start = whole("substring", given[1]) if len(given) > 1 else 0
    length = whole("substring", given[2]) if len(given) > 2 else len(value) - start
    if start < 0 or start > len(value) or length < 0 or start + length > len(value):
        raise ExpressionError(
            f"substring() must stay within the string: start {start} and length {length} "
            f"in a string of {len(value)}"
        )
    return value[start : start + length]


def pad_left(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("padLeft", given, 2, 3)
    if not isinstance(given[0], str | int) or isinstance(given[0], bool):
        raise ExpressionError(f"padLeft() pads a string or an integer, not {kind(given[0])}")
    value, width = as_string("padLeft", given[0]), whole("padLeft", given[1])
    if width > LONGEST_PADDING:
        raise ExpressionError(f"padLeft() pads to at most {LONGEST_PADDING} characters")
    pad = text("padLeft", given[2]) if len(given) > 2 else " "
    if len(pad) != 1:
        raise ExpressionError(f"padLeft() pads with one character, not {len(pad)}")
    return value.rjust(width, pad)


def replace(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("replace", given, 3)
    value, old, new = (text("replace", each) for each in given)
    if not old:
        raise ExpressionError("replace() needs a string to replace that is not empty")
    count = value.count(old)
    fits("replace", len(value) + count * (len(new) - len(old)))
    return value.replace(old, new)


def split(_scope: Scope, given: Sequence[Any]) -> list[str]:
    """At every delimiter, the first of them that matches where two could (as .NET splits)."""
    arguments("split", given, 2)
    value = text("split", given[0])
    delimiters = given[1] if isinstance(given[1], list) else [given[1]]
    pieces = list(dict.fromkeys(text("split", each) for each in delimiters))
    if not pieces or not all(pieces):
        raise ExpressionError("split() needs delimiters that are not empty")
    if len(pieces) > MOST_DELIMITERS:
        raise ExpressionError(f"split() takes at most {MOST_DELIMITERS} different delimiters")
    # At most one piece more than the delimiters found (fewer where they overlap).
    fits("split", sum(value.count(piece) for piece in pieces) + 1, "items")
    if len(pieces) == 1:
        return value.split(pieces[0])
    return re.split("|".join(re.escape(piece) for piece in pieces), value)


def join(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("join", given, 2)
    items, delimiter = given[0], text("join", given[1])
    if not isinstance(items, list):
        raise ExpressionError(f"join() joins an array, not {kind(items)}")
    for item in items:
        if isinstance(item, list | dict) or item is None:
            raise ExpressionError(f"join() joins strings, numbers and booleans, not {kind(item)}")
    parts = [as_string("join", item) for item in items]
    fits("join", sum(map(len, parts)) + len(delimiter) * max(0, len(parts) - 1))
    return delimiter.join(parts)


# A .NET format item: `{index[,alignment][:format]}`.
_PIECES = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]|[^{}]+")
_ITEM = re.compile(r"\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?(?::(.*))?", re.DOTALL)


def format_(_scope: Scope, given: Sequence[Any]) -> str:
    """.NET composite formatting: `{0}`, `{1,-8}` (alignment), `{2:N0}` (a number's format),
    `{{` and `}}` for braces."""
    at_least("format", given, 1)
    template, values = text("format", given[0]), given[1:]
    out: list[str] = []
    size = 0
    for piece in _PIECES.finditer(template):
        whole_piece, item = piece.group(0), piece.group(1)
        if whole_piece in {"{{", "}}"}:
            made = whole_piece[0]
        elif item is not None:
            made = _format_item(item, values)
        elif whole_piece in {"{", "}"}:
            raise ExpressionError(f"format() has a '{whole_piece}' that is not part of an item")
        else:
            made = whole_piece
        size += len(made)
        if size > LARGEST_VALUE:
            raise ExpressionError(f"format() would make more than {LARGEST_VALUE} characters")
        out.append(made)
    return "".join(out)


def _format_item(item: str, values: Sequence[Any]) -> str:
    parts = _ITEM.fullmatch(item)
    if parts is None:
        raise ExpressionError(f"format() cannot read the item {{{item[:40]}}}")
    index, alignment, spec = parts.groups()
    if len(index) > 6 or int(index) >= len(values):
        raise ExpressionError(f"format() has no value for {{{index[:20]}}}")
    made = _formatted(values[int(index)], spec or "")
    if alignment is not None:
        width = int(alignment) if len(alignment) < 8 else LONGEST_PADDING + 1
        if abs(width) > LONGEST_PADDING:
            raise ExpressionError(f"format() aligns to at most {LONGEST_PADDING} characters")
        made = made.rjust(width) if width > 0 else made.ljust(-width)
    return made


def _formatted(value: Any, spec: str) -> str:
    """A value by a .NET standard number format (D, N, F, X, G with a precision); text and
    booleans ignore the format, as .NET's do."""
    if not spec or isinstance(value, bool) or not isinstance(value, int | float):
        return as_string("format", value)
    letter, digits = spec[0], spec[1:]
    if digits and not (digits.isdigit() and digits.isascii()):
        raise ExpressionError(f"format() does not know the number format '{spec[:20]}'")
    precision = int(digits) if digits and len(digits) < 6 else (0 if not digits else None)
    if precision is None or precision > LONGEST_PADDING:
        raise ExpressionError(f"format() takes a precision of at most {LONGEST_PADDING}")
    upper = letter.upper()
    if upper == "D" and isinstance(value, int):
        return ("-" if value < 0 else "") + str(abs(value)).zfill(precision)
    if upper == "X" and isinstance(value, int):
        unsigned = value & 0xFFFFFFFFFFFFFFFF  # two's complement, as .NET writes a negative Int64
        return format(unsigned, "X" if letter == "X" else "x").zfill(precision)
    if upper in {"N", "F"}:
        decimals = precision if digits else 2
        return format(value, f"{',' if upper == 'N' else ''}.{decimals}f")
    if upper == "G" and not digits:
        return as_string("format", value)
    raise ExpressionError(f"format() does not know the number format '{spec[:20]}'")
