"""CPU the telemetry hooks add to one execution, measured in-process without storage or a target.

One execution's hooks, as the dispatcher and the executor call them
(shared/execution/dispatch.py, worker.py): the `hand off` span around the send to the queue,
its trace context carried in the delivery and read back by the execution span, that span's
`call target` child, and `executed` (four counters and histograms, the span's attributes),
run `--executions` times with the OpenTelemetry SDK recording in memory
(`SCHEDULER_TELEMETRY_EXPORTER=memory`: metrics aggregated in memory, spans batched and
dropped), and again with telemetry off. The difference per execution, in process CPU time, is
what metrics cost an execution; set beside `bench.cpu`'s host CPU per execution it gives the
share. `python -m bench.telemetry_cost [--executions N]`; the report goes to
bench/results/telemetry_cost.md.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared import telemetry
from shared.domain.attempts import Attempt, Delivery, Pending
from shared.domain.decisions import Outcome, Settlement
from shared.domain.ids import CollectionId, JobId
from shared.settings import Settings

RESULTS = Path(__file__).parent / "results" / "telemetry_cost.md"
T0 = datetime(2026, 12, 1, 2, 30, tzinfo=UTC)


class _Document:
    state = None  # not faulted


def one_execution(hooks: telemetry.Telemetry, delivery: Delivery, outcome: Outcome) -> None:
    settlement = Settlement(_Document(), [], [])  # type: ignore[arg-type]
    with hooks.handing_off([delivery]) as handed:
        [delivery] = handed
    with hooks.execution(delivery):
        with hooks.step("call target"):
            pass
        hooks.executed(delivery, delivery.pending.attempt, outcome, settlement)


def cpu_per_execution(hooks: telemetry.Telemetry, executions: int) -> float:
    """Process CPU ms per execution, over `executions` of them across 50 jobs."""
    jobs = [JobId(CollectionId("sub", "group", "bench"), f"job-{n}") for n in range(50)]
    outcome = Outcome(True, T0 + timedelta(milliseconds=3), T0 + timedelta(milliseconds=40), "ok")
    deliveries = [Delivery(job, T0, Pending(Attempt(T0), T0)) for job in jobs]
    for delivery in deliveries:  # warm up: first use of each attribute set
        one_execution(hooks, delivery, outcome)
    started = time.process_time()
    for n in range(executions):
        one_execution(hooks, deliveries[n % len(deliveries)], outcome)
    return (time.process_time() - started) * 1000 / executions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--executions", type=int, default=20000)
    parser.add_argument("--output", default=str(RESULTS))
    options = parser.parse_args(argv)
    off = cpu_per_execution(telemetry.OFF, options.executions)
    memory = Settings.from_environment({"SCHEDULER_TELEMETRY_EXPORTER": "memory"})
    on_hooks = telemetry.configure(memory)
    on = cpu_per_execution(on_hooks, options.executions)
    text = (
        "# CPU the telemetry hooks add to an execution\n\n"
        f"Measured by `python -m bench.telemetry_cost --executions {options.executions}` on "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC (other processes shared the machine).\n\n"
        "| telemetry | CPU ms per execution, hooks only |\n|---|---:|\n"
        f"| off | {off:.4f} |\n| on, recorded in memory | {on:.4f} |\n\n"
        f"Added per execution: {on - off:.4f} ms.\n"
    )
    Path(options.output).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
