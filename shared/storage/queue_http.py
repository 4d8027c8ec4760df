"""A queue of Queue Storage, spoken to over plain HTTP (`storage_http` says why): the calls of
the SDK's `QueueClient` this app and the local host make, with the same arguments, answers and
errors, so that their callers run on either (`QueueLike`).

The answers are the SDK's own models (QueueMessage, QueueProperties), so that a message received
here can be renewed or deleted by the SDK's client and the other way round (the local host hands
messages between processes as the SDK's QueueMessage). A message's text goes through the SDK's
encode and decode policies, as the SDK's client would pass it (`message_encode_policy`,
`message_decode_policy`; none by default): TextBase64EncodePolicy puts the same base64 on the
wire as the SDK does, which the Functions host reads.

The requests speak the Queue service's XML: `<QueueMessage><MessageText>` in, and
`<QueueMessagesList>` out. Times come back in RFC 1123 form, read as aware datetimes in UTC.

CPU per call against Azurite (time.process_time over 2 000 calls each, in two rounds; both
clients with TextBase64EncodePolicy and a request hook, as the app builds them; the SDK's on the
pooled transport of shared.transport), on the machine of bench/results/cpu.md:

| call                              | SDK QueueClient | QueueHttp  |
|-----------------------------------|-----------------|------------|
| send_message                      | 1.3 ms          | 0.46 ms    |
| receive_messages + delete_message | 3.0 ms          | 1.1-1.3 ms |

What is left is mostly urllib3 and http.client sending and reading the request; signing, the
query and the XML take about a seventh of it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote, urlencode
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from azure.core.exceptions import ResourceExistsError
from azure.core.paging import ItemPaged, PageIterator

from shared.storage.storage_http import Answer, StorageEndpoint, raise_for, with_status

# The SDK's models are imported where they are made: the Queue SDK is a tenth of a second of a
# cold start, and a first API request sends no message.
if TYPE_CHECKING:
    from azure.storage.queue import QueueMessage, QueueProperties

MOST_PER_CALL = 32  # messages the service hands out or shows in one call
_XML_BODY = {"Content-Type": "application/xml; charset=utf-8"}
# What a decode policy is shown as the answer: this module keeps none (the SDK's binary policy
# reads it only to name it in a DecodeError).
_NO_RESPONSE = SimpleNamespace(http_response=None)

MessageContent = str | bytes
"""A message's content: text, or bytes where an encode policy sends them (as base64)."""


class QueueLike(Protocol):
    """What the app and the local host call on one of the app's queues: the SDK's QueueClient,
    or QueueHttp."""

    queue_name: str

    def create_queue(self) -> None: ...
    def get_queue_properties(self) -> QueueProperties: ...
    def send_message(
        self,
        content: MessageContent,
        *,
        visibility_timeout: int | None = ...,
        time_to_live: int | None = ...,
    ) -> QueueMessage: ...
    def receive_messages(
        self,
        *,
        messages_per_page: int | None = ...,
        visibility_timeout: int | None = ...,
        max_messages: int | None = ...,
    ) -> ItemPaged[QueueMessage]: ...
    def peek_messages(self, max_messages: int | None = ...) -> list[QueueMessage]: ...
    def update_message(
        self,
        message: str | QueueMessage,
        pop_receipt: str | None = ...,
        content: MessageContent | None = ...,
        *,
        visibility_timeout: int | None = ...,
    ) -> QueueMessage: ...
    def delete_message(
        self, message: str | QueueMessage, pop_receipt: str | None = ...
    ) -> None: ...


class MessageEncoding(Protocol):
    """The part of the SDK's encode policies (TextBase64EncodePolicy, ...) a queue calls."""

    def encode(self, content: MessageContent) -> str: ...


class MessageDecoding(Protocol):
    """The part of the SDK's decode policies (TextBase64DecodePolicy, ...) a queue calls."""

    def decode(self, content: str, response: object) -> MessageContent: ...


class Base64Text:
    """Text messages sent as the base64 of their UTF-8, as the Functions host reads a queue by
    default (host.json's messageEncoding): what the SDK's TextBase64EncodePolicy does, without
    importing the Queue SDK for it."""

    def encode(self, content: MessageContent) -> str:
        if not isinstance(content, str):
            raise TypeError("Message content must be text for base 64 encoding.")
        return base64.b64encode(content.encode("utf-8")).decode("utf-8")


class QueueHttp:
    def __init__(
        self,
        endpoint: StorageEndpoint,
        queue_name: str,
        *,
        message_encode_policy: MessageEncoding | None = None,
        message_decode_policy: MessageDecoding | None = None,
    ) -> None:
        self._endpoint, self.queue_name = endpoint, queue_name
        self._path = endpoint.path(quote(queue_name))
        self._messages = f"{self._path}/messages"
        self.url = endpoint.absolute(self._path)
        self._encoding, self._decoding = message_encode_policy, message_decode_policy

    # --- the queue ---------------------------------------------------------------------

    def create_queue(
        self, *, metadata: Mapping[str, str] | None = None, timeout: int | None = None
    ) -> None:
        """Create the queue; ResourceExistsError if it is there already (as with the SDK)."""
        headers = {f"x-ms-meta-{name}": value for name, value in (metadata or {}).items()}
        answer = self._send("PUT", self._path, _query(timeout=timeout), headers=headers)
        if answer.status == 204:  # the service's word for "already there, with this metadata"
            exists = ResourceExistsError(
                message="Queue already exists\nErrorCode:QueueAlreadyExists"
            )
            exists.error_code = "QueueAlreadyExists"  # type: ignore[attr-defined]
            raise with_status(exists, 204)
        raise_for(answer)

    def get_queue_properties(self, *, timeout: int | None = None) -> QueueProperties:
        answer = self._send("GET", self._path, _query(comp="metadata", timeout=timeout))
        raise_for(answer)
        from azure.storage.queue import QueueProperties  # noqa: PLC0415 (see the imports)

        count = answer.headers.get("x-ms-approximate-messages-count")
        metadata = {
            name[len("x-ms-meta-") :]: value
            for name, value in answer.headers.items()
            if name.lower().startswith("x-ms-meta-")
        }
        properties = QueueProperties(
            metadata=metadata,
            **{"x-ms-approximate-messages-count": None if count is None else int(count)},
        )
        properties.name = self.queue_name
        return properties

    # --- messages ----------------------------------------------------------------------

    def send_message(
        self,
        content: MessageContent,
        *,
        visibility_timeout: int | None = None,
        time_to_live: int | None = None,
        timeout: int | None = None,
    ) -> QueueMessage:
        """Put a message at the back of the queue, hidden for `visibility_timeout` seconds,
        kept `time_to_live` seconds (-1: until taken); it comes back with its id, pop receipt
        and times, and `content` as given."""
        query = _query(
            visibilitytimeout=visibility_timeout, messagettl=time_to_live, timeout=timeout
        )
        answer = self._send(
            "POST",
            self._messages,
            query,
            headers=_XML_BODY,
            body=_message_body(self._encoded(content)),
        )
        raise_for(answer)
        sent = ElementTree.fromstring(answer.body).find("QueueMessage")
        if sent is None:
            raise ValueError("the queue service answered a sent message without it")
        from azure.storage.queue import QueueMessage  # noqa: PLC0415 (see the imports)

        return QueueMessage(
            content=content,
            id=sent.findtext("MessageId"),
            inserted_on=_moment(sent.findtext("InsertionTime")),
            expires_on=_moment(sent.findtext("ExpirationTime")),
            pop_receipt=sent.findtext("PopReceipt"),
            next_visible_on=_moment(sent.findtext("TimeNextVisible")),
        )

    def receive_messages(
        self,
        *,
        messages_per_page: int | None = None,
        visibility_timeout: int | None = None,
        max_messages: int | None = None,
        timeout: int | None = None,
    ) -> ItemPaged[QueueMessage]:
        """Take messages from the front of the queue, hidden from others for
        `visibility_timeout` seconds (the service's default: 30): a page of up to
        `messages_per_page` (1 if not given) per request, fetched as they are read, until the
        queue has none visible or `max_messages` were taken. `by_page()` gives the pages."""
        per_page, most = messages_per_page, max_messages
        if per_page is not None and most is not None and most < per_page:
            raise ValueError("max_messages must be greater or equal to messages_per_page")

        def receive(count: int | None) -> list[QueueMessage]:
            query = _query(
                numofmessages=count, visibilitytimeout=visibility_timeout, timeout=timeout
            )
            return self._listed(self._send("GET", self._messages, query))

        return ItemPaged(
            receive, messages_per_page, max_messages, page_iterator_class=_ReceivedPages
        )

    def peek_messages(
        self, max_messages: int | None = None, *, timeout: int | None = None
    ) -> list[QueueMessage]:
        """The first visible messages (up to `max_messages`, by default 1), left as they are:
        no pop receipt, no change of their visibility or dequeue count."""
        if max_messages and not 1 <= max_messages <= MOST_PER_CALL:
            raise ValueError("Number of messages to peek should be between 1 and 32")
        query = _query(numofmessages=max_messages, peekonly="true", timeout=timeout)
        return self._listed(self._send("GET", self._messages, query))

    def update_message(
        self,
        message: str | QueueMessage,
        pop_receipt: str | None = None,
        content: MessageContent | None = None,
        *,
        visibility_timeout: int | None = None,
        timeout: int | None = None,
    ) -> QueueMessage:
        """Hide a received message for `visibility_timeout` more seconds (0: show it now),
        giving it `content` if given; as the SDK, a message given as a QueueMessage keeps
        (and sends again) its own content. Its new pop receipt comes back with it."""
        if isinstance(message, str):
            message_id, text, receipt = message, content, pop_receipt
            inserted_on = expires_on = dequeue_count = None
        else:
            message_id, text = message.id, content or message.content
            receipt = pop_receipt or message.pop_receipt
            inserted_on, expires_on = message.inserted_on, message.expires_on
            dequeue_count = message.dequeue_count
        if receipt is None:
            raise ValueError("pop_receipt must be present")
        query = _query(
            popreceipt=receipt, visibilitytimeout=visibility_timeout or 0, timeout=timeout
        )
        path = f"{self._messages}/{quote(message_id)}"
        if text is None:
            answer = self._send("PUT", path, query)
        else:
            body = _message_body(self._encoded(text))
            answer = self._send("PUT", path, query, headers=_XML_BODY, body=body)
        raise_for(answer)
        from azure.storage.queue import QueueMessage  # noqa: PLC0415 (see the imports)

        return QueueMessage(
            content=text,
            id=message_id,
            inserted_on=inserted_on,
            expires_on=expires_on,
            dequeue_count=dequeue_count,
            pop_receipt=answer.headers.get("x-ms-popreceipt"),
            next_visible_on=_moment(answer.headers.get("x-ms-time-next-visible")),
        )

    def delete_message(
        self,
        message: str | QueueMessage,
        pop_receipt: str | None = None,
        *,
        timeout: int | None = None,
    ) -> None:
        """Delete a received message by its id and latest pop receipt (or the message itself);
        ResourceNotFoundError if it is gone, or the receipt is no longer its latest."""
        if isinstance(message, str):
            message_id, receipt = message, pop_receipt
        else:
            message_id, receipt = message.id, pop_receipt or message.pop_receipt
        if receipt is None:
            raise ValueError("pop_receipt must be present")
        path = f"{self._messages}/{quote(message_id)}"
        raise_for(self._send("DELETE", path, _query(popreceipt=receipt, timeout=timeout)))

    # --- the wire ----------------------------------------------------------------------

    def _encoded(self, content: MessageContent) -> MessageContent:
        # As the SDK's policies do: nothing to encode in an empty message; and without one,
        # text goes as it is and bytes are refused (its NoEncodePolicy).
        if not content:
            return content
        if self._encoding is not None:
            return self._encoding.encode(content)
        if isinstance(content, bytes):
            raise TypeError(
                "Message content must not be bytes. Use the BinaryBase64EncodePolicy to send bytes."
            )
        return content

    def _decoded(self, text: str | None) -> MessageContent | None:
        if not text or self._decoding is None:
            return text
        return self._decoding.decode(text, _NO_RESPONSE)

    def _listed(self, answer: Answer) -> list[QueueMessage]:
        """The messages of a QueueMessagesList, their text decoded."""
        raise_for(answer)
        from azure.storage.queue import QueueMessage  # noqa: PLC0415 (see the imports)

        found = []
        for listed in ElementTree.fromstring(answer.body).iter("QueueMessage"):
            text = listed.findtext("MessageText")
            found.append(
                QueueMessage(
                    content=self._decoded(text),
                    id=listed.findtext("MessageId"),
                    inserted_on=_moment(listed.findtext("InsertionTime")),
                    expires_on=_moment(listed.findtext("ExpirationTime")),
                    dequeue_count=_count(listed.findtext("DequeueCount")),
                    pop_receipt=listed.findtext("PopReceipt"),
                    next_visible_on=_moment(listed.findtext("TimeNextVisible")),
                )
            )
        return found

    def _send(
        self,
        method: str,
        path: str,
        query: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> Answer:
        return self._endpoint.send(method, path, query=query, headers=headers, body=body)


class _ReceivedPages(PageIterator["QueueMessage"]):
    """Pages of received messages, as the SDK's: each request a page, until one comes back
    empty or `max_messages` were taken."""

    def __init__(
        self,
        receive: Callable[[int | None], list[QueueMessage]],
        per_page: int | None,
        max_messages: int | None,
        continuation_token: str | None = None,
    ) -> None:
        if continuation_token is not None:
            raise ValueError("This operation does not support continuation token")
        super().__init__(self._next_page, self._extract)
        self._receive, self._per_page, self._left = receive, per_page, max_messages

    def _next_page(self, _token: str | None) -> list[QueueMessage]:
        count = self._per_page
        if self._left is not None:
            if self._left < 1:
                raise StopIteration("End of paging")
            count = min(count or 1, self._left)
        return self._receive(count)

    def _extract(self, page: list[QueueMessage]) -> tuple[str, Iterator[QueueMessage]]:
        if not page:  # there is no continuation: an empty page ends it
            raise StopIteration("End of paging")
        if self._left is not None:
            self._left -= len(page)
        return "more", iter(page)


def _query(**parameters: str | int | None) -> str:
    """A query string of the parameters given (None: left out), in the order given."""
    return urlencode({name: value for name, value in parameters.items() if value is not None})


def _message_body(text: MessageContent | None) -> bytes:
    inner = "" if text is None else f"<MessageText>{escape(str(text))}</MessageText>"
    return (
        f"<?xml version='1.0' encoding='utf-8'?>\n<QueueMessage>{inner}</QueueMessage>"
    ).encode()


def _moment(text: str | None) -> datetime | None:
    return parsedate_to_datetime(text) if text else None


def _count(text: str | None) -> int | None:
    return int(text) if text else None
