"""Secrets that hide in plain fields of a job: keys in a URI's query or user-info, tokens in
headers. They stay intact in the stored definition, which the call itself needs; what people
read (the console) shows them masked.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
# Query parameters that carry a key or a signature: SAS signatures (`sig`), Azure Functions
# and Logic Apps keys (`code`, `sig`), and the names APIs commonly give keys and tokens.
SECRET_QUERY_PARAMETERS = frozenset(
    {
        "sig",
        "code",
        "key",
        "apikey",
        "api_key",
        "api-key",
        "subscription-key",
        "token",
        "access_token",
        "client_secret",
        "secret",
        "password",
        "pwd",
    }
)
# Header names whose values are credentials, and fragments that mark one (`X-Api-Key`).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
SECRET_HEADER_FRAGMENTS = ("key", "secret", "token", "password", "signature", "auth")


def redact_uri(uri: str) -> str:
    """The URI with its user-info password and secret query values masked; unchanged when
    there is nothing to mask (or it cannot be read as a URI)."""
    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:
        return uri
    netloc = parts.netloc
    if password is not None:
        user_info, _, host = netloc.rpartition("@")
        netloc = f"{user_info.split(':', 1)[0]}:{MASK}@{host}"
    query = parse_qsl(parts.query, keep_blank_values=True)
    secret = [name for name, _ in query if name.lower() in SECRET_QUERY_PARAMETERS]
    if secret:
        masked = [(name, MASK if name in secret else value) for name, value in query]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    return urlunsplit(parts._replace(netloc=netloc))


def redact_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """The headers with the values of those that carry credentials masked."""
    return {name: MASK if _is_secret_header(name) else value for name, value in headers.items()}


def redacted_definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A job definition (already without its secret fields) with URIs and headers masked."""
    shown = copy.deepcopy(dict(definition))
    action = shown.get("action") or {}
    for each in (action, action.get("errorAction")):
        request = (each or {}).get("request")
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("uri"), str):
            request["uri"] = redact_uri(request["uri"])
        if isinstance(request.get("headers"), dict):
            request["headers"] = redact_headers(request["headers"])
    return shown


def _is_secret_header(name: str) -> bool:
    folded = name.lower()
    return folded in SECRET_HEADERS or any(part in folded for part in SECRET_HEADER_FRAGMENTS)
