"""The real service's recorded traffic, replayed against this one: every answer must match.

Each recording in tests/recordings/ (see tests/recorded.py for how it is read) is replayed call by
call against the local host on Azurite, and each answer is compared with the recorded one: the
status, the same keys at every level, the same spellings and the same values, except values that
depend on the clock or on identity:
- the subscription: each replay runs in a fresh one of its own, so that replays never see each
  other's collections; the recorded one is swapped for it in every URI and every expected id;
- `status.nextExecutionTime`, which depends on when the replay runs (tests/domain/schedule/
  test_recorded_next_runs.py checks the recorded values against the schedule engine instead);
- a client certificate's thumbprint: the recorded pfx was scrubbed upstream, so the replay sends
  a certificate of its own with the recorded subject, expiry and password.
Recorded end times (2020) have passed; every `endTime` is moved ten years later, in the request
and in the expected answer alike.

The host runs with its timer and executor disabled (the Functions setting
`AzureWebJobs.<name>.Disabled`) on an Azurite of its own (`replay_host` in tests/conftest.py),
so that no job runs while its answers are compared: the recordings were made with jobs that had
not run yet.

Collections that a recorded list shows but the scenario never created (the SDK team's own
`sdk-test`) existed before the recording; they are created first, from the listed resource.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.conftest import Service
from tests.factories import made_pfx
from tests.recorded import RecordedCall, Recording, all_recordings

END_TIME_YEARS_LATER = 10
# Values compared for presence only (see the module's docstring); paths without list indices.
CLOCK_OR_IDENTITY = {
    "properties.status.nextExecutionTime",
    "value.properties.status.nextExecutionTime",
    "properties.action.request.authentication.certificateThumbprint",
}
# Recorded calls this service answers differently on purpose: (recording, call index) -> why.
# docs/compatibility.md lists each of them.
DELIBERATE_DEVIATIONS: dict[tuple[str, int], str] = {}
RECORDINGS = all_recordings()


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.name for r in RECORDINGS])
def test_each_recorded_call_is_answered_as_the_real_service_answered(
    recording: Recording, replay_host: Service
) -> None:
    replay = Replay(recording, replay_host)
    replay.create_collections_that_existed_before()
    mismatches = []
    for index, call in enumerate(recording.calls):
        answer = replay.send(call)
        found = answer_differences(replay.expected(call), call.status, answer)
        deviation = DELIBERATE_DEVIATIONS.get((recording.name, index))
        if deviation is not None:
            assert found, f"call {index} ({call.name}) now matches: drop its deviation"
        elif found:
            mismatches.append(f"call {index} {call.name}:\n    " + "\n    ".join(found))
    assert not mismatches, "\n".join(mismatches)


def test_the_replay_covers_every_recording_and_operation() -> None:
    """A guard against a loader that silently reads less than is there."""
    assert len(RECORDINGS) == 18
    assert sum(len(recording.calls) for recording in RECORDINGS) == 80
    operations = {(call.method, call.status) for r in RECORDINGS for call in r.calls}
    assert operations == {
        ("PUT", 201), ("PUT", 200), ("GET", 200), ("PATCH", 200), ("DELETE", 200), ("POST", 200),
    }  # fmt: skip


def test_calls_are_replayed_in_the_order_they_were_made() -> None:
    """The recorder grouped entries by URI; the enable/disable scenario shows the order matters."""
    recording = next(r for r in RECORDINGS if r.name.endswith("JobCollectionEnableDisable"))
    states = [
        call.response["properties"]["state"] if call.method == "GET" else call.name.split("/")[-1]
        for call in recording.calls
        if call.name.endswith(("jc24972", "disable", "enable")) and call.method != "PUT"
    ]
    assert states == ["Enabled", "disable", "Disabled", "enable", "Enabled", "jc24972"]
    for recording in RECORDINGS:
        times = [call.routed_at for call in recording.calls]
        assert times == sorted(times), recording.name


def test_the_comparison_finds_each_kind_of_difference() -> None:
    recorded = {"properties": {"state": "enabled", "tags": {"a": "b"}}, "nextLink": None}
    assert not answer_differences(recorded, 200, httpx.Response(200, json=recorded))
    answer = {"properties": {"state": "Enabled", "extra": 1}, "nextLink": None}
    found = answer_differences(recorded, 200, httpx.Response(200, json=answer))
    assert found == [
        "properties.extra: not in the recorded answer",
        "properties.tags: missing",
        "properties.state: 'Enabled', recorded 'enabled'",
    ]
    assert answer_differences(None, 200, httpx.Response(201)) == ["status 201, recorded 200"]
    assert answer_differences(None, 200, httpx.Response(200, json={})) == [
        "a body, recorded none: b'{}'"
    ]


class Replay:
    """One recording replayed in a subscription of its own."""

    def __init__(self, recording: Recording, host: Service) -> None:
        self.recording, self.host = recording, host
        self.subscription = str(uuid.uuid4())
        self.client = httpx.Client(
            base_url=host.base_url, headers={"x-functions-key": host.key}, timeout=10.0
        )

    def send(self, call: RecordedCall) -> httpx.Response:
        body = _stand_in_certificates(_later_end_times(call.request), call.response)
        headers = {}
        if "Content-Type" in call.request_headers:
            headers["Content-Type"] = call.request_headers["Content-Type"]
        return self.client.request(
            call.method,
            self._here(call.uri),
            content=json.dumps(body) if body is not None else None,
            headers=headers,
        )

    def expected(self, call: RecordedCall) -> Any:
        return _later_end_times(json.loads(self._here(json.dumps(call.response))))

    def create_collections_that_existed_before(self) -> None:
        created = {call.uri.split("?")[0] for call in self.recording.calls if call.method == "PUT"}
        listed = [
            item
            for call in self.recording.calls
            for item in (call.response or {}).get("value", [])
            if item.get("type") == "Microsoft.Scheduler/jobCollections"
        ]
        for collection in listed:
            if collection["id"] in created:
                continue
            body = {key: collection[key] for key in ("location", "tags", "properties") if key in collection}
            answer = self.client.put(self._here(collection["id"]), params={"api-version": "2016-03-01"}, json=body)
            assert answer.status_code in (200, 201), answer.text
            created.add(collection["id"])

    def _here(self, text: str) -> str:
        return text.replace(self.recording.subscription, self.subscription)


def answer_differences(expected: Any, status: int, answer: httpx.Response) -> list[str]:
    if answer.status_code != status:
        return [f"status {answer.status_code}, recorded {status}"] + (
            [answer.text[:300]] if answer.content else []
        )
    if expected is None:
        return [f"a body, recorded none: {answer.content[:200]!r}"] if answer.content else []
    return _differences(expected, answer.json(), "")


def _differences(expected: Any, actual: Any, path: str) -> list[str]:
    here = path.lstrip(".")
    if here in CLOCK_OR_IDENTITY:
        return [] if isinstance(actual, str) and actual else [f"{here}: missing its value"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{here}: {actual!r}, recorded an object"]
        found = [f"{path}.{key}".lstrip(".") + ": not in the recorded answer"
                 for key in actual.keys() - expected.keys()]  # fmt: skip
        found += [f"{path}.{key}".lstrip(".") + ": missing" for key in expected.keys() - actual.keys()]
        for key in expected.keys() & actual.keys():
            found += _differences(expected[key], actual[key], f"{path}.{key}")
        return found
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{here}: {json.dumps(actual)[:300]}, recorded {json.dumps(expected)[:300]}"]
        return [problem for mine, theirs in zip(expected, actual, strict=True)
                for problem in _differences(mine, theirs, path)]  # fmt: skip
    if expected != actual or type(expected) is not type(actual):
        return [f"{here}: {actual!r}, recorded {expected!r}"]
    return []


def _later_end_times(body: Any) -> Any:
    if isinstance(body, dict):
        return {key: _later(value) if key == "endTime" else _later_end_times(value)
                for key, value in body.items()}  # fmt: skip
    if isinstance(body, list):
        return [_later_end_times(item) for item in body]
    return body


def _later(end_time: str) -> str:
    year = int(end_time[:4])
    return f"{year + END_TIME_YEARS_LATER}{end_time[4:]}"


def _stand_in_certificates(body: Any, recorded_answer: Any) -> Any:
    """The scrubbed pfx replaced by one with the recorded subject, expiry and password."""
    authentication = ((body or {}).get("properties", {}).get("action", {})
                      .get("request", {}).get("authentication", {}))  # fmt: skip
    if authentication.get("type") != "ClientCertificate":
        return body
    shown = recorded_answer["properties"]["action"]["request"]["authentication"]
    pfx, _ = made_pfx(
        authentication["password"],
        subject=shown["certificateSubjectName"].removeprefix("CN="),
        expires=datetime.fromisoformat(shown["certificateExpiration"]),
    )
    authentication["pfx"] = pfx
    return body
