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

from shared.domain.wire import JsonValue

CURRENT, EARLIER = "2016-03-01", "2016-01-01"
SUPPORTED_API_VERSIONS = (CURRENT, EARLIER)
JOB_TYPE = "Microsoft.Scheduler/jobCollections/jobs"


def as_answered_in(version: str | None, body: JsonValue) -> JsonValue:
    """An answer built in 2016-03-01's spellings, as `version` spells it: a job, or a list of
    jobs, under 2016-01-01 with its Http actions' `type` in lower case; anything else as is."""
    if version != EARLIER or not isinstance(body, dict):
        return body
    listed = body.get("value")
    jobs = [body] if body.get("type") == JOB_TYPE else listed if isinstance(listed, list) else []
    if not any(_http_actions(job) for job in jobs):
        return body
    answer = copy.deepcopy(body)  # the operation's own answer may be kept (a cached read)
    for job in [answer] if answer.get("type") == JOB_TYPE else answer["value"]:
        for action in _http_actions(job):
            action["type"] = "http"
    return answer


def _http_actions(job: JsonValue) -> list[dict[str, JsonValue]]:
    """A job's action and errorAction whose type is Http."""
    if not isinstance(job, dict) or job.get("type") != JOB_TYPE:
        return []
    action = (job.get("properties") or {}).get("action") or {}
    found = [action, action.get("errorAction") or {}]
    return [each for each in found if each.get("type") == "Http"]
