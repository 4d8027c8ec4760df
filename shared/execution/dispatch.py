"""Putting pending attempts where the executor will find them on time.

An attempt due within the horizon goes straight onto the execution queue, invisible until
about its due time; a later one goes into the due index, which the timer reads a little ahead
of time and hands to the queue. The horizon is twice the timer's look-ahead, so that no row is
written into a window the timer has already read (what is written now is due after
now + horizon, which no tick reaches before now + look-ahead).

Visibility delays are whole seconds: a message becomes visible between `EARLY` and `EARLY` + 1 s
before it is due (the executor waits out the rest), so that a queue poll (every 0.5 s at most,
host.json) finds it in time.

Attempts that become visible in the same second travel in one message (up to
`MOST_PER_MESSAGE`). Few messages then wait on the queue: a queue holding thousands of invisible
messages costs the storage service on every receive (Azurite, measured in
bench/results/azurite_queue.md), and each message is a transaction on the Azure bill. The
executor's follow-ups are gathered for a moment (`coalesce`) so that jobs due in the same second,
however they were created, come to share their messages.
"""

from __future__ import annotations

import base64
import binascii
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TypeVar

from azure.core.exceptions import AzureError, ResourceNotFoundError

from shared.domain.attempts import Delivery
from shared.execution import messages
from shared.execution.messages import MOST_BYTES_PER_MESSAGE, MOST_PER_MESSAGE, Deliveries
from shared.logs import app_logger
from shared.storage.due_index import DueIndex
from shared.storage.queue_http import QueueLike
from shared.telemetry import current as telemetry

log = app_logger("scheduler.dispatch")
EARLY = timedelta(seconds=0.5)
PEEK_LIMIT = 32  # the most messages one peek of a queue returns (the queue service's limit)
Item = TypeVar("Item")


@dataclass(frozen=True)
class Dispatched:
    """Where `dispatch` put deliveries, so that a write refused after them can take them back."""

    messages: tuple[tuple[str, str], ...] = ()  # (message id, pop receipt) on the queue
    indexed: tuple[Delivery, ...] = ()  # rows added to the due index


@dataclass(frozen=True)
class PoisonMessage:
    """A message the host gave up on, as a peek of the poison queue saw it (it stays there)."""

    text: str  # its text, with the base64 the host reads and writes undone where it applies
    inserted: datetime | None  # when the host moved it there
    dequeue_count: int  # how often it was taken from the poison queue (0 unless someone did)


@dataclass
class _OneSecondsFollowUps:
    """Follow-ups that become visible in one second, waiting for their message to be sent."""

    deliveries: list[Delivery] = field(default_factory=list)
    sent: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None


class Dispatcher:
    """Sends deliveries to the queue or the due index: `dispatch` (by when each is due),
    `dispatch_gathered` (the same, gathering the queue-bound ones with others of their second),
    `send_group` (one message of exactly these) and `send_again` (one delivery back on the
    queue, for a later look)."""

    def __init__(
        self,
        queue: QueueLike,
        index: DueIndex,
        horizon: timedelta,
        coalesce: timedelta = timedelta(0),
        poison: QueueLike | None = None,
    ) -> None:
        """`poison`: the queue the host moves a message to after its last failed delivery."""
        self._queue, self._index, self.horizon = queue, index, horizon
        self._poison = poison
        self._coalesce = coalesce
        self._gathering: dict[int, _OneSecondsFollowUps] = {}
        self._lock = threading.Lock()

    def queue_depth(self) -> int:
        """About how many messages the execution queue holds, invisible ones included."""
        return int(self._queue.get_queue_properties().approximate_message_count or 0)

    def poison_depth(self) -> int:
        """About how many messages failed their last delivery and wait on the poison queue
        for someone to look at them (0 while the host has moved none there)."""
        if self._poison is None:
            return 0
        try:
            properties = self._poison.get_queue_properties()
        except ResourceNotFoundError:  # the host creates it with the first message it moves
            return 0
        return int(properties.approximate_message_count or 0)

    def peek_poison(self, at_most: int = PEEK_LIMIT) -> list[PoisonMessage]:
        """The first messages (up to `at_most`, at most PEEK_LIMIT) waiting on the poison queue,
        peeked: left there, for the operator to look into and clear."""
        if self._poison is None:
            return []
        try:
            peeked = self._poison.peek_messages(max_messages=max(1, min(at_most, PEEK_LIMIT)))
        except ResourceNotFoundError:  # the host creates it with the first message it moves
            return []
        return [
            PoisonMessage(
                _text_of(str(waiting.content)), waiting.inserted_on, waiting.dequeue_count or 0
            )
            for waiting in peeked
        ][:at_most]

    def lateness(self, now: datetime) -> timedelta:
        """How late the latest of the messages waiting to be taken is (those visible, the first
        32 of them): zero while the executor keeps up; growing while the queue outgrows it."""
        late = timedelta(0)
        for waiting in self._queue.peek_messages(max_messages=32):
            try:
                message = messages.from_wire(base64.b64decode(waiting.content).decode())
            except (messages.MalformedMessage, ValueError):
                continue  # not the app's
            if isinstance(message, Deliveries):  # not a range of the due index (fan-out)
                late = max(late, now - message.due)
        return late

    def dispatch(self, deliveries: Iterable[Delivery], now: datetime) -> Dispatched:
        """Queue what is due within the horizon (grouped by second), index the rest. Each
        delivery is stamped with `now` as its first send, unless it already has one."""
        soon, indexed = [], []
        for delivery in telemetry().continuing(list(deliveries)):
            stamped = _stamped(delivery, now)
            if delivery.pending.due - now <= self.horizon:
                soon.append(stamped)
            else:
                self._index.add(stamped)
                indexed.append(stamped)
        return Dispatched(tuple(self._send_by_second(soon, now)), tuple(indexed))

    def withdraw(self, dispatched: Dispatched) -> None:
        """Take back what `dispatch` sent for a write that was then refused, as far as it can:
        a message the executor already holds cannot be deleted, and dies of its age instead
        (`decisions.SAVE_GRACE`)."""
        for message_id, receipt in dispatched.messages:
            try:
                self._queue.delete_message(message_id, receipt)
            except AzureError as failure:
                log.info("a withdrawn message stays until its age drops it (%s)", failure)
        self._index.withdraw(dispatched.indexed)

    def dispatch_gathered(self, deliveries: Sequence[Delivery], now: datetime) -> None:
        """As `dispatch`, but queue-bound attempts first wait up to `coalesce` (real time) for
        others of the same second from other threads, and share their messages (`together`).
        Returns once they are sent (or raises what the send raised)."""
        # Traced here, in the caller's thread: another thread may send them.
        deliveries = telemetry().continuing(deliveries)
        soon = [d for d in deliveries if d.pending.due - now <= self.horizon]
        later = [d for d in deliveries if d.pending.due - now > self.horizon]
        self.dispatch(later, now)
        if not soon:
            return
        if self._coalesce <= timedelta(0):
            self._send_by_second(soon, now)
            return
        for delivery in soon:
            self._gather(delivery, now)

    def send_group(self, deliveries: Sequence[Delivery], now: datetime) -> None:
        """Send one message carrying exactly these (one group of `together`)."""
        self._send(deliveries, now)

    def send_again(
        self, delivery: Delivery, now: datetime, *, at_least: timedelta = timedelta(0)
    ) -> None:
        """Put one delivery back on the queue, visible shortly before it is due (`at_least`
        from now), keeping its first send."""
        self._send(telemetry().continuing([delivery]), now, at_least=at_least)

    def _send_by_second(
        self, deliveries: Iterable[Delivery], now: datetime
    ) -> list[tuple[str, str]]:
        """Send these to the queue, whenever they are due: one message per second of them;
        raises if any send failed. The id and pop receipt of each message sent."""
        return [self._send(group, now) for group in together(deliveries, lambda d: d)]

    def _gather(self, delivery: Delivery, now: datetime) -> None:
        second = _visible_second(delivery)
        with self._lock:
            gathering = self._gathering.get(second)
            leader = gathering is None
            if gathering is None:
                gathering = self._gathering[second] = _OneSecondsFollowUps()
            gathering.deliveries.append(delivery)
        if not leader:
            gathering.sent.wait()
            if gathering.failure is not None:
                raise gathering.failure
            return
        time.sleep(self._coalesce.total_seconds())  # the others join meanwhile
        with self._lock:
            if self._gathering.get(second) is gathering:
                del self._gathering[second]
        try:
            # All at once, so that a second with more than one message's worth gets messages
            # of even size, as `together` makes them: filling one message before opening the
            # next made 64 and 11 of 75, and with several worker processes, taking turns by
            # message, one could get both large ones of a second.
            self._send_by_second(gathering.deliveries, now)
        except BaseException as failure:
            gathering.failure = failure
            raise
        finally:
            gathering.sent.set()

    def _send(
        self, deliveries: Sequence[Delivery], now: datetime, *, at_least: timedelta = timedelta(0)
    ) -> tuple[str, str]:
        with telemetry().handing_off(deliveries) as traced:
            message = Deliveries(tuple(_stamped(delivery, now) for delivery in traced))
            return messages.send(
                self._queue, message, visible_in=max(message.due - now - EARLY, at_least)
            )


def together(items: Iterable[Item], delivery_of: Callable[[Item], Delivery]) -> list[list[Item]]:
    """The items in groups that share one message: those whose deliveries become visible in the
    same second, at most `MOST_PER_MESSAGE` a group and `MOST_BYTES_PER_MESSAGE` of JSON (long
    names, and overlapPolicy Allow's record of the try that began, make 64 deliveries too big
    for one message). A second that needs several messages gets them of even size (80 as 40 and
    40, not 64 and 16): each message runs in one process, so the largest one sets how late the
    last of that second starts."""
    by_second: dict[int, list[Item]] = defaultdict(list)
    for item in items:
        by_second[_visible_second(delivery_of(item))].append(item)
    groups = []
    for group in by_second.values():
        groups += _even_parts(group, [messages.wire_size(delivery_of(item)) for item in group])
    return groups


def _even_parts(group: list[Item], sizes: list[int]) -> list[list[Item]]:
    """The group cut into the fewest runs of even length that each fit in one message."""
    parts = max(
        math.ceil(len(group) / MOST_PER_MESSAGE), math.ceil(sum(sizes) / MOST_BYTES_PER_MESSAGE)
    )
    while True:  # ends: a delivery alone is far below the bound
        length = math.ceil(len(group) / parts)
        starts = range(0, len(group), length)
        if all(sum(sizes[start : start + length]) <= MOST_BYTES_PER_MESSAGE for start in starts):
            return [group[start : start + length] for start in starts]
        parts += 1


def _text_of(content: str) -> str:
    """A message's text: the host keeps the app's messages in base64 (host.json's
    messageEncoding) and moves them to the poison queue as they were; a message put there by
    other means may be plain text."""
    try:
        return base64.b64decode(content, validate=True).decode()
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return content


def _stamped(delivery: Delivery, now: datetime) -> Delivery:
    """The delivery with its first send time: `now`, unless it was sent before. A delivery
    sent again (not yet due, or NotYet) keeps its age, so that none is sent again forever."""
    return delivery if delivery.sent_at is not None else replace(delivery, sent_at=now)


def _visible_second(delivery: Delivery) -> int:
    """The second (since 1970) in which the delivery's message should become visible."""
    return math.floor((delivery.pending.due - EARLY).timestamp())
