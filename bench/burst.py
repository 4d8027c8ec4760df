"""The midnight burst: thousands of one-off jobs due at the same second, and how fast they drain.

Every scheduler meets it: at 00:00:00 every nightly job falls due at once. This benchmark saves
one-off jobs straight into the store, as the API's PUT saves them (bench/pipeline.py's way, not
through HTTP), all due at one whole second, and notes at an HTTP target, in another process,
when each one starts. Four bursts, each at a second of its own:

  1,000 jobs in one P20Premium collection (its quota is 1,000 jobs)
  1,000 jobs over 20 Standard collections of 50
  5,000 jobs in five P20Premium collections of one subscription (no collection holds more, and
        the quota is kept, not raised)
  5,000 jobs over 100 Standard collections of 50

For each: how late the first and the last start came, the drain rate (executions/s from the
first start to the last), nothing lost, nothing run twice (calls counted per execution id). The
local host runs as its own process (`python -m devhost --own-host`, FUNCTIONS_WORKER_PROCESS_COUNT
from --processes) with the settings of `make run`: a tick a minute, a look-ahead of 90 s. So a
burst is due more than the horizon (180 s) after its jobs are saved, and reaches the queue
through the due index and the tick, as a burst of jobs made long before does.

Beside it, in the same run, on an Azurite and a host of their own, a ramp of the pipeline
benchmark (bench/pipeline.py) finds the highest rate this host sustains with p99 lateness under
a second. The target: no burst drains below 0.9 of it.

Run with `python -m bench.burst` (about 30 minutes); results go to bench/results/burst.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.pipeline import (
    Calls,
    Host,
    HostProcesses,
    ProcessRun,
    _start_target,
    sustained_rate,
)
from bench.schedule import machine
from devhost import azurite

RESULTS = Path(__file__).parent / "results" / "burst.md"
HORIZON_S = 180  # twice the look-ahead of 90 s: what is due later goes into the due index
SAVE_RATE = 50.0  # jobs saved per second, half what was seen here: when the bursts can be due
TICK_EARLY_S = 80  # a burst due at :20 is moved to the queue by the tick at :00 a minute before


@dataclass(frozen=True)
class Burst:
    name: str
    jobs: int
    sku: str
    per_collection: int


BURSTS = (
    Burst("1,000 in one collection", 1000, "P20Premium", 1000),
    Burst("1,000 over 20 collections", 1000, "Standard", 50),
    Burst("5,000 in 5 collections of 1,000", 5000, "P20Premium", 1000),
    Burst("5,000 over 100 collections", 5000, "Standard", 50),
)


@dataclass(frozen=True)
class Drained:
    burst: Burst
    due: datetime
    first_late_ms: float
    last_late_ms: float
    p50_late_ms: float
    rate: float  # executions/s from the first start to the last
    called: int  # distinct occurrences called
    run_twice: int


def collection(host: Host, sku: str) -> Any:
    from shared.domain.collection import CollectionBody  # noqa: PLC0415
    from shared.domain.collection_document import CollectionDocument  # noqa: PLC0415
    from shared.domain.ids import CollectionId  # noqa: PLC0415
    from shared.storage.interface import Preconditions  # noqa: PLC0415

    made = CollectionId("bench", "burst", f"jc-{uuid.uuid4().hex[:8]}")
    body = CollectionBody.model_validate(
        {"location": "West Europe", "properties": {"sku": {"name": sku}}}
    )
    host.services.storage.collections.save_collection(
        made, CollectionDocument.created(body), Preconditions()
    )
    return made


def save_burst(host: Host, burst: Burst, due: datetime, target_url: str) -> list[str]:
    """Save the burst's one-off jobs, all due at `due`, as the API's PUT does; their names."""
    from shared.domain.ids import JobId  # noqa: PLC0415
    from shared.domain.job_definition import JobBody  # noqa: PLC0415

    count = math.ceil(burst.jobs / burst.per_collection)
    homes = [collection(host, burst.sku) for _ in range(count)]
    properties = JobBody.model_validate(
        {
            "properties": {
                "startTime": due.isoformat(),
                "action": {
                    "type": "Http",
                    "request": {"uri": target_url, "method": "POST", "body": "x"},
                    "retryPolicy": {"retryType": "None"},
                },
            }
        }
    ).properties
    names = [f"burst-{uuid.uuid4().hex[:12]}" for _ in range(burst.jobs)]
    scheduling, now = host.services.scheduling, host.services.now

    def save(n: int) -> None:
        job = JobId(homes[n // burst.per_collection], names[n])
        scheduling.save_definition(job, properties, now())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(save, range(burst.jobs)))
    return names


def schedule(bursts: tuple[Burst, ...], start: datetime, rate: float) -> list[datetime]:
    """When each burst is due: all saved first (at SAVE_RATE, each more than the horizon ahead),
    then one after the other at :20 of a minute, so that no burst starts, and no tick moves a
    burst's rows, while the one before drains (at 0.75 of `rate`, plus 10 s)."""
    saved = start + timedelta(seconds=sum(b.jobs for b in bursts) / SAVE_RATE + 10)
    earliest = max(saved, start + timedelta(seconds=bursts[0].jobs / SAVE_RATE + HORIZON_S + 10))
    due = earliest.replace(second=20, microsecond=0)
    due += timedelta(minutes=1) if due < earliest else timedelta(0)
    moments: list[datetime] = []
    for burst in bursts:
        moments.append(due)
        drained_by = due + timedelta(seconds=burst.jobs / max(0.75 * rate, 1.0) + 10)
        if drained_by <= due + timedelta(minutes=1):
            due += timedelta(minutes=1)  # its rows were moved by the tick before this drain
        else:  # the next burst's tick, at :00 a minute before it, comes once this has drained
            tick = drained_by.replace(second=0, microsecond=0) + timedelta(minutes=1)
            due = tick + timedelta(seconds=TICK_EARLY_S)
    return moments


def drained(burst: Burst, due: datetime, calls: Calls, names: set[str]) -> Drained:
    mine = sorted((call for call in calls.all() if call.job in names), key=lambda c: c.arrived)
    if not mine:
        nothing = float("nan")
        return Drained(burst, due, nothing, nothing, nothing, 0.0, 0, 0)
    times = Counter(call.execution for call in mine)
    span = mine[-1].arrived - mine[0].arrived
    lateness = sorted(call.late_ms for call in mine)
    return Drained(
        burst,
        due,
        first_late_ms=mine[0].late_ms,
        last_late_ms=mine[-1].late_ms,
        p50_late_ms=lateness[len(lateness) // 2],
        rate=(len(mine) - 1) / span if span > 0 else float("nan"),
        called=len(times),
        run_twice=sum(count - 1 for count in times.values()),
    )


def run_bursts(
    storage: str,
    bursts: tuple[Burst, ...],
    *,
    processes: int,
    rate: float,
    work: Path,
    log: Callable[[str], None],
) -> list[Drained]:
    """Save every burst, then wait for each and note how it drained; `rate` is the sustained
    rate, by which the bursts are spaced and their stragglers awaited."""
    calls_path = work / "burst-calls.log"
    calls_path.touch()
    target = _start_target(calls_path)
    host_processes = HostProcesses(storage, processes, work / "burst-host.log")
    url = f"http://127.0.0.1:{target.port}/hook"
    try:
        host = Host(storage, url, run_triggers=False)
        calls = Calls(calls_path)
        moments = schedule(bursts, datetime.now(UTC), rate)
        saved = []
        for burst, due in zip(bursts, moments, strict=True):
            began = time.monotonic()
            saved.append(set(save_burst(host, burst, due, url)))
            ahead = (due - datetime.now(UTC)).total_seconds()
            log(f"saved {burst.name} in {time.monotonic() - began:.0f} s, due at {due:%H:%M:%S}"
                f" ({ahead:.0f} s ahead)")  # fmt: skip
            if ahead < HORIZON_S:
                log("  (less than the horizon ahead: some went straight onto the queue)")
        results = []
        for burst, due, names in zip(bursts, moments, saved, strict=True):
            # Wait for the burst, then until every job has called or for at most its drain at a
            # quarter of the sustained rate, whichever comes first.
            patience = due + timedelta(seconds=burst.jobs / max(rate / 4, 1.0) + 30)
            time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()))
            while datetime.now(UTC) < patience:
                if len({c.execution for c in calls.all() if c.job in names}) >= burst.jobs:
                    break
                time.sleep(1)
            time.sleep(2)  # a repeat of a call would come now
            results.append(drained(burst, due, calls, names))
            done = results[-1]
            log(f"{burst.name}: first {done.first_late_ms:.0f} ms, last {done.last_late_ms:.0f} ms"
                f" late, {done.rate:.1f}/s, {done.called}/{burst.jobs} called,"
                f" {done.run_twice} twice")  # fmt: skip
        return results
    finally:
        host_processes.stop()
        target.stop()


def report(ramp: ProcessRun, results: list[Drained], processes: int) -> str:
    sustained = ramp.best.rate
    rows = []
    for done in results:
        ratio = done.rate / sustained if sustained else float("nan")
        whole = done.called == done.burst.jobs and not done.run_twice
        verdict = "met" if ratio >= 0.9 and whole else "missed"
        rows.append(
            f"| {done.burst.name} | {done.first_late_ms:,.0f} ms | {done.p50_late_ms:,.0f} ms"
            f" | {done.last_late_ms:,.0f} ms | {done.rate:.1f}/s | {ratio:.2f} ({verdict})"
            f" | {done.burst.jobs - done.called} | {done.run_twice} |"
        )
    steps = ", ".join(f"{s.rate:.1f}/s p99 {s.p99:,.0f} ms" for s in ramp.steps)
    if all(step.sustained for step in ramp.steps):
        steps += "; no step missed, so the host sustains at least this: the ratios below are"
        steps += " upper bounds"
    lines = [
        "# The midnight burst",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} by `python -m bench.burst` on {machine()};",
        "other processes may have shared the cores. The local host ran as its own process",
        f"(`python -m devhost --own-host`, {processes} worker process(es)), on Azurite, with",
        "`make run`'s settings (a tick a minute, a look-ahead of 90 s); the HTTP target in another",
        "process noted each call. All jobs were one-off jobs saved straight into the store, all of",
        "a burst due at one whole second, saved more than 180 s ahead, so they reached the queue",
        "through the due index and the tick. 5,000 in one subscription took five P20Premium",
        "collections: a collection holds at most 1,000 jobs, and no quota was raised.",
        "",
        f"Highest sustained rate of the same host in the same run (a ramp of the pipeline"
        f" benchmark, jobs once a minute, p99 < 1 s): **{sustained:.1f}/s** ({steps}).",
        "",
        "| burst | first start late | half started by | last start late | drain rate"
        " | drain / sustained (target ≥ 0.9) | lost | run twice |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "The drain rate counts executions from the first start to the last. Lost: jobs whose call",
        "never came within the patience (the drain at a quarter of the sustained rate, plus 30 s).",
        "Run twice: calls beyond the first with the same `x-ms-scheduler-execution-id`.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=1, help="the host's worker processes")
    parser.add_argument("--ramp-start", type=float, default=50.0, help="executions/s first")
    parser.add_argument("--ramp-climb", type=float, default=10.0, help="executions/s per step")
    parser.add_argument("--ramp-measure", type=float, default=30.0, help="seconds per step")
    parser.add_argument("--ramp-budget", type=float, default=900.0, help="seconds of ramp")
    parser.add_argument("--scale", type=float, default=1.0, help="burst sizes times this")
    options = parser.parse_args(argv)

    def log(text: str) -> None:
        print(f"{datetime.now(UTC):%H:%M:%S} {text}", flush=True)

    # A short run while building: smaller bursts of the same shape.
    bursts = tuple(
        Burst(b.name, max(1, round(b.jobs * options.scale)), b.sku,
              max(1, round(b.per_collection * options.scale)))
        for b in BURSTS
    )  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="bench-burst-"))
    rates = [options.ramp_start + options.ramp_climb * n for n in range(12)]
    emulator = azurite.start()
    try:
        ramp = sustained_rate(
            emulator.connection_string, options.processes, rates,
            measure=options.ramp_measure, budget=options.ramp_budget, work=work, log=log,
            storage_pid=emulator.process.pid,
        )  # fmt: skip
    finally:
        emulator.stop()
    log(f"sustained: {ramp.best.rate:.1f}/s")
    emulator = azurite.start()
    try:
        results = run_bursts(
            emulator.connection_string, bursts, processes=options.processes,
            rate=ramp.best.rate, work=work, log=log,
        )  # fmt: skip
    finally:
        emulator.stop()
    log(f"logs of the hosts and the target: {work}")
    RESULTS.write_text(report(ramp, results, options.processes))
    print(RESULTS.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
