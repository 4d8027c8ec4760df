"""What the executor can put on the wire, checked when a job is saved (docs/behaviour.md#limits).

A job whose URI, header or text the executor's clients cannot send would fail on every run, and
a URI whose host clients read in different ways (`0177.0.0.1`, `127.1`) could reach another
address than the one its author meant. The domain imports no HTTP client, so these rules restate
what the executor's do: httpx's reading of a URL, h11's grammar of methods and header fields
(RFC 9110), header values sent as ASCII, and every other text sent as UTF-8. The tests hold the
rules against httpx itself.

Messages never quote a header value or any text that may be a secret; they say what is wrong.
"""

from __future__ import annotations

import ipaddress
import json
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

import idna

from shared.domain.problems import FieldError

# RFC 9110's token: what a method and a header name are made of.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN_CHARACTERS = "letters, digits and !#$%&'*+-.^_`|~"
# An authority as httpx splits it: user info up to the last @, a host (an IPv6 literal in
# brackets, or anything without a colon), then an optional port.
_AUTHORITY = re.compile(r"(?:(?P<userinfo>.*)@)?(?P<host>\[[^\]]*\]|[^:@\[\]]*)(?::(?P<port>.*))?")
# A host whose last label is a number is an IPv4 address to browsers (WHATWG) and to the system
# resolver (inet_aton), which also read octal (0177), hexadecimal (0x7f) and fewer than four
# parts (127.1); httpx refuses some of those forms. Only the dotted-decimal form means one thing.
_NUMBER = re.compile(r"[0-9]+|0[xX][0-9A-Fa-f]*")
_HOST_LABEL = re.compile(r"[A-Za-z0-9_-]{1,63}")
_LONGEST_HOST = 253
_PORT = re.compile(r"[0-9]{1,5}")
_LONE_SURROGATE = "holds a lone surrogate (half of a UTF-16 pair), which UTF-8 cannot encode"


def uri_problem(uri: str, schemes: tuple[str, ...]) -> str | None:
    """Why the executor cannot request `uri` as its author meant it, or None."""
    absolute = f"must be an absolute {' or '.join(schemes)} URL"
    scheme, colon, _ = uri.partition(":")
    if not colon or scheme.strip().lower() not in schemes:
        # Said first: text that is no URL at all ("not a url") has nothing else worth naming.
        return f"{absolute}, such as {schemes[-1]}://example.com/path"
    character = _unsendable_character(uri)
    if character is not None:
        return (
            f"holds {character}; a URI may not hold white space or control characters "
            "(percent-encode them: a space is %20)"
        )
    try:
        parts = urlsplit(uri)
    except ValueError:  # an unclosed IPv6 literal, a host that Unicode normalisation changes
        return f"{absolute}; its host cannot be read"
    if parts.scheme.lower() not in schemes:
        return absolute
    authority = _AUTHORITY.fullmatch(parts.netloc)
    if authority is None:
        return f"{absolute}; its host and port cannot be read"
    if not authority["host"]:
        return absolute
    return _host_problem(authority["host"]) or _port_problem(authority["port"])


def method_problem(method: str) -> str | None:
    """Why `method` cannot be sent as an HTTP method, or None."""
    if _TOKEN.fullmatch(method):
        return None
    return f"must be an HTTP method such as GET or POST: {_TOKEN_CHARACTERS}"


def header_name_problem(name: str) -> str | None:
    """Why `name` cannot be sent as a header name (an RFC 9110 token), or None."""
    if _TOKEN.fullmatch(name):
        return None
    return f"the name is not an HTTP header name: it must be 1 or more {_TOKEN_CHARACTERS}"


def header_value_problem(value: str) -> str | None:
    """Why `value` cannot be sent as a header value, or None; never quotes it (it may be secret)."""
    if "\r" in value or "\n" in value:
        return "the value contains a line break"
    if "\0" in value:
        return "the value contains a NUL character"
    if any(unicodedata.category(character) == "Cc" for character in value.replace("\t", "")):
        return "the value contains a control character"
    if not value.isascii():
        return "the value contains a character outside ASCII, which header values are sent in"
    if value != value.strip(" \t"):
        return "the value starts or ends with a space or tab, which HTTP does not allow"
    return None


def unencodable_text(value: Any, path: str) -> list[FieldError]:
    """Every string of a JSON value, and every name in it, that UTF-8 cannot encode.

    JSON can carry a lone surrogate (`"\\ud800"`); no request or message can.
    """
    if isinstance(value, str):
        return [] if _encodable(value) else [FieldError(path, _LONE_SURROGATE)]
    if isinstance(value, dict):
        problems = []
        for name, member in value.items():
            inner = member_path(path, name)
            if not _encodable(name):
                problems.append(FieldError(inner, f"the name {_LONE_SURROGATE}"))
            problems += unencodable_text(member, inner)
        return problems
    if isinstance(value, list):
        return [
            problem
            for index, item in enumerate(value)
            for problem in unencodable_text(item, f"{path}[{index}]")
        ]
    return []


def member_path(path: str, name: str) -> str:
    """The JSON path of a member: `headers.X-Trace`, or `headers["X Trace"]` for a name that
    would not read plainly (or that holds characters a message should not carry raw)."""
    if name and name.isascii() and name.isprintable() and not any(c in name for c in ' ."[]'):
        return f"{path}.{name}"
    return f"{path}[{json.dumps(name)}]"


def _unsendable_character(text: str) -> str | None:
    """The first white space or control character of `text`, said in words with its position."""
    for position, character in enumerate(text, start=1):
        where = f"at character {position}"
        if character in "\r\n":
            return f"a line break {where}"
        if character == "\t":
            return f"a tab {where}"
        if character == " ":
            return f"a space {where}"
        if character.isspace():
            return f"white space (U+{ord(character):04X}) {where}"
        category = unicodedata.category(character)
        if category == "Cc":
            return f"a control character (U+{ord(character):04X}) {where}"
        if category == "Cs":
            return f"a lone surrogate {where}, which UTF-8 cannot encode"
    return None


def _host_problem(host: str) -> str | None:
    if host.startswith("["):
        literal = host[1:-1]
        if "%" in literal:
            return f"the host {host} names a network interface of this machine (an IPv6 zone)"
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return f"the host {host} is not an IPv6 address"
        return None
    if host.isascii():
        name = host
    else:  # as httpx sends it (IDNA 2008)
        try:
            name = idna.encode(host.lower()).decode("ascii")
        except UnicodeError:
            return f"the host {host} is not a valid internationalised domain name"
    labels = name.removesuffix(".").split(".")
    if _NUMBER.fullmatch(labels[-1]):
        try:
            ipaddress.IPv4Address(name)  # dotted decimal only, no leading zeros
        except ValueError:
            return (
                f"the host {host} reads as an IPv4 address but is not written as one: four "
                "numbers from 0 to 255 separated by dots, without leading zeros (192.0.2.1); "
                "clients read the other forms (octal, hexadecimal, fewer parts) differently"
            )
        return None
    if len(name) > _LONGEST_HOST or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        return (
            f"the host {host} is not a host name: labels of 1 to 63 letters, digits, '-' and '_', "
            f"separated by dots, {_LONGEST_HOST} characters at most"
        )
    if any(label.lower().startswith("xn--") for label in labels):
        try:
            idna.decode(name)
        except UnicodeError:
            return f"the host {host} has an xn-- label that is not a valid internationalised name"
    return None


def _port_problem(port: str | None) -> str | None:
    if not port:  # absent or empty: the scheme's default
        return None
    if _PORT.fullmatch(port) and 1 <= int(port) <= 65535:
        return None
    return f"the port {json.dumps(port[:20])} is not a number from 1 to 65535"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
