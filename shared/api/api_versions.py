"""The api-versions the ARM routes take, and the one way an answer differs between them.

2016-03-01 is the version this service is built to. 2016-01-01 is the one before it: its
published description has the same routes and bodies but for the SKU names (`Premium` where
2016-03-01 has `P10Premium` and `P20Premium`), and the real service answered it. Microsoft's
page on outbound authentication shows Fiddler captures of it from March 2016, whose answers'
bodies match their Content-Length to the byte. Those answers spell an Http action's `type`
`http`, where every recorded 2016-03-01 answer spells it `Http`; so a job is answered so under
2016-01-01. Nothing recorded shows the other action types under 2016-01-01: they keep their
one spelling, and the SKU names stay 2016-03-01's (docs/compatibility.md).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

from shared.domain.ids import JOB_TYPE
from shared.domain.wire import JsonValue

CURRENT, EARLIER = "2016-03-01", "2016-01-01"
SUPPORTED_API_VERSIONS = (CURRENT, EARLIER)


def as_answered_in(version: str | None, body: JsonValue) -> JsonValue:
    """An answer built in 2016-03-01's spellings, as `version` spells it: a job, or a list of
    jobs, under 2016-01-01 with its Http actions' `type` in lower case; anything else as is."""
    if version != EARLIER or not isinstance(body, dict):
        return body
    answer = copy.deepcopy(body)  # the operation's own answer may be kept (a cached read)
    for action in _http_actions(answer):
        action["type"] = "http"
    return answer


def _http_actions(body: dict[str, JsonValue]) -> Iterator[dict[str, JsonValue]]:
    """The actions and errorActions of type Http of the job, or the list of jobs, in `body`."""
    listed = body.get("value")
    jobs = listed if isinstance(listed, list) else [body]
    for job in jobs:
        if not isinstance(job, dict) or job.get("type") != JOB_TYPE:
            continue
        action = (job.get("properties") or {}).get("action") or {}
        for each in (action, action.get("errorAction") or {}):
            if each.get("type") == "Http":
                yield each
