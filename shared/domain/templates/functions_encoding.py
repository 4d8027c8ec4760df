"""The string functions of ARM templates that encode, decode and hash: `base64`,
`base64ToString`, `base64ToJson`, `dataUri`, `dataUriToString`, `uri`, `uriComponent`,
`uriComponentToString`, `uniqueString` and `guid`, each giving what Azure gives."""

from __future__ import annotations

import base64 as codec
import binascii
import re
import urllib.parse
import uuid
from collections.abc import Sequence
from typing import Any

from shared.domain.templates.expressions import ExpressionError, Scope
from shared.domain.templates.functions_common import arguments, at_least, fits, parsed_json, text

# guid() is a name-based UUID (version 5, SHA-1) in this namespace, of the values joined by '-'.
_GUID_NAMESPACE = uuid.UUID("11fb06fb-712d-4ddd-98c7-e71bbd588830")
# What Uri.EscapeDataString leaves as it is (RFC 3986's unreserved characters).
_UNRESERVED = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~"
_DATA_URI = re.compile(r"data:(?P<type>[^,]*?)(?P<base64>;base64)?,(?P<data>.*)", re.DOTALL)


def to_base64(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("base64", given, 1)
    encoded = text("base64", given[0]).encode()
    fits("base64", (len(encoded) + 2) // 3 * 4)
    return codec.b64encode(encoded).decode()


def _decoded(name: str, value: str) -> bytes:
    # .NET's Convert.FromBase64String skips white space; anything else not base64 is refused.
    compact = "".join(value.split())
    try:
        return codec.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise ExpressionError(f"{name}() was given text that is not base64") from None


def _utf8(name: str, data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ExpressionError(f"{name}() was given bytes that are not UTF-8 text") from None


def base64_to_string(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("base64ToString", given, 1)
    return _utf8("base64ToString", _decoded("base64ToString", text("base64ToString", given[0])))


def base64_to_json(_scope: Scope, given: Sequence[Any]) -> Any:
    arguments("base64ToJson", given, 1)
    decoded = _utf8("base64ToJson", _decoded("base64ToJson", text("base64ToJson", given[0])))
    return parsed_json("base64ToJson", decoded)


def data_uri(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("dataUri", given, 1)
    encoded = text("dataUri", given[0]).encode()
    prefix = "data:text/plain;charset=utf8;base64,"
    fits("dataUri", len(prefix) + (len(encoded) + 2) // 3 * 4)
    return prefix + codec.b64encode(encoded).decode()


def data_uri_to_string(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("dataUriToString", given, 1)
    value = text("dataUriToString", given[0])
    parts = _DATA_URI.fullmatch(value)
    if parts is None:
        raise ExpressionError("dataUriToString() needs a data URI ('data:[type][;base64],...')")
    if parts["base64"]:
        data = _decoded("dataUriToString", parts["data"])
    else:
        data = urllib.parse.unquote_to_bytes(parts["data"])
    charset = re.search(r";charset=([^;]+)", parts["type"], re.IGNORECASE)
    encoding = charset.group(1).strip() if charset else "utf-8"
    try:
        return data.decode(encoding)
    except (LookupError, UnicodeDecodeError):
        raise ExpressionError(
            f"dataUriToString() cannot read the data as {encoding[:40]} text"
        ) from None


def uri(_scope: Scope, given: Sequence[Any]) -> str:
    """The relative URI resolved against the base as .NET's Uri resolves it: after the base's
    last '/', which takes the place of what follows it."""
    arguments("uri", given, 2)
    base, relative = text("uri", given[0]), text("uri", given[1])
    parts = urllib.parse.urlsplit(base)
    if not parts.scheme or not parts.netloc:
        raise ExpressionError("uri() needs an absolute base URI such as 'https://host/path/'")
    fits("uri", len(base) + len(relative) + 1)
    return urllib.parse.urljoin(base if parts.path else base + "/", relative)


def uri_component(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("uriComponent", given, 1)
    encoded = text("uriComponent", given[0]).encode()
    escaped = len(encoded.translate(None, _UNRESERVED))
    fits("uriComponent", len(encoded) + 2 * escaped)
    return urllib.parse.quote_from_bytes(encoded, safe="-_.~")


def uri_component_to_string(_scope: Scope, given: Sequence[Any]) -> str:
    arguments("uriComponentToString", given, 1)
    # Malformed escapes decode as U+FFFD rather than fail, as .NET leaves what it cannot read.
    return urllib.parse.unquote(text("uriComponentToString", given[0]), errors="replace")


def guid(_scope: Scope, given: Sequence[Any]) -> str:
    at_least("guid", given, 1)
    values = [text("guid", value) for value in given]
    return str(uuid.uuid5(_GUID_NAMESPACE, "-".join(values)))


def unique_string_of(_scope: Scope, given: Sequence[Any]) -> str:
    at_least("uniqueString", given, 1)
    return unique_string(*(text("uniqueString", value) for value in given))


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
