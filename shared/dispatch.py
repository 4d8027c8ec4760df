"""Putting pending attempts where the executor will find them on time.

An attempt due within the horizon goes straight onto the execution queue, invisible until
about its due time; a later one goes into the due index, which the timer reads a little ahead
of time and hands to the queue. The horizon is twice the timer's look-ahead, so that no row is
written into a window the timer has already read (what is written now is due after
now + horizon, which no tick reaches before now + look-ahead).

Visibility delays are whole seconds: a message becomes visible between `EARLY` and `EARLY` + 1 s
before it is due (the executor waits out the rest), so that a queue poll (every 0.5 s at most,
host.json) finds it in time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta

from azure.storage.queue import QueueClient

from shared.due_index import DueIndex
from shared.execution import Delivery

EARLY = timedelta(seconds=0.5)
_NEVER_EXPIRES = -1


class Dispatcher:
    def __init__(self, queue: QueueClient, index: DueIndex, horizon: timedelta) -> None:
        self._queue, self._index, self.horizon = queue, index, horizon

    def dispatch(self, deliveries: Iterable[Delivery], now: datetime) -> None:
        for delivery in deliveries:
            if delivery.pending.due - now <= self.horizon:
                self.enqueue(delivery, now)
            else:
                self._index.add(delivery)

    def enqueue(
        self, delivery: Delivery, now: datetime, *, at_least: timedelta = timedelta(0)
    ) -> None:
        """Send one delivery, visible shortly before it is due (`at_least` from now)."""
        wait = max((delivery.pending.due - now - EARLY).total_seconds(), at_least.total_seconds())
        message = replace(delivery, sent_at=now).to_message()
        # A message never expires: one that waits out a long backlog must still run.
        self._queue.send_message(
            json.dumps(message, separators=(",", ":")),
            visibility_timeout=max(0, math.floor(wait)),
            time_to_live=_NEVER_EXPIRES,
        )
