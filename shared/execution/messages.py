"""The execution queue's messages: the two kinds, their text, and the one way they are sent.

Two kinds travel on the `executions` queue. `Deliveries`: attempts that become visible in the
same second (up to `MOST_PER_MESSAGE`), which the executor runs side by side; one alone keeps
the shape of a single delivery (`Delivery.to_wire`), several travel as `{"deliveries": [...]}`.
`DueRange`: a range of the due index that the timer handed on (`{"dueRange": {...}}`,
shared/execution/fan_out.py), which the executor moves to the queue. The executor function
decodes a message once (`from_wire`) and hands the typed message on.

With telemetry on, each delivery also carries the W3C trace context of its hand-off
(`traceparent`, beside its `job` and `attempt`), so that the executor continues that trace
(shared/telemetry.py); without telemetry nothing is added, and a delivery without one runs as
before, in a trace of its own.

Every message is sent by `send`: it never expires, since one that waits out a long backlog must
still run.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.domain.attempts import Delivery
from shared.domain.wire import JsonObject
from shared.logs import app_logger
from shared.storage.job_codec import decode_delivery, encode_delivery
from shared.storage.queue_http import QueueLike

log = app_logger("scheduler.executor")  # a message dropped is the executor's to report
MOST_PER_MESSAGE = 64  # deliveries one queue message carries, when their size allows
# A queue message holds at most 64 KiB, counted as sent: in base64 (host.json's messageEncoding),
# 4 characters for every 3 bytes of JSON. Less the few bytes around the deliveries.
MOST_BYTES_PER_MESSAGE = 65536 // 4 * 3 - 64
# What a delivery gains when its message is sent: its first send time if it has none yet
# (`"sentAt":"...",`, up to microseconds), and the hand-off's trace context if it carries none
# (`,"traceparent":"..."`, 55 characters; a carried one is replaced by one of the same size).
_SENT_AT_BYTES = 40
_TRACE_CONTEXT_BYTES = 72
RANGE_KIND = "dueRange"  # the key that tells a range message from deliveries
_GROUP = "deliveries"  # the key of several deliveries in one message
_NEVER_EXPIRES = -1  # the queue's time-to-live for "never"


class MalformedMessage(ValueError):
    """The text is not a message the app sends."""


@dataclass(frozen=True)
class Deliveries:
    """Deliveries due in the same second, carried by one message."""

    carried: tuple[Delivery, ...]

    @property
    def due(self) -> datetime:
        """When the first of them is due."""
        return min(delivery.pending.due for delivery in self.carried)

    def to_wire(self) -> JsonObject:
        if len(self.carried) == 1:
            return encode_delivery(self.carried[0])
        return {_GROUP: [encode_delivery(delivery) for delivery in self.carried]}

    @classmethod
    def from_wire(cls, wire: JsonObject) -> Deliveries:
        """KeyError, TypeError or ValueError if malformed."""
        if _GROUP not in wire:
            return cls((decode_delivery(wire),))
        carried = wire[_GROUP]
        if not isinstance(carried, list) or not carried:
            raise ValueError(f"'{_GROUP}' must be a list of at least one delivery")
        return cls(tuple(decode_delivery(item) for item in carried))


@dataclass(frozen=True)
class DueRange:
    """Rows of one due-index partition with row keys in [low, high)."""

    partition: str
    low: str
    high: str

    def to_wire(self) -> JsonObject:
        return {RANGE_KIND: {"partition": self.partition, "low": self.low, "high": self.high}}

    @classmethod
    def from_wire(cls, wire: JsonObject) -> DueRange:
        """KeyError, TypeError or ValueError if it is not a range message."""
        body = wire[RANGE_KIND]
        parts = (body["partition"], body["low"], body["high"])
        if not all(isinstance(part, str) and part for part in parts):
            raise ValueError("a range needs a partition, a low and a high key")
        return cls(*parts)


Message = Deliveries | DueRange


def wire_size(delivery: Delivery) -> int:
    """How many bytes the delivery takes in a message's JSON once sent, with the comma that
    separates it from the next (names are ASCII: characters are bytes)."""
    gains = _TRACE_CONTEXT_BYTES + (_SENT_AT_BYTES if delivery.sent_at is None else 0)
    return len(json.dumps(encode_delivery(delivery), separators=(",", ":"))) + gains + 1


def to_wire(message: Message) -> str:
    """The message's text on the queue."""
    return json.dumps(message.to_wire(), separators=(",", ":"))


def from_wire(text: str) -> Message:
    """The message a text on the queue is; MalformedMessage if it is none the app sends."""
    try:
        wire = json.loads(text)
        if not isinstance(wire, dict):
            raise TypeError("a message is a JSON object")
        return DueRange.from_wire(wire) if RANGE_KIND in wire else Deliveries.from_wire(wire)
    except (ValueError, KeyError, TypeError) as problem:
        raise MalformedMessage(f"{type(problem).__name__}: {problem}") from None


def received(text: str) -> Message | None:
    """The message a text on the queue is, or None (logged) if malformed: it is dropped, as no
    delivery of it would ever do anything else."""
    try:
        return from_wire(text)
    except MalformedMessage as problem:
        log.error("dropped a malformed execution message (%s): %.200s", problem, text)
        return None


def send(queue: QueueLike, message: Message, *, visible_in: timedelta) -> tuple[str, str]:
    """Put the message on the queue, invisible for `visible_in` (whole seconds, rounded down);
    the id and pop receipt it was given, which can delete it again."""
    sent = queue.send_message(
        to_wire(message),
        visibility_timeout=max(0, math.floor(visible_in.total_seconds())),
        time_to_live=_NEVER_EXPIRES,
    )
    return sent.id, sent.pop_receipt or ""
