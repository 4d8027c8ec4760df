"""The ServiceBusQueue and ServiceBusTopic actions: one message to an entity of a namespace.

Opening a sender costs about half a second (a connection, a CBS token exchange, a link), so
senders are kept and reused per namespace, key and entity. The SDK's synchronous client blocks
without limit on a peer that accepts TCP and never answers (its SASL handshake reads with no
timeout), while the asynchronous one can be cancelled. So every sender lives on one event loop,
in a thread of its own, and each send runs there under a deadline; a sender that failed is closed
and opened afresh by the next send. `transportType` is ignored: NetMessaging is a .NET-only
protocol, and everything goes over AMQP.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from azure.core.credentials import AzureNamedKeyCredential
from azure.servicebus import ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient, ServiceBusSender
from azure.servicebus.amqp import AmqpMessageHeader
from azure.servicebus.exceptions import (
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusConnectionError,
    ServiceBusError,
)

from shared.actions import Performed
from shared.actions.clients import ClientPool
from shared.actions.http import IDENTITY_PREFIX, identity_headers
from shared.domain.attempts import Attempt, execution_id
from shared.domain.ids import JobId
from shared.domain.job_definition import (
    ActionName,
    ActionType,
    BrokeredMessageProperties,
    ErrorAction,
    ServiceBusActionMessage,
    read_duration,
)
from shared.settings import Settings

SEND_TIMEOUT_S = 60  # the same bound as an HTTP action's, opening the sender included
_CLOSE_TIMEOUT_S = 5
_MOST_SENDERS = 64
_VIA_PARTITION_KEY = b"x-opt-via-partition-key"
_PROPERTY_NAMES = {  # brokeredMessageProperties → the SDK's ServiceBusMessage keywords
    "content_type": "content_type",
    "correlation_id": "correlation_id",
    "label": "subject",
    "message_id": "message_id",
    "partition_key": "partition_key",
    "reply_to": "reply_to",
    "reply_to_session_id": "reply_to_session_id",
    "session_id": "session_id",
    "to": "to",
}


def brokered_message(
    wanted: ServiceBusActionMessage, job: JobId, attempt: Attempt
) -> ServiceBusMessage:
    """The message a Service Bus action sends: its body, mapped properties and custom ones.

    The occurrence's identity travels as application properties named like the HTTP action's
    headers, and, unless the job sets its own, as the message id: an entity with duplicate
    detection then drops a duplicate delivery by itself.
    """
    given = wanted.brokered_message_properties or BrokeredMessageProperties()
    keywords: dict[str, Any] = {
        keyword: value
        for name, keyword in _PROPERTY_NAMES.items()
        if (value := getattr(given, name))
    }
    # An errorAction's message is another message than the main action's: its own id.
    own_id = execution_id(job, attempt)
    if attempt.action is ActionName.ERROR_ACTION:
        own_id += "-error"
    keywords.setdefault("message_id", own_id)
    if given.scheduled_enqueue_time_utc:
        keywords["scheduled_enqueue_time_utc"] = given.scheduled_enqueue_time_utc
    if given.time_to_live:
        keywords["time_to_live"] = read_duration(given.time_to_live)
    properties: dict[str | bytes, Any] = {
        name: value
        for name, value in (wanted.custom_message_properties or {}).items()
        if not name.lower().startswith(IDENTITY_PREFIX)
    }
    # .items(): the SDK's keys may be bytes too, which a dict[str, str] does not take as a key.
    properties.update(identity_headers(job, attempt).items())
    # session_id first: the SDK checks a partition key against it
    session_id = keywords.pop("session_id", None)
    message = ServiceBusMessage(
        wanted.message or "",
        session_id=session_id,
        application_properties=properties,
        **keywords,
    )
    amqp = message.raw_amqp_message
    if given.via_partition_key:
        amqp.annotations = {
            **(amqp.annotations or {}),
            _VIA_PARTITION_KEY: given.via_partition_key,
        }
    if given.force_persistence is not None:
        header = amqp.header
        if header is None:  # a new message has one; made as the SDK makes a missing one
            header = amqp.header = AmqpMessageHeader()
        header.durable = given.force_persistence
    return message


@dataclass(frozen=True)
class _Address:
    host: str
    tls: bool
    key_name: str
    key_digest: str
    topic: bool
    entity: str


@dataclass
class _Sender:
    client: ServiceBusClient
    sender: ServiceBusSender
    closing: set[asyncio.Future[None]]  # closes under way, held: the loop keeps weak references
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)

    def close(self) -> None:
        """Close it on the senders' loop (the pool calls this there, evicting it)."""
        closing = asyncio.ensure_future(_close(self))
        self.closing.add(closing)
        closing.add_done_callback(self.closing.discard)


class ServiceBusActions:
    """Sends ServiceBusQueue and ServiceBusTopic actions through senders it keeps open."""

    def __init__(self, settings: Settings, timeout: float = SEND_TIMEOUT_S) -> None:
        self._settings, self._timeout = settings, timeout
        # Touched on the senders' loop only.
        self._senders: ClientPool[_Sender] = ClientPool(_MOST_SENDERS)
        self._closing: set[asyncio.Future[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="service-bus-senders", daemon=True
        )
        self._starting = threading.Lock()

    def perform(
        self, action: ErrorAction, job: JobId, attempt: Attempt, region: str = ""
    ) -> Performed:
        """Send the message, and say how it went."""
        wanted: ServiceBusActionMessage | None
        topic = action.type is ActionType.SERVICE_BUS_TOPIC
        if topic:
            wanted = topic_message = action.service_bus_topic_message
            entity = topic_message.topic_path if topic_message else None
        else:
            wanted = queue_message = action.service_bus_queue_message
            entity = queue_message.queue_name if queue_message else None
        if wanted is None:
            raise ValueError(f"a {action.type.value} action without its message")
        kind = "topic" if topic else "queue"
        where = f"{kind} '{entity}' of namespace '{wanted.namespace}'"
        label = f"ServiceBus{kind.title()} Action"
        try:
            message = brokered_message(wanted, job, attempt)
        except (ValueError, TypeError) as unusable:
            return Performed(False, f"{label} - The message cannot be built: {unusable}")
        authentication = wanted.authentication
        key = (authentication.sas_key if authentication else None) or ""
        host, tls = self._settings.service_bus_host(wanted.namespace or "")
        address = _Address(
            host,
            tls,
            (authentication.sas_key_name if authentication else None) or "",
            hashlib.sha256(key.encode()).hexdigest(),
            topic,
            entity or "",
        )
        with self._starting:  # the loop starts with the first Service Bus action, if one comes
            if not self._thread.is_alive():
                self._thread.start()
        sent = asyncio.run_coroutine_threadsafe(self._send(address, key, message), self._loop)
        try:
            sent.result(timeout=self._timeout + _CLOSE_TIMEOUT_S + 5)  # the send bounds itself
        except (TimeoutError, FutureTimeout):
            failure = f"Sending to {where} timed out after {self._timeout:g} s"
        except MessagingEntityNotFoundError:
            failure = f"There is no {where}"
        except (ServiceBusAuthenticationError, ServiceBusAuthorizationError):
            failure = f"The shared access key '{address.key_name}' was refused for {where}"
        except ServiceBusConnectionError:
            failure = f"The namespace of {where} could not be reached"
        except ServiceBusError as failed:
            failure = f"Sending to {where} failed: {_first_line(failed)}"
        else:
            return Performed(True, f"{label} - The message was sent to {where}")
        return Performed(False, f"{label} - {failure}")

    def close(self) -> None:
        if not self._thread.is_alive():
            return

        async def close_all() -> None:
            for held in self._senders.take_all():
                await _close(held)

        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # On the senders' loop from here on.
    async def _send(self, address: _Address, key: str, message: ServiceBusMessage) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                held = self._sender_for(address, key)
                # One send at a time per sender: the SDK's sender is not safe for concurrent
                # sends (their transfers can leave out of order, which the broker refuses by
                # closing the connection), and the first send opens the link for all.
                async with held.turn:
                    await held.sender.send_messages(message, timeout=self._timeout)
        except BaseException:
            await self._discard(address)
            raise

    def _sender_for(self, address: _Address, key: str) -> _Sender:
        return self._senders.get(address, lambda: self._open(address, key))

    def _open(self, address: _Address, key: str) -> _Sender:
        client = ServiceBusClient(
            address.host,
            AzureNamedKeyCredential(address.key_name, key),
            use_tls=address.tls,  # what the SDK's UseDevelopmentEmulator sets: emulators only
            # One quick retry for a dropped connection: the job's own retry policy does the rest.
            retry_total=1,
            retry_backoff_factor=0.5,
            retry_backoff_max=2,
        )
        sender = (
            client.get_topic_sender(address.entity)
            if address.topic
            else client.get_queue_sender(address.entity)
        )
        return _Sender(client, sender, self._closing)

    async def _discard(self, address: _Address) -> None:
        held = self._senders.pop(address)
        if held is not None:
            await _close(held)


async def _close(held: _Sender) -> None:
    try:
        async with asyncio.timeout(_CLOSE_TIMEOUT_S):
            await held.sender.close()
            await held.client.close()
    except Exception:  # a broken sender may not close cleanly; it is dropped all the same
        pass


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0][:300]
