"""A small AMQP 1.0 peer that speaks enough of Service Bus for the unmodified azure-servicebus SDK:
the local stand-in for a Service Bus namespace (`make run SERVICE_BUS=1`) and the tests' broker.

Microsoft's Service Bus emulator needs Docker; this needs only `python-qpid-proton`
(devhost/service-bus-requirements.txt). It does what the service does on the path a sender
takes: SASL ANONYMOUS, then a claims-based security (CBS) `put-token` whose SharedAccessSignature
it verifies against the keys it was given, then a sender link to a queue or topic (with a fixed
list of entities, others are refused with `amqp:not-found`; without one, every name is taken as
an entity that exists), refusing unauthorised ones with `amqp:unauthorized-access`. It accepts
every message and records it with its properties, as a receiver would see it, and hands it to
`on_message` (the local host logs it).

Proton is not thread-safe: the peer runs in a thread of its own, and other threads read only the
records it keeps under a lock.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote_plus, urlsplit

from proton import Condition, Delivery, Handler, Message, Terminus
from proton.reactor import ApplicationEvent, Container, EventInjector

from devhost.azurite import free_port

# The key Microsoft's emulator is configured with by default, so that a job written for one
# works against the other unchanged.
EMULATOR_KEY_NAME, EMULATOR_KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"
# The emulator's port: a connection string with `UseDevelopmentEmulator=true` and no port uses it.
AMQP_PORT = 5672

_CBS = "$cbs"
_SAS_PREFIX = "SharedAccessSignature "


@dataclass(frozen=True)
class Received:
    """One message as the broker took it off the wire."""

    entity: str
    body: Any
    properties: dict[str, Any]
    application_properties: dict[str, Any]
    annotations: dict[str, Any]
    durable: bool


@dataclass
class _Session:
    """What the broker knows about one client connection."""

    replies: Any = None  # the link CBS replies go out on
    authorised: set[str] = field(default_factory=set)  # entity paths; "" is the whole namespace


class AmqpBroker:
    """Start with `start()`, stop with `stop()`; `endpoint` is what the app's setting takes.

    `queues` and `topics` are the entities it knows; with neither, any name is one.
    """

    def __init__(
        self,
        keys: dict[str, str],
        queues: Iterable[str] = (),
        topics: Iterable[str] = (),
        *,
        port: int = 0,
        on_message: Callable[[Received], None] | None = None,
    ) -> None:
        self.keys = dict(keys)
        self.entities: dict[str, str] | None = {name.lower(): "queue" for name in queues} | {
            name.lower(): "topic" for name in topics
        } or None
        self.port = port or free_port()
        self._on_message = on_message
        self._received: list[Received] = []
        self._sender_links = 0
        self._token_requests = 0
        self._changed = threading.Condition()
        self._injector = EventInjector()
        self._container = Container(_Peer(self))
        self._container.selectable(self._injector)
        self._thread = threading.Thread(target=self._container.run, name="amqp-broker", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"sb://127.0.0.1:{self.port}"

    def start(self) -> AmqpBroker:
        self._container.listen(f"127.0.0.1:{self.port}")
        self._thread.start()
        wait_for_port(self.port)
        return self

    def stop(self) -> None:
        self._injector.trigger(ApplicationEvent("stop"))
        self._thread.join(timeout=10)

    # What the tests read.
    def received(self, entity: str | None = None) -> list[Received]:
        with self._changed:
            return [r for r in self._received if entity is None or r.entity == entity.lower()]

    def wait_for(
        self, count: int, entity: str | None = None, timeout: float = 10
    ) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [r for r in self._received if entity is None or r.entity == entity.lower()]
                left = deadline - time.monotonic()
                if len(found) >= count or left <= 0:
                    return found
                self._changed.wait(left)

    @property
    def sender_links(self) -> int:
        """Sender links ever attached to an entity: one per cached sender, if the app reuses."""
        with self._changed:
            return self._sender_links

    @property
    def token_requests(self) -> int:
        with self._changed:
            return self._token_requests

    # Called on the broker's thread.
    def _record(self, received: Received) -> None:
        with self._changed:
            self._received.append(received)
            self._changed.notify_all()
        if self._on_message is not None:
            self._on_message(received)

    def _count_link(self) -> None:
        with self._changed:
            self._sender_links += 1

    def _count_token(self) -> None:
        with self._changed:
            self._token_requests += 1

    def _verify(self, token: str) -> str | None:
        """The entity path a valid SAS token grants ("" for the namespace), or None."""
        if not token.startswith(_SAS_PREFIX):
            return None
        fields = dict(parse_qsl(token[len(_SAS_PREFIX) :]))
        key = self.keys.get(fields.get("skn", ""))
        resource, expiry, signature = fields.get("sr"), fields.get("se"), fields.get("sig")
        if key is None or not resource or not expiry or not signature:
            return None
        signed = f"{quote_plus(resource)}\n{expiry}".encode()
        expected = base64.b64encode(hmac.new(key.encode(), signed, hashlib.sha256).digest())
        if not hmac.compare_digest(expected, signature.encode()):
            return None
        if not expiry.isdigit() or int(expiry) < time.time():
            return None
        return _entity_of(resource)


class _Peer(Handler):
    def __init__(self, broker: AmqpBroker) -> None:
        super().__init__()
        self._broker = broker
        self._sessions: dict[Any, _Session] = {}

    def on_stop(self, event: Any) -> None:
        self._broker._container.stop()

    def on_connection_remote_open(self, event: Any) -> None:
        self._sessions[event.connection] = _Session()
        event.connection.open()

    def on_connection_remote_close(self, event: Any) -> None:
        self._sessions.pop(event.connection, None)
        event.connection.close()

    def on_session_remote_open(self, event: Any) -> None:
        event.session.open()

    def on_session_remote_close(self, event: Any) -> None:
        event.session.close()

    def on_link_remote_close(self, event: Any) -> None:
        event.link.close()

    def on_link_remote_open(self, event: Any) -> None:
        link = event.link
        session = self._sessions.setdefault(event.connection, _Session())
        if link.is_sender:  # the client's receiver: only CBS replies flow this way
            if link.remote_source.address != _CBS:
                _refuse(link, "amqp:not-found", "this broker only sends CBS replies")
                return
            session.replies = link
            _accept(link)
            return
        address = link.remote_target.address or ""
        if address == _CBS:
            _accept(link)
            link.flow(100)
            return
        entity = _entity_of(address)
        known = self._broker.entities
        if known is not None and entity not in known:
            _refuse(link, "amqp:not-found", f"The messaging entity '{entity}' could not be found.")
        elif "" not in session.authorised and entity not in session.authorised:
            _refuse(link, "amqp:unauthorized-access", f"Unauthorized access to '{entity}'.")
        else:
            _accept(link)
            link.flow(1000)
            self._broker._count_link()

    def on_delivery(self, event: Any) -> None:
        link, delivery = event.link, event.delivery
        if link.is_sender:  # a CBS reply: sent pre-settled, nothing to do
            return
        if not delivery.readable or delivery.partial:
            return
        message = Message()
        message.decode(bytes(link.recv(delivery.pending)))  # copy out of proton's buffer
        link.advance()
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
        link.flow(1)
        if link.target.address == _CBS:
            self._put_token(event.connection, message)
        else:
            self._broker._record(_received(_entity_of(link.target.address), message))

    def _put_token(self, connection: Any, request: Message) -> None:
        self._broker._count_token()
        session = self._sessions.setdefault(connection, _Session())
        token = request.body if isinstance(request.body, str) else ""
        granted = self._broker._verify(token)
        if granted is None:
            status, description = 401, "InvalidSignature: the token's signature does not match."
        else:
            session.authorised.add(granted)
            status, description = 200, "OK"
        reply = Message(
            correlation_id=request.id,
            properties={"status-code": status, "status-description": description},
        )
        if session.replies is not None:
            _send(session.replies, reply)


def _send(link: Any, message: Message) -> None:
    delivery = link.delivery(str(time.monotonic_ns()).encode())
    link.send(message.encode())
    link.advance()
    delivery.settle()


def _accept(link: Any) -> None:
    link.source.copy(link.remote_source)
    link.target.copy(link.remote_target)
    link.open()


def _refuse(link: Any, name: str, description: str) -> None:
    """Attach with a null terminus, then detach with the error: how a broker says no."""
    if link.is_sender:
        link.target.copy(link.remote_target)
        link.source.type = Terminus.UNSPECIFIED
    else:
        link.source.copy(link.remote_source)
        link.target.type = Terminus.UNSPECIFIED
    link.open()
    link.condition = Condition(name, description)
    link.close()


def _entity_of(address: str) -> str:
    """`amqps://host:port/queue` or `sb://host/topic` → the entity path, lower case."""
    return urlsplit(address).path.strip("/").lower()


def _received(entity: str, message: Message) -> Received:
    body = message.body
    if isinstance(body, memoryview):
        body = bytes(body)
    properties = {
        "message_id": message.id,
        "correlation_id": message.correlation_id,
        # proton reads an absent content type as the symbol 'None'
        "content_type": None if message.content_type == "None" else str(message.content_type),
        "subject": message.subject,
        "reply_to": message.reply_to,
        "reply_to_group_id": message.reply_to_group_id,
        "to": message.address,
        "group_id": message.group_id,
        "ttl": message.ttl,
    }
    return Received(
        entity=entity,
        body=body,
        properties=properties,
        application_properties=dict(message.properties or {}),
        annotations={str(k): v for k, v in (message.annotations or {}).items()},
        durable=bool(message.durable),
    )


def wait_for_port(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
