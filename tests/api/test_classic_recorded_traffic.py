"""The classic API answers as the real one did: the legacy client's eight recorded sessions (2015,
tests/recordings/classic/) replayed call by call against a local host where nothing runs, every answer compared
with the recorded one (status, content type, and every XML element and JSON key with its value).

What differs by nature is compared for presence only: ETags, request and operation ids, a job's
next execution time (the recordings are from 2015). Our changes are finished before they are
answered, so an operation the recording polled while `InProgress` is `Succeeded` here.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest
import yaml

from tests.conftest import Service

RECORDINGS = sorted((Path(__file__).parent.parent / "recordings" / "classic").glob("*.yaml"))
RECORDED_HOST = "https://management.core.windows.net"
RECORDED_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
PRESENCE_ONLY = {"ETag", "ID", "nextExecutionTime"}


def interactions(recording: Path) -> list[dict[str, Any]]:
    return yaml.safe_load(recording.read_text())["interactions"]


def leaves(element: ElementTree.Element, path: str = "") -> list[tuple[str, str]]:
    """An XML document as (path, text) pairs, in document order; a nil element says so."""
    name = f"{path}/{element.tag.rsplit('}', 1)[-1]}"
    children = list(element)
    if not children:
        nil = element.get("{http://www.w3.org/2001/XMLSchema-instance}nil")
        text = "<nil>" if nil == "true" else (element.text or "")
        return [(name, "<present>" if name.rsplit("/", 1)[-1] in PRESENCE_ONLY else text)]
    return [leaf for child in children for leaf in leaves(child, name)]


def comparable_json(value: Any, name: str = "") -> Any:
    if isinstance(value, dict):
        return {key: comparable_json(item, key) for key, item in value.items()}
    if isinstance(value, list):
        return [comparable_json(item) for item in value]
    return "<present>" if name in PRESENCE_ONLY else value


def comparable(body: str, content_type: str) -> Any:
    if not body:
        return None
    if "xml" in content_type:
        return leaves(ElementTree.fromstring(body))
    return comparable_json(json.loads(body))


def recorded_cloud_service(body: str, name: str) -> str:
    """From a recorded listing of 70 cloud services, the one the session made, as its own list."""
    listing = ElementTree.fromstring(body)
    kept = [service for service in listing if service.findtext("{*}Name") == name]
    listing[:] = kept
    return ElementTree.tostring(listing, encoding="unicode")


@pytest.mark.parametrize("recording", RECORDINGS, ids=[path.name.split(".")[1] for path in RECORDINGS])
def test_each_recorded_call_is_answered_as_recorded(replay_host: Service, recording: Path) -> None:
    service = replay_host  # nothing runs there: a recorded job's counts stay as recorded
    subscription = str(uuid.uuid4())
    our_request_ids: dict[str, str] = {}  # recorded request id -> ours, for the polls
    made: list[str] = []  # the cloud services this session made
    with httpx.Client(headers={"x-functions-key": service.key}, timeout=10) as client:
        for number, interaction in enumerate(interactions(recording)):
            sent, recorded = interaction["request"], interaction["response"]
            path = sent["uri"].removeprefix(RECORDED_HOST).replace(RECORDED_SUBSCRIPTION, subscription)
            if "/operations/" in path:
                recorded_id = path.rsplit("/", 1)[-1]
                path = path.replace(recorded_id, our_request_ids[recorded_id])
            elif path.rsplit("/", 2)[-2] == "cloudservices" and sent["method"] == "PUT":
                made.append(path.rsplit("/", 1)[-1])
            headers = {name: values[0] for name, values in sent["headers"].items()
                       if name.lower() in {"content-type", "x-ms-version"}}  # fmt: skip
            answer = client.request(sent["method"], service.base_url + path, headers=headers, content=sent["body"] or b"")
            where = f"call {number}: {sent['method']} {path}"
            assert answer.status_code == recorded["status"]["code"], f"{where}: {answer.text}"
            recorded_headers = {name.lower(): values[0] for name, values in recorded["headers"].items()}
            if "x-ms-request-id" in recorded_headers:
                our_request_ids[recorded_headers["x-ms-request-id"]] = answer.headers["x-ms-request-id"]
            assert ("etag" in answer.headers) == ("etag" in recorded_headers), where
            body = recorded["body"]["string"]
            content_type = recorded_headers.get("content-type", "")
            if not body:
                assert not answer.content, where
                continue
            assert answer.headers["content-type"] == content_type, where
            if path.endswith("/cloudservices"):
                [name] = made
                body = recorded_cloud_service(body, name)
            if "<Status>InProgress</Status>" in body:
                body = body.replace("<Status>InProgress</Status>", "<Status>Succeeded</Status><HttpStatusCode>200</HttpStatusCode>")
            assert comparable(answer.text, content_type) == comparable(body, content_type), where
