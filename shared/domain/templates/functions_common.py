"""What every template function shares: checking its arguments, ARM's 64-bit integers, the size
of a value before it is built, and how .NET writes, compares and parses values (ARM runs on
.NET, so `string(true)` is `True`, integers are 64-bit and strings sort as its invariant
culture sorts them)."""

from __future__ import annotations

import functools
import json
import math
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyjson5
import pyuca

from shared.domain.problems import json_type as kind
from shared.domain.templates.expressions import LARGEST_VALUE, ExpressionError

SMALLEST_INTEGER, LARGEST_INTEGER = -(2**63), 2**63 - 1
# Widths and precisions of padLeft() and format(): as many as a name or a label can use.
LONGEST_PADDING = 1000
# The most items that equals(), contains(), indexOf(), union() and intersection() compare one by
# one: walking them costs about a microsecond each in Python, so this bounds a comparison to a
# fraction of a second, however the values repeat each other by reference.
MOST_ITEMS_COMPARED = 100_000
# The longest text beyond ASCII that greater() and less() order: the collation table is walked
# in Python, some 10 microseconds a character, so this bounds one comparison to a few tenths
# of a second. Two ASCII texts are ordered at C speed, at any length.
LONGEST_COLLATED = 10_000


def arguments(name: str, given: Sequence[Any], least: int, most: int | None = None) -> None:
    """Refuse a call without `least` arguments (to `most`, when given)."""
    most = least if most is None else most
    if not least <= len(given) <= most:
        wanted = str(least) if least == most else f"{least} to {most}"
        raise ExpressionError(f"{name}() takes {wanted} arguments, not {len(given)}")


def at_least(name: str, given: Sequence[Any], least: int) -> None:
    """Refuse a call of fewer than `least` arguments, where any number more is fine."""
    if len(given) < least:
        raise ExpressionError(f"{name}() takes at least {least} arguments, not {len(given)}")


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"{name}() needs a string, not {kind(value)}")
    return value


def whole(name: str, value: Any) -> int:
    """An integer argument, which ARM holds in 64 bits."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExpressionError(f"{name}() needs a whole number, not {kind(value)}")
    return int64(name, value)


def int64(name: str, value: int) -> int:
    """An integer result, refused when it leaves the 64-bit range ARM computes in."""
    if not SMALLEST_INTEGER <= value <= LARGEST_INTEGER:
        shown = str(value) if abs(value) < 10**40 else f"a number of {len(str(abs(value)))} digits"
        raise ExpressionError(
            f"{name}() gives {shown}, outside the 64-bit integer range "
            f"({SMALLEST_INTEGER} to {LARGEST_INTEGER})"
        )
    return value


def array(name: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ExpressionError(f"{name}() needs an array, not {kind(value)}")
    return value


def mapping(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ExpressionError(f"{name}() needs an object, not {kind(value)}")
    return value


def fits(name: str, size: int, unit: str = "characters") -> None:
    """Refuse a result of `size` before it is built, past the largest value an expression may
    make (expressions.LARGEST_VALUE)."""
    if size > LARGEST_VALUE:
        raise ExpressionError(f"{name}() would make {size} {unit}, more than {LARGEST_VALUE}")


def json_size(value: Any, limit: int = LARGEST_VALUE) -> int:
    """A value's length written as compact JSON, counted up to just past `limit` and no further:
    a value that repeats one array by reference in each of fifty levels is never walked whole."""
    size, pending = 0, [value]
    while pending and size <= limit:
        item = pending.pop()
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, bool) or item is None:
            size += 5
        elif isinstance(item, int | float):
            size += len(repr(item)) if abs(item) < 10**40 else 41
        elif isinstance(item, list):
            size += len(item) + 1
            pending.extend(item)
        elif isinstance(item, dict):
            size += len(item) * 2 + 1
            pending.extend(item.keys())
            pending.extend(item.values())
    return size


def item_count(value: Any, limit: int = LARGEST_VALUE) -> int:
    """How many values a value holds, itself and every item and property down to its leaves,
    counted up to just past `limit`: what comparing it item by item costs."""
    count, pending = 0, [value]
    while pending and count <= limit:
        item = pending.pop()
        count += 1
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    return count


def comparable(name: str, *values: Any) -> None:
    """Refuse to compare values item by item that hold more than MOST_ITEMS_COMPARED items
    between them: arrays that repeat one array by reference in each of fifty levels hold 2**50."""
    total = 0
    for value in values:
        if isinstance(value, list | dict):
            total += item_count(value, MOST_ITEMS_COMPARED - total)
            if total > MOST_ITEMS_COMPARED:
                raise ExpressionError(
                    f"{name}() would compare more than {MOST_ITEMS_COMPARED} items"
                )


def json_text(name: str, value: Any) -> str:
    """A value as compact JSON, as ARM writes one (`{"a":1}`, non-ASCII kept as it is)."""
    fits(name, json_size(value))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def as_string(name: str, value: Any) -> str:
    """A value as ARM's string() writes it: text as it is, booleans as .NET writes them
    (`True`), numbers in the invariant culture, arrays and objects as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(int64(name, value))
    if isinstance(value, float):
        return _float_text(value)
    return json_text(name, value)


def _float_text(value: float) -> str:
    # .NET writes the shortest text that reads back as the same double, as repr() does, with
    # an upper-case exponent and no ".0" on whole values.
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value).replace("e", "E")


def same(left: Any, right: Any) -> bool:
    """JSON equality as ARM's equals() has it: a boolean is never a number, and an object's
    keys match in any case."""
    if left is right:
        return True
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        if len(left) != len(right):
            return False
        folded = {key.casefold(): item for key, item in right.items()}
        return all(
            key.casefold() in folded and same(item, folded[key.casefold()])
            for key, item in left.items()
        )
    if isinstance(left, list | dict) or isinstance(right, list | dict):
        return False
    return bool(left == right)


class _InvariantCulture:
    """String order by the Unicode Collation Algorithm (pyuca's table), in linear time: pyuca's
    own sort_key() slices its input once per character, quadratic on long text. ASCII text is
    keyed by translating each character to its weights (every ASCII character has exactly one
    collation element); other text is keyed in short pieces cut where no contraction spans."""

    def __init__(self) -> None:
        self.collator = pyuca.Collator()
        root = self.collator.table.root
        levels: list[dict[int, str | None]] = [{}, {}, {}]
        for code in range(128):
            [element] = root.children[code].value
            for level, weight in enumerate(element[:3]):
                levels[level][code] = chr(weight) if weight else None
        self.ascii_levels = [str.maketrans(level) for level in levels]
        # Between two ASCII strings, each weight's rank among ASCII's weights is enough, a byte
        # each, so bytes.translate() keys them at C speed (two of 900,000 characters: 0.09 s).
        self.ascii_ranks: list[tuple[bytes, bytes]] = []
        for weights in levels:
            ordered = sorted({weight for weight in weights.values() if weight is not None})
            rank = {weight: position + 1 for position, weight in enumerate(ordered)}
            table = bytes(rank.get(weights[code] or "", 0) for code in range(128))
            ignored = bytes(code for code in range(128) if weights[code] is None)
            self.ascii_ranks.append((table + bytes(128), ignored))
        # Characters that continue a contraction (a sequence with weights of its own): text is
        # never cut before one of them.
        self.continuing: set[int] = set()
        pending = [(root, 0)]
        while pending:
            node, depth = pending.pop()
            for code, child in (node.children or {}).items():
                if depth:
                    self.continuing.add(code)
                pending.append((child, depth + 1))

    def ascii_key(self, value: str) -> bytes:
        """The sort key of ASCII text, by rank: comparable only with another ASCII text's."""
        encoded = value.encode("ascii")
        return b"\0".join(encoded.translate(table, ignored) for table, ignored in self.ascii_ranks)

    def key(self, value: str) -> str:
        """The sort key as text, one character a weight: primary weights, a zero, secondary
        weights, a zero, tertiary weights (pyuca's key, compared as strings compare)."""
        if value.isascii():
            return "\0".join(value.translate(level) for level in self.ascii_levels)
        text = unicodedata.normalize("NFD", value)
        elements: list[Any] = []
        for piece in self._pieces(text):
            elements.extend(self.collator.collation_elements(piece))
        weights = self.collator.sort_key_from_collation_elements(elements)
        return "".join(map(chr, weights))

    def _pieces(self, text: str) -> Iterator[str]:
        start = 0
        while start < len(text):
            end = min(start + 32, len(text))
            while end < len(text) and end < start + 256 and not self._starts_piece(text[end]):
                end += 1
            yield text[start:end]
            start = end

    def _starts_piece(self, char: str) -> bool:
        return unicodedata.combining(char) == 0 and ord(char) not in self.continuing


def _order(left: str | bytes, right: str | bytes) -> int:
    return int(left > right) - int(left < right)  # type: ignore[operator]


@functools.cache
def _invariant_culture() -> _InvariantCulture:
    # Built on first use: reading the Unicode collation table takes a quarter of a second.
    return _InvariantCulture()


def compare(name: str, left: Any, right: Any) -> int:
    """-1, 0 or 1 as `left` sorts before, with or after `right`: two integers by value, two
    strings as .NET's invariant culture sorts them (the Unicode Collation Algorithm: letters
    alphabetically in any case first, then lower case before upper, so 'a' < 'A' < 'b')."""
    numbers = (left, right)
    if all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers):
        return int(left > right) - int(left < right)
    if isinstance(left, str) and isinstance(right, str):
        if left == right:
            return 0
        for value in (left, right):
            if len(value) > LONGEST_COLLATED and not value.isascii():
                raise ExpressionError(
                    f"{name}() orders text beyond ASCII of up to {LONGEST_COLLATED} characters, "
                    f"not {len(value)}"
                )
        culture = _invariant_culture()
        if left.isascii() and right.isascii():
            order = _order(culture.ascii_key(left), culture.ascii_key(right))
        else:
            order = _order(culture.key(left), culture.key(right))
        # Keys alike: only ignorable characters differ, and .NET then tells them apart.
        return order or _order(left, right)
    raise ExpressionError(
        f"{name}() compares two integers or two strings, not {kind(left)} and {kind(right)}"
    )


def parsed_json(name: str, source: str) -> Any:
    """JSON text read as .NET's Json.NET reads it: single quotes and unquoted names too
    (`{'one': 'a'}`); integers must fit in 64 bits, numbers must be finite."""
    try:
        value = pyjson5.decode(source)
    except (pyjson5.Json5Exception, ValueError, RecursionError):
        raise ExpressionError(f"{name}() was given text that is not JSON") from None
    _check_numbers(name, value)
    return value


def _check_numbers(name: str, value: Any) -> None:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            int64(name, item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ExpressionError(f"{name}() was given a number that is not finite")
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, Mapping):
            pending.extend(item.values())


def simple_upper(value: str) -> str:
    """Upper case character by character, as .NET's ordinal case-insensitive comparisons fold:
    the length never changes, so positions found in it are positions in the original."""
    folded = value.upper()
    if len(folded) == len(value):
        return folded
    return "".join(c if len(c.upper()) != 1 else c.upper() for c in value)


def simple_lower(value: str) -> str:
    """Lower case character by character, as .NET's ToLowerInvariant(): 'İ' stays one letter."""
    lowered = value.lower()
    if len(lowered) == len(value):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in value)
