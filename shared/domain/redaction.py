"""Secrets that hide in plain fields of a job: keys in a URI's query or user-info, tokens in
headers (docs/behaviour.md#secrets). They stay intact in the stored definition, which the call
itself needs; whatever shows a job (the API's answers, the console) shows them masked.

A client that reads a job and writes it back sends the masks: `restored_uri` and
`restored_headers` put the stored values back where the masks stand (job_secrets.py applies them
to a definition), so a read-modify-write keeps the job's keys, but only for the endpoint they
came from (`same_endpoint`). A target that echoes its request back would
put the keys into history: `masked_values` takes them out of what is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import SplitResult, unquote_plus, urlsplit, urlunsplit

MASK = "***"
# How a mask may come back: as written, or percent-encoded by a client that re-encodes `*`.
_SENT_MASKS = frozenset({MASK, "%2A%2A%2A", "%2a%2a%2a"})
# Query parameters that carry a key or a signature, by exact name (in any case). Of a SAS
# token only `sig` is secret: `sv`, `ss`, `srt`, `sp`, `se`, `st`, `spr`, `sr`, `si`, `skoid`,
# `sktid`, `skt`, `ske`, `sks`, `skv` and `sdd` say what the signature covers (version,
# services, permissions, start and expiry, the key's owner), grant nothing without it, and tell
# a reader what the token allows and when it expires.
SECRET_QUERY_PARAMETERS = frozenset(
    {
        "sig",  # SAS signatures: Storage, Service Bus, Event Hubs, Logic Apps trigger URLs
        "signature",
        "code",  # Azure Functions keys
        "key",
        "apikey",
        "subscription-key",  # API Management
        "aeg-sas-key",  # Event Grid
        "token",
        "auth",
        "secret",
        "password",
        "passwd",
        "pwd",
    }
)
# ...and parameters whose name contains one of these (`client_secret`, `access_token`,
# `x-api-key`, `accountAccessKey`).
SECRET_QUERY_FRAGMENTS = (
    "secret", "password", "passwd", "token", "signature", "apikey", "api_key", "api-key",
    "accesskey", "access_key", "sas-key", "saskey",
)  # fmt: skip
# Header names whose values are credentials, and fragments that mark one (`X-Api-Key`).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
SECRET_HEADER_FRAGMENTS = ("key", "secret", "token", "password", "signature", "auth")
_DEFAULT_PORTS = {"http": 80, "https": 443}
SHORTEST_MASKED_VALUE = 4  # see masked_values
# A URI inside free text (an exception's message, a traceback): up to the next whitespace or
# quote, which is where a message built around one ends it.
_URI_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def redact_uri(uri: str) -> str:
    """The URI with its user-info password and secret query values masked; unchanged when
    there is nothing to mask (or it cannot be read as a URI). Everything else keeps its
    spelling, percent-encoding included."""
    parts = _parts(uri)
    if parts is None:
        return uri
    netloc = _masked_netloc(parts.netloc)
    query = "&".join(_masked_pair(pair) for pair in parts.query.split("&"))
    if (netloc, query) == (parts.netloc, parts.query):
        return uri
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def redact_text(text: str) -> str:
    """Free text (an error message, a traceback) with every URI in it masked as `redact_uri`
    masks one: what a library's exception says may quote the URL it was given."""
    return _URI_IN_TEXT.sub(lambda found: redact_uri(found.group()), text)


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with the values of those that carry credentials masked."""
    return {name: MASK if is_secret_header(name) else value for name, value in headers.items()}


def restored_uri(sent: str, stored: str) -> str:
    """`sent` with its masks replaced by the stored URI's values, for the same endpoint only."""
    if sent == stored or not any(mask in sent for mask in _SENT_MASKS):
        return sent
    if sent == redact_uri(stored):
        return stored  # exactly what a read showed: the stored URI, as it was spelled
    new, old = _parts(sent), _parts(stored)
    if new is None or old is None or not same_endpoint(sent, stored):
        return sent
    netloc = _restored_netloc(new.netloc, old.netloc)
    query = _restored_query(new.query, old.query)
    if (netloc, query) == (new.netloc, new.query):
        return sent
    return urlunsplit(new._replace(netloc=netloc, query=query))


def restored_headers(sent: Mapping[str, str], stored: Mapping[str, str]) -> dict[str, str]:
    """`sent`, each masked credential header's value taken from `stored` (names in any case)."""
    kept = {name.casefold(): value for name, value in stored.items() if is_secret_header(name)}
    return {
        name: kept.get(name.casefold(), value)
        if value in _SENT_MASKS and is_secret_header(name)
        else value
        for name, value in sent.items()
    }


def request_secret_values(uri: str, headers: Mapping[str, str] | None) -> set[str]:
    """The keys an HTTP request of a job carries in plain fields (its URI's user-info password
    and secret query values, its credential headers' values), as stored and as decoded: the
    forms in which a target could echo them back."""
    values: set[str] = set()
    parts = _parts(uri)
    if parts is not None:
        user_info, at, _ = parts.netloc.rpartition("@")
        _, colon, password = user_info.partition(":")
        if at and colon:
            values |= {password, unquote_plus(password)}
        for pair in parts.query.split("&"):
            name, equals, value = pair.partition("=")
            if equals and value and is_secret_parameter(unquote_plus(name)):
                values |= {value, unquote_plus(value)}
    if headers is not None:
        values |= {value for name, value in headers.items() if is_secret_header(name)}
    return values - set(_SENT_MASKS)


def masked_values(text: str, values: Iterable[str]) -> str:
    """`text` with each of the values in it masked, the longest first; and a value cut off at
    the end of the text (history keeps only a body's first 2,048 bytes) masked as well. Values
    shorter than `SHORTEST_MASKED_VALUE` are left alone: masking every `ok` or `1` would garble
    the text and show, by where the masks fall, what the value is."""
    kept = sorted({value for value in values if len(value) >= SHORTEST_MASKED_VALUE},
                  key=len, reverse=True)  # fmt: skip
    for value in kept:
        text = text.replace(value, MASK)
    for value in kept:
        for length in range(len(value) - 1, SHORTEST_MASKED_VALUE - 1, -1):
            if text.endswith(value[:length]):
                return text[:-length] + MASK
    return text


def is_secret_header(name: str) -> bool:
    folded = name.lower()
    return folded in SECRET_HEADERS or any(part in folded for part in SECRET_HEADER_FRAGMENTS)


def is_secret_parameter(name: str) -> bool:
    """Whether a query parameter of this (decoded) name carries a secret."""
    folded = name.lower()
    return folded in SECRET_QUERY_PARAMETERS or any(
        part in folded for part in SECRET_QUERY_FRAGMENTS
    )


def _parts(uri: str) -> SplitResult | None:
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (reading it checks it)
    except ValueError:
        return None
    return parts


def same_endpoint(one: str, other: str) -> bool:
    """Whether two URIs reach the same endpoint: the same scheme, host and port (origin), and
    the same path. The path counts because a host may serve many owners, each under a path of
    its own (Logic Apps, API Management and Functions share hosts between tenants): a key
    given for one path is no key for the next. The query does not count (`?page=2`)."""
    first, second = _parts(one), _parts(other)
    if first is None or second is None:
        return False
    return (_origin(first), first.path or "/") == (_origin(second), second.path or "/")


Origin = tuple[str, str | None, int | None]


def origin(uri: str) -> Origin | None:
    """Scheme, host and port (the default port spelled out) of a URI; None if it has none."""
    parts = _parts(uri)
    return None if parts is None else _origin(parts)


def _origin(parts: SplitResult) -> Origin:
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or _DEFAULT_PORTS.get(scheme)


def _masked_netloc(netloc: str) -> str:
    user_info, at, host = netloc.rpartition("@")
    user, colon, _ = user_info.partition(":")
    return f"{user}:{MASK}@{host}" if at and colon else netloc


def _restored_netloc(sent: str, stored: str) -> str:
    user_info, at, host = sent.rpartition("@")
    user, colon, password = user_info.partition(":")
    stored_info, stored_at, _ = stored.rpartition("@")
    stored_user, stored_colon, stored_password = stored_info.partition(":")
    masked = at and colon and password in _SENT_MASKS
    if masked and stored_at and stored_colon and user == stored_user:
        return f"{user}:{stored_password}@{host}"
    return sent


def _masked_pair(pair: str) -> str:
    name, equals, value = pair.partition("=")
    if equals and value and is_secret_parameter(unquote_plus(name)):
        return f"{name}={MASK}"
    return pair


def _restored_query(sent: str, stored: str) -> str:
    """The sent query, each masked secret value replaced by the stored value of the same name
    (the first masked `sig` by the first stored `sig`, and so on)."""
    stored_values: dict[str, list[str]] = {}
    for pair in stored.split("&"):
        name, equals, value = pair.partition("=")
        if equals and is_secret_parameter(unquote_plus(name)):
            stored_values.setdefault(unquote_plus(name).lower(), []).append(value)
    pairs = []
    for pair in sent.split("&"):
        name, equals, value = pair.partition("=")
        waiting = stored_values.get(unquote_plus(name).lower())
        masked = equals and value in _SENT_MASKS and waiting
        pairs.append(f"{name}={waiting.pop(0)}" if masked and waiting else pair)
    return "&".join(pairs)
