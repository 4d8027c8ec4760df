"""The template functions that Microsoft.Scheduler resources use: parameters and variables, the
deployment's scope (`resourceGroup()`, `subscription()`, `resourceId`), strings, conversions,
arrays and objects, logic and numbers, `copyIndex`, `uniqueString`. Each behaves as ARM's
does; `reference()` and `listKeys()` need Azure and are answered only with supplied values
(`expressions.Scope`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shared.domain.problems import json_type as kind
from shared.domain.templates.expressions import ExpressionError, Function, Scope
from shared.domain.wire import JsonObject

# Functions whose answer only Azure has (resources' runtime state, their keys, Key Vault).
AZURE_ONLY = frozenset(
    {"reference", "listkeys", "listsecrets", "list", "listaccountsas", "listservicesas",
     "listconnectionstrings", "pickzones", "providers", "environment", "managementgroup",
     "tenant", "newguid", "utcnow"}
)  # fmt: skip


def _arguments(name: str, given: Sequence[Any], least: int, most: int | None = None) -> None:
    most = least if most is None else most
    if not least <= len(given) <= most:
        wanted = str(least) if least == most else f"{least} to {most}"
        raise ExpressionError(f"{name}() takes {wanted} arguments, not {len(given)}")


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"{name}() needs a string, not {kind(value)}")
    return value


def _whole(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExpressionError(f"{name}() needs a whole number, not {kind(value)}")
    return value


def _named(table: Mapping[str, Any], what: str, name: Any) -> Any:
    # By key, then indexed: variables are a lazy mapping that evaluates the one read.
    for key in table:
        if key.casefold() == str(name).casefold():
            return table[key]
    raise ExpressionError(f"reads the {what} '{name}', which the template does not declare")


def _parameters(scope: Scope, given: Sequence[Any]) -> Any:
    _arguments("parameters", given, 1)
    return _named(scope.parameters, "parameter", given[0])


def _variables(scope: Scope, given: Sequence[Any]) -> Any:
    _arguments("variables", given, 1)
    return _named(scope.variables, "variable", given[0])


def _concat(_scope: Scope, given: Sequence[Any]) -> Any:
    if given and all(isinstance(value, list) for value in given):
        return [item for value in given for item in value]
    return "".join(_as_string(value) for value in given)


def _as_string(value: Any) -> str:
    """A value as ARM's string() writes it: text as is, booleans as True/False, JSON else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _format(_scope: Scope, given: Sequence[Any]) -> str:
    """.NET composite formatting: `{0}`, `{1}`, `{{` and `}}`; a format after `:` for numbers
    (`{0:D3}`, `{0:N0}`) as far as whole numbers need it."""
    if not given:
        raise ExpressionError("format() takes a format string and its values")
    template, values = _text("format", given[0]), given[1:]
    out, position = [], 0
    while position < len(template):
        char = template[position]
        if template.startswith(("{{", "}}"), position):
            out.append(char)
            position += 2
            continue
        if char != "{":
            out.append(char)
            position += 1
            continue
        end = template.find("}", position)
        if end < 0:
            raise ExpressionError("format() has a '{' that is never closed")
        slot, _, spec = template[position + 1 : end].partition(":")
        if not slot.strip().isdigit() or int(slot) >= len(values):
            raise ExpressionError(f"format() has no value for {{{slot}}}")
        out.append(_formatted(values[int(slot)], spec))
        position = end + 1
    return "".join(out)


def _formatted(value: Any, spec: str) -> str:
    if spec and isinstance(value, int) and not isinstance(value, bool):
        letter, digits = spec[:1].upper(), spec[1:]
        width = min(int(digits), LONGEST_PADDING) if digits.isdigit() else 0
        if letter == "D":
            return f"{value:0{width}d}"
        if letter == "N":
            return f"{value:,.{width}f}"
        if letter == "X":
            return f"{value:0{width}{'X' if spec[0] == 'X' else 'x'}}"
    return _as_string(value)


def _resource_group(scope: Scope, given: Sequence[Any]) -> Any:
    _arguments("resourceGroup", given, 0)
    return dict(scope.resource_group)


def _subscription(scope: Scope, given: Sequence[Any]) -> Any:
    _arguments("subscription", given, 0)
    return dict(scope.subscription)


def _deployment(scope: Scope, given: Sequence[Any]) -> Any:
    _arguments("deployment", given, 0)
    return dict(scope.deployment)


def _resource_id(scope: Scope, given: Sequence[Any]) -> str:
    """`resourceId([subscriptionId], [resourceGroupName], type, name, ...)`: the type is the
    first argument that has a provider namespace (`Microsoft.X/...`)."""
    texts = [_text("resourceId", value) for value in given]
    at = next(
        (i for i, text in enumerate(texts) if "/" in text and "." in text.split("/")[0]), None
    )
    if at is None or at > 2:
        raise ExpressionError(
            "resourceId() needs a resource type such as 'Microsoft.Scheduler/jobCollections'"
        )
    before, kind_of, names = texts[:at], texts[at].strip("/"), texts[at + 1 :]
    namespace, *types = kind_of.split("/")
    names = [part for name in names for part in name.split("/")]
    if len(names) != len(types):
        raise ExpressionError(
            f"resourceId() gives {len(names)} names for '{kind_of}', which needs {len(types)}"
        )
    subscription = before[0] if len(before) == 2 else scope.subscription["subscriptionId"]
    group = before[-1] if before else scope.resource_group["name"]
    path = "/".join(f"{kind_}/{name}" for kind_, name in zip(types, names, strict=True))
    return f"/subscriptions/{subscription}/resourceGroups/{group}/providers/{namespace}/{path}"


def unique_string(*values: str) -> str:
    """ARM's uniqueString(): the values joined with '-', hashed with Microsoft's 64-bit Murmur
    variant and written as 13 characters of base 32 (a-z, 2-7)."""
    hashed = _murmur64("-".join(values).encode())
    alphabet, letters = "abcdefghijklmnopqrstuvwxyz234567", []
    for _ in range(13):  # five bits at a time from the top; the last takes four and a zero
        letters.append(alphabet[hashed >> 59])
        hashed = (hashed << 5) & 0xFFFFFFFFFFFFFFFF
    return "".join(letters)


_MASK = 0xFFFFFFFF
LONGEST_PADDING = 1000


def _rotate(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def _mix(value: int) -> int:
    value ^= value >> 16
    value = (value * 0x85EBCA6B) & _MASK
    value ^= value >> 13
    value = (value * 0xC2B2AE35) & _MASK
    return value ^ (value >> 16)


def _murmur64(data: bytes) -> int:
    c1, c2 = 0x239B961B, 0xAB0E9789
    h1 = h2 = 0
    whole = len(data) - len(data) % 8
    for at in range(0, whole, 8):
        k1 = int.from_bytes(data[at : at + 4], "little")
        k2 = int.from_bytes(data[at + 4 : at + 8], "little")
        h1 ^= _rotate((k1 * c1) & _MASK, 15) * c2 & _MASK
        h1 = (_rotate(h1, 19) + h2) & _MASK
        h1 = (h1 * 5 + 0x561CCD1B) & _MASK
        h2 ^= _rotate((k2 * c2) & _MASK, 17) * c1 & _MASK
        h2 = (_rotate(h2, 13) + h1) & _MASK
        h2 = (h2 * 5 + 0x0BCAA747) & _MASK
    tail = data[whole:]
    if tail:
        h1 ^= _rotate((int.from_bytes(tail[:4], "little") * c1) & _MASK, 15) * c2 & _MASK
        if len(tail) > 4:
            h2 ^= _rotate((int.from_bytes(tail[4:], "little") * c2) & _MASK, 17) * c1 & _MASK
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1, h2 = _mix(h1), _mix(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return (h2 << 32) | h1


def _unique_string(_scope: Scope, given: Sequence[Any]) -> str:
    if not given:
        raise ExpressionError("uniqueString() needs at least one string")
    return unique_string(*(_text("uniqueString", value) for value in given))


def _copy_index(scope: Scope, given: Sequence[Any]) -> int:
    _arguments("copyIndex", given, 0, 2)
    loop = next((value for value in given if isinstance(value, str)), None)
    offset = next(
        (value for value in given if isinstance(value, int) and not isinstance(value, bool)), 0
    )
    if loop is None:
        if len(scope.copy_indexes) != 1:
            raise ExpressionError("copyIndex() is used outside a copy loop")
        return next(iter(scope.copy_indexes.values())) + offset
    index: int = _named(scope.copy_indexes, "copy loop", loop)
    return index + offset


def _to_int(_scope: Scope, given: Sequence[Any]) -> int:
    _arguments("int", given, 1)
    try:
        return int(given[0])
    except (TypeError, ValueError):
        raise ExpressionError(f"int() cannot read {kind(given[0])} as a whole number") from None


def _to_bool(_scope: Scope, given: Sequence[Any]) -> bool:
    _arguments("bool", given, 1)
    value = given[0]
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.casefold() in {"true", "false"}:
        return value.casefold() == "true"
    if isinstance(value, int):
        return value != 0
    raise ExpressionError(f"bool() cannot read {kind(value)}")


def _json(_scope: Scope, given: Sequence[Any]) -> Any:
    _arguments("json", given, 1)
    try:
        return json.loads(_text("json", given[0]))
    except ValueError:
        raise ExpressionError("json() was given text that is not JSON") from None


def _length(_scope: Scope, given: Sequence[Any]) -> int:
    _arguments("length", given, 1)
    if isinstance(given[0], str | list | dict):
        return len(given[0])
    raise ExpressionError(f"length() needs a string, an array or an object, not {kind(given[0])}")


def _one(name: str, act: Callable[[Any], Any]) -> Function:
    def function(_scope: Scope, given: Sequence[Any]) -> Any:
        _arguments(name, given, 1)
        return act(given[0])

    return function


def _strings(name: str, count: int, act: Callable[..., Any]) -> Function:
    def function(_scope: Scope, given: Sequence[Any]) -> Any:
        _arguments(name, given, count)
        return act(*(_text(name, value) for value in given))

    return function


def _substring(_scope: Scope, given: Sequence[Any]) -> str:
    _arguments("substring", given, 1, 3)
    text = _text("substring", given[0])
    start = _whole("substring", given[1]) if len(given) > 1 else 0
    length = _whole("substring", given[2]) if len(given) > 2 else len(text) - start
    if start < 0 or length < 0 or start + length > len(text):
        raise ExpressionError(f"substring() reaches past the end of a string of {len(text)}")
    return text[start : start + length]


def _pad_left(_scope: Scope, given: Sequence[Any]) -> str:
    _arguments("padLeft", given, 2, 3)
    text, width = _as_string(given[0]), _whole("padLeft", given[1])
    if width > LONGEST_PADDING:
        raise ExpressionError(f"padLeft() pads to at most {LONGEST_PADDING} characters")
    pad = _text("padLeft", given[2]) if len(given) > 2 else " "
    return text.rjust(width, pad[:1] or " ")


def _split(_scope: Scope, given: Sequence[Any]) -> list[str]:
    _arguments("split", given, 2)
    text = _text("split", given[0])
    separators = given[1] if isinstance(given[1], list) else [given[1]]
    parts = [text]
    for separator in separators:
        parts = [piece for part in parts for piece in part.split(_text("split", separator))]
    return parts


def _contains(_scope: Scope, given: Sequence[Any]) -> bool:
    _arguments("contains", given, 2)
    container, wanted = given
    if isinstance(container, str):
        return _as_string(wanted) in container
    if isinstance(container, dict):
        return any(key.casefold() == str(wanted).casefold() for key in container)
    if isinstance(container, list):
        return wanted in container
    raise ExpressionError(
        f"contains() needs a string, an array or an object, not {kind(container)}"
    )


def _empty(_scope: Scope, given: Sequence[Any]) -> bool:
    _arguments("empty", given, 1)
    return given[0] is None or (isinstance(given[0], str | list | dict) and not given[0])


def _equals(_scope: Scope, given: Sequence[Any]) -> bool:
    _arguments("equals", given, 2)
    return bool(given[0] == given[1])


def _booleans(name: str, given: Sequence[Any]) -> list[bool]:
    if not all(isinstance(value, bool) for value in given):
        raise ExpressionError(f"{name}() needs booleans")
    return list(given)


def _numbers(name: str, count: int, act: Callable[[int, int], int]) -> Function:
    def function(_scope: Scope, given: Sequence[Any]) -> int:
        _arguments(name, given, count)
        left, right = (_whole(name, value) for value in given)
        try:
            return act(left, right)
        except ZeroDivisionError:
            raise ExpressionError(f"{name}() divides by zero") from None

    return function


def _coalesce(_scope: Scope, given: Sequence[Any]) -> Any:
    return next((value for value in given if value is not None), None)


def _union(_scope: Scope, given: Sequence[Any]) -> Any:
    if all(isinstance(value, dict) for value in given):
        merged: JsonObject = {}
        for value in given:
            merged |= value
        return merged
    if all(isinstance(value, list) for value in given):
        distinct = dict.fromkeys(
            json.dumps(item, sort_keys=True) for value in given for item in value
        )
        return [json.loads(item) for item in distinct]
    raise ExpressionError("union() needs objects or arrays, all of one kind")


def _create_object(_scope: Scope, given: Sequence[Any]) -> JsonObject:
    if len(given) % 2:
        raise ExpressionError("createObject() takes pairs of a name and a value")
    return {_text("createObject", given[i]): given[i + 1] for i in range(0, len(given), 2)}


def _first_last(name: str, pick: int) -> Function:
    def function(_scope: Scope, given: Sequence[Any]) -> Any:
        _arguments(name, given, 1)
        value = given[0]
        if not isinstance(value, str | list):
            raise ExpressionError(f"{name}() needs a string or an array, not {kind(value)}")
        return value[pick] if value else ("" if isinstance(value, str) else None)

    return function


def _take_skip(name: str, take: bool) -> Function:
    def function(_scope: Scope, given: Sequence[Any]) -> Any:
        _arguments(name, given, 2)
        value, count = given[0], max(0, _whole(name, given[1]))
        if not isinstance(value, str | list):
            raise ExpressionError(f"{name}() needs a string or an array, not {kind(value)}")
        return value[:count] if take else value[count:]

    return function


def _base64_to_string(text: str) -> str:
    try:
        return base64.b64decode(text, validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        raise ExpressionError("base64ToString() was given text that is not base64") from None


FUNCTIONS: dict[str, Function] = {
    "parameters": _parameters,
    "variables": _variables,
    "resourcegroup": _resource_group,
    "subscription": _subscription,
    "deployment": _deployment,
    "resourceid": _resource_id,
    "uniquestring": _unique_string,
    "copyindex": _copy_index,
    "concat": _concat,
    "format": _format,
    "string": _one("string", _as_string),
    "int": _to_int,
    "bool": _to_bool,
    "json": _json,
    "length": _length,
    "tolower": _strings("toLower", 1, str.lower),
    "toupper": _strings("toUpper", 1, str.upper),
    "trim": _strings("trim", 1, str.strip),
    "replace": _strings("replace", 3, str.replace),
    "startswith": _strings("startsWith", 2, lambda a, b: a.casefold().startswith(b.casefold())),
    "endswith": _strings("endsWith", 2, lambda a, b: a.casefold().endswith(b.casefold())),
    "indexof": _strings("indexOf", 2, lambda a, b: a.casefold().find(b.casefold())),
    "lastindexof": _strings("lastIndexOf", 2, lambda a, b: a.casefold().rfind(b.casefold())),
    "substring": _substring,
    "padleft": _pad_left,
    "split": _split,
    "join": lambda _s, given: _text("join", given[1]).join(_as_string(v) for v in given[0]),
    "base64": _strings("base64", 1, lambda text: base64.b64encode(text.encode()).decode()),
    "base64tostring": _strings("base64ToString", 1, _base64_to_string),
    "contains": _contains,
    "empty": _empty,
    "first": _first_last("first", 0),
    "last": _first_last("last", -1),
    "take": _take_skip("take", True),
    "skip": _take_skip("skip", False),
    "union": _union,
    "createarray": lambda _s, given: list(given),
    "array": lambda _s, given: (
        given[0] if given and isinstance(given[0], list) else list(given[:1])
    ),
    "createobject": _create_object,
    "coalesce": _coalesce,
    "equals": _equals,
    "not": lambda _s, given: not _booleans("not", given)[0],
    "and": lambda _s, given: all(_booleans("and", given)),
    "or": lambda _s, given: any(_booleans("or", given)),
    "true": lambda _s, _given: True,
    "false": lambda _s, _given: False,
    "null": lambda _s, _given: None,
    "greater": _numbers("greater", 2, lambda a, b: int(a > b)),
    "less": _numbers("less", 2, lambda a, b: int(a < b)),
    "add": _numbers("add", 2, lambda a, b: a + b),
    "sub": _numbers("sub", 2, lambda a, b: a - b),
    "mul": _numbers("mul", 2, lambda a, b: a * b),
    "div": _numbers("div", 2, lambda a, b: int(a / b)),
    "mod": _numbers("mod", 2, lambda a, b: a % b),
    "min": lambda _s, given: min(given[0] if len(given) == 1 else given),
    "max": lambda _s, given: max(given[0] if len(given) == 1 else given),
}
