"""`GET /health`: is storage reachable, how full is the execution queue and how late what waits on
it, when did the timer last tick, and what needs an operator's look: messages that failed their
last delivery (the poison queue) and claims on tries whose holder died and that no delivery has
taken over. Anonymous, so it says nothing secret: no account names,
endpoints, job names or error texts.

Each probe runs with a deadline: the storage SDKs retry a refused connection for a long while,
and a monitor wants an answer in seconds.

The route answers from `REPORTS`: a report is kept for CACHED_FOR_S per process, and callers
that come while one is being made wait for it. Anyone may poll `/health`, and counting the
claims past their deadline reads the whole jobs table (no index serves it): kept, a report costs
storage at most one round of probes every few seconds, however often it is asked for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from shared.domain.wire import JsonObject, iso
from shared.services import EXECUTIONS_QUEUE, Services, utc_now

PROBE_DEADLINE_S = 5.0
# A timer that has not ticked for this long is reported (it ticks every minute in Azure).
TICK_OVERDUE = timedelta(minutes=5)
# A queue that outgrows the executor is reported: by how late the messages waiting on it are
# (an executor that keeps up takes each within a second or two of its time), and by how many it
# holds (each second of the next 3 minutes that has attempts due holds one message per 64; a
# queue far past that is being filled by something other than the schedules).
MOST_LATE = timedelta(minutes=1)
MOST_DEPTH = 10_000
# A claim on a try runs out when its holder died mid-call; the try's message comes back and takes
# it over within seconds. One still there this long after its deadline has no message coming.
CLAIM_OVERDUE = timedelta(minutes=1)
MOST_COUNTED = 100  # claims past their deadline counted at most (the probe stops there)

# How long a report is given again, per process, before the probes run anew.
CACHED_FOR_S = 5.0

Value = TypeVar("Value")
Answer = tuple[int, JsonObject]  # the HTTP status and the report


@dataclass(frozen=True)
class Probe(Generic[Value]):
    """What one probe found: its value, or why there is none (a short, non-secret reason)."""

    value: Value | None = None
    problem: str | None = None


def check(services: Callable[[], Services]) -> Answer:
    """Probe storage and the timer's record: the HTTP status and the report.

    `services` is called inside the deadline too: building them creates tables, which waits
    as long as any other storage call when storage is down.
    """
    deadline = time.monotonic() + PROBE_DEADLINE_S
    [built] = _probes([services], deadline)
    running = built.value
    if running is None:
        return report(utc_now(), Probe(problem=built.problem), Probe(problem=built.problem))
    now = running.now()
    last_tick, depth, late, poison, overdue = _probes(
        [
            running.due_index.last_tick,
            running.dispatcher.queue_depth,
            lambda: running.dispatcher.lateness(now),
            running.dispatcher.poison_depth,
            lambda: running.storage.executor.overdue_claims(now - CLAIM_OVERDUE, MOST_COUNTED),
        ],
        deadline,
    )
    return report(now, last_tick, depth, late, poison=poison, overdue=overdue)


class CachedReports:
    """`check`'s answer, given again for `lifetime` seconds of `clock` (monotonic: a wall clock
    set back must not keep a report for ever). Thread-safe: one caller makes a report while the
    others that come meanwhile wait for it, so the probes never run side by side."""

    def __init__(
        self,
        probe: Callable[[Callable[[], Services]], Answer] = check,
        *,
        clock: Callable[[], float] = time.monotonic,
        lifetime: float = CACHED_FOR_S,
    ) -> None:
        self._probe, self._clock, self._lifetime = probe, clock, lifetime
        self._lock = threading.Lock()
        self._kept: Answer | None = None
        self._kept_until = 0.0

    def answer(self, services: Callable[[], Services]) -> Answer:
        """The report kept, while it is young enough; else a new one (then kept)."""
        with self._lock:
            if self._kept is not None and self._clock() < self._kept_until:
                return self._kept
            self._kept = self._probe(services)
            # From when it was made: a slow round of probes is not followed at once by another.
            self._kept_until = self._clock() + self._lifetime
            return self._kept


REPORTS = CachedReports()


def report(
    now: datetime,
    last_tick: Probe[datetime | None],
    depth: Probe[int],
    late: Probe[timedelta] | None = None,
    *,
    poison: Probe[int] | None = None,
    overdue: Probe[int] | None = None,
) -> tuple[int, JsonObject]:
    """The status and body for what the probes found: 503 when storage cannot be reached,
    "degraded", with its reasons, when the timer has not ticked within TICK_OVERDUE, the
    queue outgrows the executor (MOST_LATE, MOST_DEPTH), messages wait on the poison queue, or
    claims are past their deadline by more than CLAIM_OVERDUE."""
    late = late or Probe(timedelta(0))
    poison, overdue = poison or Probe(0), overdue or Probe(0)
    probes = (last_tick, depth, late, poison, overdue)
    reachable = all(probe.problem is None for probe in probes)
    ticked = last_tick.value
    reasons = []
    if ticked is None or now - ticked > TICK_OVERDUE:
        reasons.append(f"the timer has not ticked for more than {_minutes(TICK_OVERDUE)}")
    if late.value is not None and late.value > MOST_LATE:
        reasons.append(
            f"messages on the execution queue wait {round(late.value.total_seconds())} s past "
            f"their time, more than {round(MOST_LATE.total_seconds())} s: the executor is behind"
        )
    if depth.value is not None and depth.value > MOST_DEPTH:
        reasons.append(f"the execution queue holds {depth.value} messages, more than {MOST_DEPTH}")
    if poison.value:
        reasons.append(
            f"{poison.value} messages failed their last delivery and wait on "
            f"{EXECUTIONS_QUEUE}-poison: their attempts were recorded as failed; look at why"
        )
    if overdue.value:
        reasons.append(
            f"{overdue.value} tries are claimed by a delivery whose deadline passed more than "
            f"{round(CLAIM_OVERDUE.total_seconds())} s ago, and no delivery took them over: their "
            "messages may be lost"
        )
    status = "unhealthy" if not reachable else "degraded" if reasons else "healthy"
    body: JsonObject = {
        "status": status,
        "time": iso(now),
        "storage": {
            "tables": last_tick.problem or overdue.problem or "reachable",
            "queues": depth.problem or late.problem or poison.problem or "reachable",
        },
        "queue": {
            "name": EXECUTIONS_QUEUE,
            "depth": depth.value,
            "secondsLate": None if late.value is None else round(late.value.total_seconds(), 1),
        },
        "poison": {"name": f"{EXECUTIONS_QUEUE}-poison", "depth": poison.value},
        # Up to MOST_COUNTED: jobs with a claim past its deadline by more than CLAIM_OVERDUE.
        "claimsPastDeadline": overdue.value,
        "timer": {
            "lastTick": iso(ticked) if ticked else None,
            "secondsSinceLastTick": round((now - ticked).total_seconds(), 1) if ticked else None,
        },
    }
    if reachable and reasons:
        body["reasons"] = reasons
    return (200 if reachable else 503), body


def _minutes(span: timedelta) -> str:
    return f"{round(span.total_seconds() / 60)} minutes"


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
