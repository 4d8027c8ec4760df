"""Pages of a listing: `{"value": [...], "nextLink": ...}`, and the link to the next page.

A `nextLink` is built on the configured public base URL (`Settings.public_base_url`), never on
the Host header a request came with, and never carries the function key (`code`): a client
follows it with the key it holds, as it sent the first request. It keeps the rest of the query
(`api-version`, `$filter`, `$top`) and says where the next page starts: `$skip` counts the
entries before it, and `$skiptoken` (where a listing reads in key order) names the last entry
shown, so that the next page is read from there instead of from the start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from shared.api.arm import ApiRequest, ApiResponse
from shared.domain.problems import InvalidRequest
from shared.domain.wire import JsonObject

# Query parameters that authenticate a request: a link never repeats them.
KEY_PARAMETERS = frozenset({"code"})
SKIPTOKEN = "$skiptoken"
TOKEN_PATTERN = r"[0-9A-Za-z_.:-]{1,100}"  # job keys and history entry ids
_TOKEN = re.compile(TOKEN_PATTERN)


def page(items: list[JsonObject], next_link: str | None) -> ApiResponse:
    # The last page says `"nextLink": null`, as the real service's did.
    return ApiResponse(200, {"value": items, "nextLink": next_link})


def next_link(request: ApiRequest, base_url: str, changes: Mapping[str, str]) -> str:
    """The request's own path and query under `base_url`, with `changes` to the query and
    without its key parameters."""
    parts, base = urlsplit(request.url), urlsplit(base_url)
    dropped = KEY_PARAMETERS | {name.lower() for name in changes}
    query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
             if name.lower() not in dropped]  # fmt: skip
    query += list(changes.items())
    path = base.path.rstrip("/") + parts.path
    return urlunsplit((base.scheme, base.netloc, path, urlencode(query, safe="$'"), ""))


def skiptoken(query: Mapping[str, str]) -> str:
    """The `$skiptoken` of a request ("" when absent): a key this service gave in a link."""
    given = query.get(SKIPTOKEN)
    if given is None:
        return ""
    if not _TOKEN.fullmatch(given):
        raise InvalidRequest.because(
            SKIPTOKEN, "is not a token from a nextLink of this service; follow nextLink as given"
        )
    return given
