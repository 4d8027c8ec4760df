"""Timer and queue triggers, run as the Functions host runs them.

Timer: the 6-field NCRONTAB schedule (seconds first), `%SETTING%` read from the environment; one
run at a time; a run that starts late (a previous run overran, or the host was down) gets
isPastDue and the missed ticks are not made up.

Queue (host.json `extensions.queues`): messages base64-decoded when messageEncoding says so;
up to batchSize fetched at once and more fetched while no more than newBatchThreshold are still
in flight; a message whose function fails becomes visible again after visibilityTimeout, and
after maxDequeueCount failures moves to `<queue>-poison`; polling backs off from 100 ms up to
maxPollingInterval while the queue is empty, polls again at once after a full batch, and 100 ms
after one that was not full.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azure.core.exceptions import ResourceExistsError
from azure.functions.queue import QueueMessage
from azure.functions.timer import TimerRequest
from croniter import croniter

from devhost.invocation import invoke
from shared.logs import app_logger
from shared.storage.clients import queue_from_connection_string
from shared.storage.queue_http import QueueLike

if TYPE_CHECKING:  # the Queue SDK: not imported for a type alone (a tenth of a second)
    from azure.storage.queue import QueueMessage as StoredMessage

log = app_logger("devhost.triggers")
PAST_DUE_AFTER = timedelta(seconds=1)
FIRST_POLL_S = 0.1


def triggers_of(
    functions: list[Any], queues: dict[str, Any], connection_string: str, **client_options: Any
) -> list[Any]:
    """A runner for each timer and queue function among `app.get_functions()`.

    `client_options` go to the queue clients (a benchmark counts their requests with them).
    """
    settings = QueueSettings.from_host_json(queues)
    found: list[Any] = []
    for function in functions:
        name = function.get_function_name()
        if is_disabled(name):
            log.info("%s is disabled by its AzureWebJobs.%s.Disabled setting", name, name)
            continue
        trigger = function.get_trigger().get_dict_repr()
        call, argument = function.get_user_function(), trigger["name"]
        if trigger["type"] == "timerTrigger":
            found.append(
                TimerTrigger(
                    call,
                    argument,
                    trigger["schedule"],
                    run_on_startup=bool(trigger.get("runOnStartup")),
                    name=name,
                )
            )
        elif trigger["type"] == "queueTrigger":
            found.append(
                QueueTrigger(
                    call,
                    argument,
                    trigger["queueName"],
                    connection_string,
                    settings,
                    name=name,
                    **client_options,
                )
            )
    return found


def is_disabled(function_name: str, environment: dict[str, str] | None = None) -> bool:
    """Whether `AzureWebJobs.<name>.Disabled` is true, the setting by which the host (and the
    portal's Disable button) keeps a triggered function from running."""
    environment = dict(os.environ) if environment is None else environment
    value = environment.get(f"AzureWebJobs.{function_name}.Disabled", "")
    return value.strip().lower() in {"true", "1"}


def resolve_setting(value: str, environment: dict[str, str] | None = None) -> str:
    """`%NAME%` from the environment, as the host resolves binding expressions."""
    environment = dict(os.environ) if environment is None else environment
    match = re.fullmatch(r"%(\w+)%", value.strip())
    if not match:
        return value
    if match.group(1) not in environment:
        raise KeyError(f"setting {match.group(1)} is not defined")
    return environment[match.group(1)]


class TimerTrigger:
    """Runs one timer function on its NCRONTAB schedule, one run at a time."""

    def __init__(
        self,
        function: Callable[..., Any],
        argument: str,
        schedule: str,
        *,
        run_on_startup: bool = False,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        wait: Callable[[float], bool] | None = None,
        name: str = "timer",
    ) -> None:
        self._function, self._argument, self._clock = function, argument, clock
        self.name = name
        self._schedule = resolve_setting(schedule)
        croniter(self._schedule, second_at_beginning=True)  # fail now on a bad schedule
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._run_on_startup = run_on_startup

    @property
    def schedule(self) -> str:
        """The NCRONTAB schedule, its %SETTING% resolved."""
        return self._schedule

    def next_after(self, moment: datetime) -> datetime:
        return croniter(self._schedule, moment, second_at_beginning=True).get_next(datetime)

    def run(self) -> None:
        """Fire on schedule until stopped."""
        if self._run_on_startup:
            self._fire(scheduled=self._clock())
        scheduled = self.next_after(self._clock())
        while not self._stop.is_set():
            delay = (scheduled - self._clock()).total_seconds()
            if delay > 0 and self._wait(delay):
                return  # stopped while waiting
            if self._stop.is_set():
                return
            self._fire(scheduled)
            # Ticks missed while this run went on are not made up: the next is after now.
            scheduled = self.next_after(max(scheduled, self._clock()))

    def stop(self) -> None:
        self._stop.set()

    def _fire(self, scheduled: datetime) -> None:
        past_due = self._clock() - scheduled > PAST_DUE_AFTER
        # As the Functions host logs each run: one line per firing, naming the scheduled moment,
        # so that a firing twice (by two processes, say) shows.
        log.info(
            "Executing 'Functions.%s' (Reason='Timer fired at %s', past due: %s)",
            self.name, scheduled.isoformat(), "yes" if past_due else "no",
        )  # fmt: skip
        try:
            invoke(self._function, **{self._argument: TimerRequest(past_due=past_due)})
        except Exception:
            # The host does not retry a failed timer run; the next tick comes as scheduled.
            log.exception("timer function failed")


HOST_JSON = Path(__file__).resolve().parent.parent / "host.json"


def host_extensions() -> dict[str, Any]:
    """The app's host.json `extensions` (`http`, `queues`, ...)."""
    return dict(json.loads(HOST_JSON.read_text()).get("extensions", {}))


def queue_clients(
    connection_string: str, queue_name: str, **client_options: Any
) -> tuple[QueueLike, QueueLike]:
    """Clients of a queue and of its poison queue, `<queue>-poison` as the Functions host names
    it. They read the proxy settings once, as the app's clients do: the host polls often."""
    return (
        queue_from_connection_string(connection_string, queue_name, **client_options),
        queue_from_connection_string(connection_string, f"{queue_name}-poison", **client_options),
    )


@dataclass(frozen=True)
class QueueSettings:
    """host.json `extensions.queues`, with the Functions host's defaults."""

    batch_size: int = 16
    new_batch_threshold: int = 8
    max_dequeue_count: int = 5
    visibility_timeout: timedelta = timedelta(0)
    max_polling_interval: timedelta = timedelta(minutes=1)
    base64: bool = True
    # How long a received message stays hidden, renewed while its function runs. The Functions
    # host holds 10 minutes; a shorter hold brings a crashed run's messages back sooner.
    lease: timedelta = timedelta(seconds=30)

    @property
    def most_in_flight(self) -> int:
        """How many of a queue's messages can be running at once: a new batch is fetched while
        no more than newBatchThreshold are."""
        return self.batch_size + self.new_batch_threshold

    @classmethod
    def from_host_json(cls, queues: dict[str, Any]) -> QueueSettings:
        def span(value: str | None, default: timedelta) -> timedelta:
            if not value:
                return default
            hours, minutes, seconds = (float(part) for part in value.split(":"))
            return timedelta(hours=hours, minutes=minutes, seconds=seconds)

        return cls(
            batch_size=int(queues.get("batchSize", 16)),
            new_batch_threshold=int(queues.get("newBatchThreshold", 8)),
            max_dequeue_count=int(queues.get("maxDequeueCount", 5)),
            visibility_timeout=span(queues.get("visibilityTimeout"), timedelta(0)),
            max_polling_interval=span(queues.get("maxPollingInterval"), timedelta(minutes=1)),
            base64=str(queues.get("messageEncoding", "base64")).lower() == "base64",
        )


class QueueTrigger:
    """Runs one queue function on the messages of its queue: `run` polls the queue and runs them
    here; `handle` runs one message that the host process fetched and handed to this worker."""

    def __init__(
        self,
        function: Callable[..., Any],
        argument: str,
        queue_name: str,
        connection_string: str,
        settings: QueueSettings,
        *,
        name: str = "queue",
        **client_options: Any,
    ) -> None:
        self._function, self._argument, self.settings = function, argument, settings
        self.name = name
        self.queue_name = resolve_setting(queue_name)
        self._queue, self._poison = queue_clients(
            connection_string, self.queue_name, **client_options
        )
        self._poller = QueuePoller(self._queue, self._poison, settings)

    def run(self) -> None:
        """Poll and run until stopped."""
        with ThreadPoolExecutor(
            self.settings.most_in_flight, thread_name_prefix=f"queue-{self.queue_name}"
        ) as pool:
            self._poller.run(lambda stored, done: pool.submit(self._handle_then, stored, done))

    def stop(self) -> None:
        self._poller.stop()

    def _handle_then(self, stored: StoredMessage, done: Callable[[], None]) -> None:
        try:
            self.handle(stored)
        finally:
            done()

    def handle(self, stored: StoredMessage) -> None:
        """Run the function on one received message, then delete it, or give it back (to the
        poison queue after maxDequeueCount tries) if the function failed."""
        started, outcome = time.monotonic(), "Failed"
        try:
            message = QueueMessage(
                id=stored.id,
                body=self._body(stored.content),
                dequeue_count=stored.dequeue_count,
                insertion_time=stored.inserted_on,
                expiration_time=stored.expires_on,
                pop_receipt=stored.pop_receipt,
            )
            lease = _Lease(self._queue, stored, self.settings.lease)
            try:
                invoke(self._function, **{self._argument: message})
            finally:
                stored = lease.release()
        except Exception:
            log.exception("queue function failed on message %s", stored.id)
            self._failed(stored)
        else:
            self._queue.delete_message(stored)
            outcome = "Succeeded"
        finally:
            # The Functions host's line for each run, in its words.
            log.info(
                "Executed 'Functions.%s' (%s, Id=%s, Duration=%.0fms)",
                self.name, outcome, stored.id, (time.monotonic() - started) * 1000,
            )  # fmt: skip

    def _body(self, content: str) -> bytes:
        if not self.settings.base64:
            return content.encode()
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("the message is not base64, as messageEncoding requires") from None

    def _failed(self, stored: StoredMessage) -> None:
        if (stored.dequeue_count or 0) >= self.settings.max_dequeue_count:
            self._poison.send_message(stored.content)
            self._queue.delete_message(stored)
            log.warning("message %s moved to %s-poison", stored.id, self.queue_name)
            return
        self._queue.update_message(
            stored, visibility_timeout=int(self.settings.visibility_timeout.total_seconds())
        )


class QueuePoller:
    """Fetches a queue's messages as the Functions host's queue listener does, and hands each
    on (`hand_off(message, done)`; `done()` once its run has ended, however it ended)."""

    def __init__(self, queue: QueueLike, poison: QueueLike, settings: QueueSettings) -> None:
        self._queue, self._poison, self._settings = queue, poison, settings
        self._stop = threading.Event()
        self._running = 0
        self._lock = threading.Lock()

    def run(self, hand_off: Callable[[StoredMessage, Callable[[], None]], object]) -> None:
        """Poll and hand on until stopped."""
        for queue in (self._queue, self._poison):
            with contextlib.suppress(ResourceExistsError):
                queue.create_queue()
        pause = FIRST_POLL_S
        limit = self._settings.max_polling_interval.total_seconds()
        while not self._stop.is_set():
            with self._lock:
                room = self._running <= self._settings.new_batch_threshold
            batch = self._receive() if room else []
            for message in batch:
                with self._lock:
                    self._running += 1
                hand_off(message, self._done)
            if batch:
                pause = FIRST_POLL_S
                if len(batch) < self._settings.batch_size:
                    self._stop.wait(FIRST_POLL_S)
                continue
            self._stop.wait(pause if room else FIRST_POLL_S / 4)
            pause = min(pause * 2, limit) if room else pause

    def stop(self) -> None:
        self._stop.set()

    def _done(self) -> None:
        with self._lock:
            self._running -= 1

    def _receive(self) -> list[StoredMessage]:
        try:
            pages = self._queue.receive_messages(
                messages_per_page=self._settings.batch_size,
                visibility_timeout=int(self._settings.lease.total_seconds()),
            )
            return list(next(pages.by_page(), []))
        except Exception:
            log.exception("receiving from %s failed", self._queue.queue_name)
            return []


class _Lease:
    """Keeps a message hidden while its function runs, renewing the hold every third of it."""

    def __init__(self, queue: QueueLike, message: StoredMessage, hold: timedelta) -> None:
        self._queue, self._message, self._hold = queue, message, hold
        self._done = threading.Event()
        self._renewer = threading.Thread(target=self._renew, daemon=True)
        self._renewer.start()

    def release(self) -> StoredMessage:
        """Stop renewing; the message as last renewed (its pop receipt changes with each)."""
        self._done.set()
        self._renewer.join()
        return self._message

    def _renew(self) -> None:
        while not self._done.wait(self._hold.total_seconds() / 3):
            try:
                self._message = self._queue.update_message(
                    self._message, visibility_timeout=int(self._hold.total_seconds())
                )
            except Exception:
                log.exception("could not renew the hold on message %s", self._message.id)
