"""The real Azure Scheduler's recorded traffic (tests/recordings/, provenance in PROVENANCE.md).

Each file is a .NET SDK test recorder's session: the calls one scenario test made against the
live service in March 2016 and what the service answered. Two things about the format matter
for a replay:

- The recorder kept its entries grouped by method and URI, so a file lists its calls in the
  order they were made only while no URI repeats around another call. One file breaks that: in
  the enable/disable scenario the three GETs of a collection come before the POSTs that changed
  it. Their answers (Enabled, Disabled, Enabled) fix the order, written down below;
  `test_recorded_traffic` checks that every file's order agrees with the answers' routing
  timestamps (`x-ms-routing-request-id`, whole seconds).
- The scrubbed client-certificate file carries a `//` comment line, so lines that start with `//`
  are dropped before the JSON is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).resolve().parent / "recordings"
# File order -> the order the calls were made, where the two differ (see above).
CALL_ORDER = {
    "JobCollectionTests/Scenario_JobCollectionEnableDisable": (0, 1, 2, 3, 6, 4, 7, 5, 8, 9),
}


@dataclass(frozen=True)
class RecordedCall:
    method: str
    uri: str  # path and query, as the client sent them
    request: Any  # the JSON body sent, or None
    request_headers: dict[str, str]
    status: int
    response: Any  # the JSON body answered, or None when it was empty
    answered_at: datetime  # the answer's Date header
    routed_at: str  # the timestamp in the answer's x-ms-routing-request-id: 20160330T193442Z

    @property
    def name(self) -> str:
        """A short label for messages: method and path below the provider."""
        path = self.uri.split("?")[0].split("/providers/Microsoft.Scheduler/")[-1]
        return f"{self.method} {path}"


@dataclass(frozen=True)
class Recording:
    name: str  # the file's path below tests/recordings, without .json
    subscription: str
    calls: tuple[RecordedCall, ...]  # in the order they were made


def all_recordings() -> list[Recording]:
    return [read(path) for path in sorted(RECORDINGS.rglob("*.json"))]


def read(path: Path) -> Recording:
    text = "\n".join(
        line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")
    )
    session = json.loads(text)
    name = str(path.relative_to(RECORDINGS).with_suffix(""))
    entries = session["Entries"]
    order = CALL_ORDER.get(name, range(len(entries)))
    return Recording(
        name=name,
        subscription=session["Variables"]["SubscriptionId"],
        calls=tuple(_call(entries[index]) for index in order),
    )


def _call(entry: dict[str, Any]) -> RecordedCall:
    return RecordedCall(
        method=entry["RequestMethod"],
        uri=entry["RequestUri"],
        request=json.loads(entry["RequestBody"]) if entry["RequestBody"] else None,
        request_headers={name: values[0] for name, values in entry["RequestHeaders"].items()},
        status=int(entry["StatusCode"]),
        response=json.loads(entry["ResponseBody"]) if entry["ResponseBody"] else None,
        answered_at=parsedate_to_datetime(entry["ResponseHeaders"]["Date"][0]),
        routed_at=entry["ResponseHeaders"]["x-ms-routing-request-id"][0].split(":")[1],
    )
