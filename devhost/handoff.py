"""Queue messages handed from the host process to its worker processes, one worker after another.

An instance of the Functions host polls each queue once, in the host process, and hands every
message it fetched to its language workers in turn (a round robin over the workers, one
invocation at a time); the workers do not poll. With several workers the local host does the
same: this process polls (`triggers.QueuePoller`, with host.json's batch settings, which count
the messages of the whole instance) and each worker runs what it is handed (`WorkerFeed`).

Taking turns matters for a scheduler: attempts due in the same second travel in a few messages
that become visible at the same moment, and a worker that polled for itself took all of them
when it polled first, so one interpreter ran the whole second while the other sat idle.

Each worker has a socket pair with this process, and they speak JSON, one object a line:
- the worker, once: `{"queues": [{"function": name, "queue": queue}]}`, its queue functions;
- this process: `{"handOff": n, "function": name, "message": {...}}`, a message received for it;
- the worker: `{"done": n}` once the message's run has ended, deleted or given back.
The worker renews the message's hold, deletes it or gives it back itself, as a worker that
polled would; this process only counts what is in flight, so that it fetches no more than
host.json allows. A worker that dies leaves its messages hidden until their hold ends, then
they come back; the host stops anyway (`processes`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from devhost.triggers import QueuePoller, QueueSettings, QueueTrigger, queue_clients
from shared.logs import app_logger

# The Queue SDK is imported where its model is made: a tenth of a second of a worker's start.
if TYPE_CHECKING:
    from azure.storage.queue import QueueMessage as StoredMessage

log = app_logger("devhost.handoff")


class HandOff:
    """This (the host) process's side: polls the queues the workers announce and hands each
    message to the next worker in turn."""

    def __init__(
        self, channels: list[socket.socket], connection_string: str, settings: QueueSettings
    ) -> None:
        self._channels, self._connection_string = channels, connection_string
        self._settings = settings
        self._turns = itertools.cycle(range(len(channels)))
        self._serials = itertools.count()
        self._pending: dict[int, Callable[[], None]] = {}
        self._lock = threading.Lock()
        self._writers = [threading.Lock() for _ in channels]
        self._announced: list[dict[str, str]] | None = None
        self._ready = threading.Event()
        self._pollers: list[QueuePoller] = []
        self._stopped = threading.Event()

    def run(self) -> None:
        """Poll every announced queue until stopped (a thread each)."""
        for channel in self._channels:
            threading.Thread(target=self._read, args=(channel,), daemon=True).start()
        while not self._ready.wait(0.1):
            if self._stopped.is_set():
                return
        threads = []
        for function in self._announced or []:
            poller = QueuePoller(
                *queue_clients(self._connection_string, function["queue"]), self._settings
            )
            name = function["function"]
            with self._lock:
                if self._stopped.is_set():
                    break
                self._pollers.append(poller)
            thread = threading.Thread(
                target=poller.run,
                args=(lambda stored, done, name=name: self._hand(name, stored, done),),
                name=f"poll-{function['queue']}",
                daemon=True,
            )
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()

    def stop(self) -> None:
        """Fetch no more: the workers finish what they were handed."""
        with self._lock:
            self._stopped.set()
            pollers = list(self._pollers)
        for poller in pollers:
            poller.stop()

    def _hand(self, function: str, stored: StoredMessage, done: Callable[[], None]) -> None:
        with self._lock:
            serial, worker = next(self._serials), next(self._turns)
            self._pending[serial] = done
        line = {"handOff": serial, "function": function, "message": _message_to_json(stored)}
        try:
            with self._writers[worker]:
                self._channels[worker].sendall(_line(line))
        except OSError:
            # The worker is gone (the host is stopping): the message comes back after its hold.
            log.warning("could not hand message %s to worker %d", stored.id, worker)
            self._finish(serial)

    def _read(self, channel: socket.socket) -> None:
        with channel.makefile("rb") as lines:
            for line in lines:
                said = json.loads(line)
                if "queues" in said and self._announced is None:
                    self._announced = said["queues"]  # every worker loads the same app
                    self._ready.set()
                elif "done" in said:
                    self._finish(said["done"])

    def _finish(self, serial: int) -> None:
        with self._lock:
            done = self._pending.pop(serial, None)
        if done is not None:
            done()


class WorkerFeed:
    """A worker's side: announces its queue functions, runs each message it is handed, and
    says when each run has ended."""

    def __init__(self, channel: socket.socket, triggers: list[QueueTrigger]) -> None:
        self._channel = channel
        self._triggers = {trigger.name: trigger for trigger in triggers}
        self._writer = threading.Lock()

    def run(self) -> None:
        """Run what is handed over until stopped or the host's end closes; then wait for the
        runs already started."""
        queues = [{"function": t.name, "queue": t.queue_name} for t in self._triggers.values()]
        self._say({"queues": queues})
        threads = sum(trigger.settings.most_in_flight for trigger in self._triggers.values())
        with (
            ThreadPoolExecutor(max(1, threads), thread_name_prefix="handed") as pool,
            self._channel.makefile("rb") as lines,
        ):
            for line in lines:
                handed = json.loads(line)
                trigger = self._triggers[handed["function"]]
                stored = _message_from_json(handed["message"])
                pool.submit(self._run, trigger, stored, handed["handOff"])

    def stop(self) -> None:
        """Take nothing more (the host stopped handing messages over before it said stop)."""
        with contextlib.suppress(OSError):
            self._channel.shutdown(socket.SHUT_RD)

    def _run(self, trigger: QueueTrigger, stored: StoredMessage, serial: int) -> None:
        try:
            trigger.handle(stored)
        except Exception:
            log.exception("could not run message %s", stored.id)
        finally:
            with contextlib.suppress(OSError):
                self._say({"done": serial})

    def _say(self, what: dict[str, Any]) -> None:
        with self._writer:
            self._channel.sendall(_line(what))


def _line(what: dict[str, Any]) -> bytes:
    return json.dumps(what, separators=(",", ":")).encode() + b"\n"


_MOMENTS = ("inserted_on", "expires_on", "next_visible_on")


def _message_to_json(stored: StoredMessage) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": stored.id,
        "content": stored.content,
        "dequeue_count": stored.dequeue_count,
        "pop_receipt": stored.pop_receipt,
    }
    for name in _MOMENTS:
        moment = getattr(stored, name)
        fields[name] = moment.isoformat() if moment is not None else None
    return fields


def _message_from_json(fields: dict[str, Any]) -> StoredMessage:
    from azure.storage.queue import QueueMessage as StoredMessage  # noqa: PLC0415

    moments = {
        name: datetime.fromisoformat(fields[name]) if fields[name] is not None else None
        for name in _MOMENTS
    }
    return StoredMessage(
        content=fields["content"],
        id=fields["id"],
        dequeue_count=fields["dequeue_count"],
        pop_receipt=fields["pop_receipt"],
        **moments,
    )
