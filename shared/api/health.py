"""`GET /health`: is storage reachable, how full is the execution queue, when did the timer last
tick. Anonymous, so it says nothing secret: no account names, endpoints or error texts.

Each probe runs with a deadline: the storage SDKs retry a refused connection for a long while,
and a monitor wants an answer in seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from shared.domain.wire import iso
from shared.services import EXECUTIONS_QUEUE, Services, utc_now

PROBE_DEADLINE_S = 5.0
# A timer that has not ticked for this long is reported (it ticks every minute in Azure).
TICK_OVERDUE = timedelta(minutes=5)

Value = TypeVar("Value")


@dataclass(frozen=True)
class Probe(Generic[Value]):
    """What one probe found: its value, or why there is none (a short, non-secret reason)."""

    value: Value | None = None
    problem: str | None = None


def check(services: Callable[[], Services]) -> tuple[int, dict[str, Any]]:
    """Probe storage and the timer's record: the HTTP status and the report.

    `services` is called inside the deadline too: building them creates tables, which waits
    as long as any other storage call when storage is down.
    """
    deadline = time.monotonic() + PROBE_DEADLINE_S
    [built] = _probes([services], deadline)
    running = built.value
    if running is None:
        return report(utc_now(), Probe(problem=built.problem), Probe(problem=built.problem))
    last_tick, depth = _probes(
        [running.due_index.last_tick, running.dispatcher.queue_depth], deadline
    )
    return report(running.now(), last_tick, depth)


def report(
    now: datetime, last_tick: Probe[datetime | None], depth: Probe[int]
) -> tuple[int, dict[str, Any]]:
    """The status and body for what the probes found: 503 when storage cannot be reached,
    "degraded" when the timer has not ticked within TICK_OVERDUE."""
    reachable = last_tick.problem is None and depth.problem is None
    ticked = last_tick.value
    overdue = ticked is None or now - ticked > TICK_OVERDUE
    status = "unhealthy" if not reachable else "degraded" if overdue else "healthy"
    body: dict[str, Any] = {
        "status": status,
        "time": iso(now),
        "storage": {
            "tables": last_tick.problem or "reachable",
            "queues": depth.problem or "reachable",
        },
        "queue": {"name": EXECUTIONS_QUEUE, "depth": depth.value},
        "timer": {
            "lastTick": iso(ticked) if ticked else None,
            "secondsSinceLastTick": round((now - ticked).total_seconds(), 1) if ticked else None,
        },
    }
    return (200 if reachable else 503), body


def _probes(reads: list[Callable[[], Any]], deadline: float) -> list[Probe[Any]]:
    """Run the reads side by side; each answers by the deadline or counts as unreachable.

    Daemon threads: a read past its deadline is left to finish on its own, and must not hold
    up the process when it exits.
    """
    found: list[Probe[Any] | None] = [None] * len(reads)

    def run(position: int, read: Callable[[], Any]) -> None:
        try:
            found[position] = Probe(read())
        except Exception as failure:  # unreachable, whatever the cause; its text may name hosts
            found[position] = Probe(problem=f"unreachable ({type(failure).__name__})")

    threads = [
        threading.Thread(target=run, args=(position, read), daemon=True, name="health")
        for position, read in enumerate(reads)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    late = Probe[Any](problem=f"unreachable (no answer within {PROBE_DEADLINE_S:g} s)")
    return [probe or late for probe in found]
