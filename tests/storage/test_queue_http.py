"""The app's queues over plain HTTP (QueueHttp), on Azurite, beside the SDK's QueueClient: each
call answers as the SDK's does, and either reads what the other wrote, byte for byte."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.queue import (
    BinaryBase64DecodePolicy,
    BinaryBase64EncodePolicy,
    QueueClient,
    QueueMessage,
    TextBase64DecodePolicy,
    TextBase64EncodePolicy,
)

from shared.settings import SettingError
from shared.storage.clients import queue_from_connection_string
from shared.storage.queue_http import QueueHttp
from shared.storage.storage_http import QueueSharedKeyLite, RequestSent, StorageEndpoint

pytestmark = pytest.mark.services

Clients = tuple[QueueHttp, QueueClient]
TEXT = 'attempt 1 of "job-7" <at> 12:00 & after: é ✓'


@pytest.fixture
def queue_name() -> str:
    return f"http-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def plain(storage: str, queue_name: str) -> Clients:
    """Both clients of one new queue, neither encoding its messages."""
    http = queue_from_connection_string(storage, queue_name)
    http.create_queue()
    return http, QueueClient.from_connection_string(storage, queue_name)


@pytest.fixture
def base64(storage: str, queue_name: str) -> Clients:
    """Both clients of one new queue, both writing and reading base64 (as the app's queue)."""
    policies: dict[str, Any] = {"message_encode_policy": TextBase64EncodePolicy(),
                                "message_decode_policy": TextBase64DecodePolicy()}  # fmt: skip
    http = queue_from_connection_string(storage, queue_name, **policies)
    http.create_queue()
    return http, QueueClient.from_connection_string(storage, queue_name, **policies)


def test_the_client_built_from_a_connection_string_is_the_plain_http_one(plain: Clients) -> None:
    assert isinstance(plain[0], QueueHttp)
    assert plain[0].url == plain[1].url and plain[0].queue_name == plain[1].queue_name


@pytest.mark.parametrize("encoding", ["plain", "base64"])
@pytest.mark.parametrize(("writer", "reader"), [(0, 1), (1, 0), (0, 0)], ids=["http-to-sdk", "sdk-to-http", "http-to-http"])
def test_a_message_written_by_either_client_is_read_by_the_other(request: pytest.FixtureRequest, encoding: str, writer: int, reader: int) -> None:
    clients: Clients = request.getfixturevalue(encoding)
    sent = clients[writer].send_message(TEXT)
    [received] = list(clients[reader].receive_messages())
    assert (received.id, received.content, received.dequeue_count) == (sent.id, TEXT, 1)
    assert received.inserted_on == sent.inserted_on and received.expires_on == sent.expires_on
    clients[writer].delete_message(received)  # the reader's receipt serves the writer
    assert clients[reader].peek_messages() == []


def test_base64_puts_the_same_text_on_the_wire_as_the_sdk(storage: str, base64: Clients) -> None:
    """The Functions host reads the executions queue's messages as base64."""
    http, sdk = base64
    http.send_message(TEXT)
    sdk.send_message(TEXT)
    undecoded = QueueClient.from_connection_string(storage, http.queue_name)
    on_the_wire = [message.content for message in undecoded.peek_messages(max_messages=32)]
    assert on_the_wire == [TextBase64EncodePolicy().encode(TEXT)] * 2


def test_without_a_decode_policy_the_text_comes_as_stored(storage: str, queue_name: str) -> None:
    """As the app's executions queue reads it (dispatch decodes the base64 itself)."""
    writer = queue_from_connection_string(storage, queue_name, message_encode_policy=TextBase64EncodePolicy())
    writer.create_queue()
    writer.send_message(TEXT)
    [peeked] = writer.peek_messages(max_messages=32)
    assert peeked.content == TextBase64EncodePolicy().encode(TEXT)


def test_binary_policies_carry_bytes(storage: str, queue_name: str) -> None:
    policies: dict[str, Any] = {"message_encode_policy": BinaryBase64EncodePolicy(),
                                "message_decode_policy": BinaryBase64DecodePolicy()}  # fmt: skip
    http = queue_from_connection_string(storage, queue_name, **policies)
    http.create_queue()
    http.send_message(b"\x00\xff binary")
    assert [m.content for m in QueueClient.from_connection_string(storage, queue_name, **policies).peek_messages()] == [b"\x00\xff binary"]
    assert [m.content for m in http.receive_messages()] == [b"\x00\xff binary"]


def test_without_an_encode_policy_bytes_are_refused_as_by_the_sdk(plain: Clients) -> None:
    for client in plain:
        with pytest.raises(TypeError, match="must not be bytes"):
            client.send_message(b"raw")


def test_the_answers_have_the_sdks_shape(plain: Clients) -> None:
    http, sdk = plain
    answers = {}
    for name, client in (("http", http), ("sdk", sdk)):
        sent = client.send_message(TEXT, visibility_timeout=0, time_to_live=3600)
        peeked = client.peek_messages(max_messages=32)[-1]
        [received] = [m for m in client.receive_messages(messages_per_page=32) if m.id == sent.id]
        answers[name] = [sent, peeked, received]
    for ours, theirs in zip(answers["http"], answers["sdk"], strict=True):
        assert type(ours) is type(theirs) is QueueMessage
        shape = {name: type(value) for name, value in vars(theirs).items()}
        assert {name: type(value) for name, value in vars(ours).items()} == shape
    sent, peeked, received = answers["http"]
    assert sent.expires_on - sent.inserted_on == timedelta(hours=1)
    assert (peeked.pop_receipt, peeked.next_visible_on, peeked.dequeue_count) == (None, None, 0)
    assert received.next_visible_on - received.inserted_on >= timedelta(seconds=29)  # the default hold
    assert http.get_queue_properties().approximate_message_count == 2


def test_a_hidden_message_shows_when_its_visibility_timeout_ends(plain: Clients) -> None:
    http, _ = plain
    sent = http.send_message(TEXT, visibility_timeout=2)
    assert sent.next_visible_on - sent.inserted_on == timedelta(seconds=2)
    assert http.peek_messages() == [] and list(http.receive_messages()) == []
    time.sleep(3)
    assert [m.id for m in http.receive_messages()] == [sent.id]


def test_a_message_past_its_time_to_live_is_gone(plain: Clients) -> None:
    http, _ = plain
    sent = http.send_message(TEXT, time_to_live=1)
    assert sent.expires_on - sent.inserted_on == timedelta(seconds=1)
    time.sleep(2.5)
    assert http.peek_messages() == []


def test_receiving_hides_a_message_and_an_update_moves_its_receipt(plain: Clients) -> None:
    http, sdk = plain
    http.send_message(TEXT)
    [held] = list(http.receive_messages(visibility_timeout=30))
    assert list(sdk.receive_messages()) == []  # hidden from the others
    renewed = http.update_message(held, visibility_timeout=30)
    assert renewed.pop_receipt != held.pop_receipt and renewed.content == TEXT
    assert (renewed.id, renewed.dequeue_count, renewed.inserted_on) == (held.id, 1, held.inserted_on)
    refusals = []
    for client in (http, sdk):  # with the receipt it had before
        with pytest.raises(HttpResponseError) as refused:
            client.delete_message(held.id, held.pop_receipt)
        refusals.append((type(refused.value), refused.value.status_code))
    assert refusals[0] == refusals[1]
    shown = sdk.update_message(renewed.id, renewed.pop_receipt, "changed", visibility_timeout=0)
    [again] = list(http.receive_messages())
    assert (again.content, again.dequeue_count) == ("changed", 2)
    changed = http.update_message(again.id, again.pop_receipt, "by http", visibility_timeout=0)
    assert changed.pop_receipt not in (shown.pop_receipt, again.pop_receipt)
    assert [m.content for m in sdk.receive_messages()] == ["by http"]


def test_pages_of_received_messages_as_the_sdk_fetches_them(plain: Clients) -> None:
    http, _ = plain
    for n in range(7):
        http.send_message(f"m{n}")
    first = next(http.receive_messages(messages_per_page=3, visibility_timeout=1).by_page())
    assert len(list(first)) == 3
    time.sleep(1.5)
    assert len(list(http.receive_messages(messages_per_page=3, max_messages=5, visibility_timeout=1))) == 5
    time.sleep(1.5)
    assert sorted(m.content for m in http.receive_messages(messages_per_page=3)) == [f"m{n}" for n in range(7)]
    with pytest.raises(ValueError, match="max_messages must be greater"):
        http.receive_messages(messages_per_page=3, max_messages=2)
    with pytest.raises(ValueError, match="between 1 and 32"):
        http.peek_messages(max_messages=33)


def test_a_missing_pop_receipt_is_refused_before_any_request(plain: Clients) -> None:
    for client in plain:
        with pytest.raises(ValueError, match="pop_receipt must be present"):
            client.delete_message("some-id")
        with pytest.raises(ValueError, match="pop_receipt must be present"):
            client.update_message("some-id", visibility_timeout=0)


def test_a_missing_queue_raises_not_found_from_every_call(storage: str) -> None:
    missing = queue_from_connection_string(storage, f"missing-{uuid.uuid4().hex[:8]}")
    calls: list[Callable[[], object]] = [
        missing.get_queue_properties, lambda: missing.send_message(TEXT), missing.peek_messages,
        lambda: list(missing.receive_messages()), lambda: missing.delete_message("id", "receipt"),
        lambda: missing.update_message("id", "receipt", visibility_timeout=0),
    ]  # fmt: skip
    for call in calls:
        with pytest.raises(ResourceNotFoundError) as raised:
            call()
        assert raised.value.status_code == 404
    with pytest.raises(ResourceNotFoundError, match="queue does not exist") as raised:
        missing.get_queue_properties()
    assert raised.value.error_code == "QueueNotFound"  # type: ignore[attr-defined]


def test_creating_a_queue_twice_is_refused_as_by_the_sdk(storage: str, queue_name: str) -> None:
    http = queue_from_connection_string(storage, queue_name)
    http.create_queue(metadata={"owner": "scheduler"})
    for client in (http, QueueClient.from_connection_string(storage, queue_name)):
        with pytest.raises(ResourceExistsError):
            client.create_queue(metadata={"owner": "scheduler"})
    properties = http.get_queue_properties()
    assert (properties.name, properties.metadata, properties.approximate_message_count) == (queue_name, {"owner": "scheduler"}, 0)


def test_the_request_hook_sees_every_request(storage: str, queue_name: str) -> None:
    seen: list[tuple[str, str]] = []
    http = queue_from_connection_string(storage, queue_name, raw_request_hook=lambda sent: seen.append((sent.http_request.method, sent.http_request.url)))
    http.create_queue()
    http.send_message(TEXT)
    list(http.receive_messages())
    assert [method for method, _ in seen] == ["PUT", "POST", "GET", "GET"]  # the last: an empty page
    assert all(url.startswith(http.url) for _, url in seen)


def test_queue_options_the_plain_client_does_not_take_are_refused(storage: str) -> None:
    with pytest.raises(TypeError, match="logging_enable"):
        queue_from_connection_string(storage, "executions", logging_enable=True)
    with pytest.raises(SettingError, match="AccountKey"):
        queue_from_connection_string("QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;SharedAccessSignature=sv=x&sig=y", "executions")


class _Busy(BaseHTTPRequestHandler):
    """Answers 503 (the service is busy) to the first request, then 404 with the Queue service's
    XML error."""

    answered = 0

    def do_GET(self) -> None:
        type(self).answered += 1
        if type(self).answered == 1:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"<?xml version='1.0'?><Error><Code>QueueNotFound</Code><Message>gone</Message></Error>"
        self.send_response(404)
        self.send_header("x-ms-error-code", "QueueNotFound")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def busy_service() -> Iterator[str]:
    _Busy.answered = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/devstoreaccount1"
    server.shutdown()
    server.server_close()


def test_a_busy_answer_is_tried_again_and_the_hook_sees_each_try(busy_service: str) -> None:
    tries: list[RequestSent] = []
    key = TextBase64EncodePolicy().encode("not a real key")
    endpoint = StorageEndpoint(busy_service, QueueSharedKeyLite("devstoreaccount1", key), on_request=tries.append)
    with pytest.raises(ResourceNotFoundError, match="gone"):
        QueueHttp(endpoint, "executions").get_queue_properties()
    assert [sent.url for sent in tries] == [f"{busy_service}/executions?comp=metadata"] * 2
    assert tries[0].headers["Authorization"].startswith("SharedKeyLite devstoreaccount1:")
