"""What Azure's Python runtime library costs: the functions called directly against through it.

Two measurements, each run A/B back to back on one machine and one Python (3.13, where
azure-functions-runtime is installed), with DEVHOST_INVOCATION choosing the path:

- per execution: a small app's queue, timer and HTTP functions, which do nothing, invoked in one
  process, again and again: the CPU each invocation takes on each path (the library converts the
  trigger's data to TypedData and back, and hands plain functions to its thread pool);
- per request: the local host serving GETs of a job collection (one table read) to 16 concurrent
  clients, on one Azurite: rate, latencies and the host's CPU per request, on each path, twice in
  turn (direct, runtime, direct, runtime) so that drift on a shared machine shows.

`python -m bench.runtime`; the tables are written to bench/results/runtime.md.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.actions import cpu_seconds
from bench.api import API_VERSION, Workload, _wait_for, measure
from bench.schedule import machine
from devhost import azurite

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "runtime.md"
INVOCATIONS = 3000  # of each trigger, on each path
COLLECTIONS = (
    "/subscriptions/bench/resourceGroups/bench/providers/Microsoft.Scheduler/jobCollections"
)
ROUNDS = 2  # direct then runtime, this many times
NOTHING_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

@app.route(route="nothing")
def http_nothing(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("{}", mimetype="application/json")

@app.queue_trigger(arg_name="msg", queue_name="work", connection="AzureWebJobsStorage")
def queue_nothing(msg: func.QueueMessage) -> None:
    pass

@app.timer_trigger(arg_name="timer", schedule="0 * * * * *")
def timer_nothing(timer: func.TimerRequest) -> None:
    pass
"""


def invocations(mode: str, app_directory: Path) -> dict[str, float]:
    """In this process: microseconds of CPU per invocation of each nothing-function."""
    import azure.functions as func  # noqa: PLC0415
    from azure.functions.queue import QueueMessage  # noqa: PLC0415
    from azure.functions.timer import TimerRequest  # noqa: PLC0415

    from devhost.invocation import invoke  # noqa: PLC0415

    sys.path.insert(0, str(app_directory))
    if mode == "runtime":
        from devhost.runtime import RuntimeWorker  # noqa: PLC0415

        functions: list[Any] = list(RuntimeWorker(app_directory).start())
    else:
        import function_app  # noqa: PLC0415 (the nothing app, in app_directory)

        functions = list(function_app.app.get_functions())
    calls = {function.get_function_name(): function.get_user_function() for function in functions}
    moment = datetime(2026, 11, 27, tzinfo=UTC)
    values = {
        "http_nothing": ("req", lambda: func.HttpRequest(
            method="GET", url="http://127.0.0.1/nothing", headers={"accept": "*/*"}, body=b"")),
        "queue_nothing": ("msg", lambda: QueueMessage(
            id="id", body=b'{"job": "x"}', dequeue_count=1, pop_receipt="pr",
            insertion_time=moment, expiration_time=moment)),
        "timer_nothing": ("timer", lambda: TimerRequest(past_due=False)),
    }  # fmt: skip
    costs = {}
    for name, (argument, value) in values.items():
        for _ in range(100):  # warm up
            invoke(calls[name], **{argument: value()})
        started = cpu_seconds()
        for _ in range(INVOCATIONS):
            invoke(calls[name], **{argument: value()})
        costs[name] = (cpu_seconds() - started) * 1e6 / INVOCATIONS
    return costs


def per_execution() -> dict[str, dict[str, float]]:
    folder = Path(tempfile.mkdtemp(prefix="nothing-app-"))
    (folder / "function_app.py").write_text(textwrap.dedent(NOTHING_APP))
    found = {}
    for mode in ("direct", "runtime"):
        done = subprocess.run(
            [sys.executable, "-m", "bench.runtime", "--invocations", mode, str(folder)],
            cwd=ROOT, capture_output=True, text=True, check=True,
            env=os.environ | {"AzureWebJobsStorage": "UseDevelopmentStorage=true"},
        )  # fmt: skip
        found[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def per_request() -> list[tuple[str, Workload]]:
    emulator = azurite.start()
    rows = []
    try:
        for _ in range(ROUNDS):
            for mode in ("direct", "runtime"):
                rows.append((mode, _serve_and_measure(mode, emulator)))
    finally:
        emulator.stop()
    return rows


def _serve_and_measure(mode: str, emulator: azurite.Azurite) -> Workload:
    key, port = secrets.token_urlsafe(24), azurite.free_port()
    log = Path(tempfile.mkdtemp(prefix="devhost-")) / "output.log"
    nothing_runs = {
        f"AzureWebJobs.{name}.Disabled": "true"
        for name in ("due_attempts_timer", "executor", "retention_timer")
    }
    host = subprocess.Popen(
        [sys.executable, "-m", "devhost", "--no-azurite", "--own-host"],
        cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        env=os.environ | nothing_runs | {
            "AzureWebJobsStorage": emulator.connection_string, "SCHEDULER_FUNCTION_KEY": key,
            "SCHEDULER_PORT": str(port), "DEVHOST_INVOCATION": mode},
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(base)
        path = f"{COLLECTIONS}/runtime-{mode}"
        collection = {"location": "West Europe", "properties": {"sku": {"name": "Standard"}}}
        with httpx.Client(
            base_url=base, headers={"x-functions-key": key},
            params={"api-version": API_VERSION}, timeout=30,
        ) as client:  # fmt: skip
            client.put(path, json=collection).raise_for_status()

            def get(client_number: int, request: int) -> None:
                client.get(path).raise_for_status()

            for _ in range(50):  # warm up
                client.get(path)
            return measure(get, (host.pid, emulator.process.pid))
    finally:
        host.terminate()
        host.wait(timeout=10)


def write(executions: dict[str, dict[str, float]], requests: list[tuple[str, Workload]]) -> str:
    lines = [
        "# The runtime library's cost: direct calls against azure-functions-runtime",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}, `python -m bench.runtime`.",
        "",
        f"## Per execution (CPU per invocation of a function doing nothing, {INVOCATIONS} each)",
        "",
        "| trigger | direct (µs) | runtime library (µs) | added by the library (µs) |",
        "|---|---|---|---|",
    ]
    for name in executions["direct"]:
        direct, runtime = executions["direct"][name], executions["runtime"][name]
        added = runtime - direct
        lines.append(f"| {name.split('_')[0]} | {direct:.0f} | {runtime:.0f} | {added:.0f} |")
    lines += [
        "",
        "## Per request (GET of a job collection, 16 clients, 640 requests a run)",
        "",
        "| path | requests/s | p50 (ms) | p99 (ms) | host CPU per request (ms) |",
        "|---|---|---|---|---|",
    ]
    for mode, row in requests:
        lines.append(
            f"| {mode} | {row.rate:.0f} | {row.p50:.1f} | {row.p99:.1f} | {row.host_cpu:.2f} |"
        )
    cpu = {
        mode: statistics.mean(row.host_cpu for each, row in requests if each == mode)
        for mode in ("direct", "runtime")
    }
    lines += [
        "",
        f"The library adds {cpu['runtime'] - cpu['direct']:.2f} ms of the host's CPU to a request"
        f" ({cpu['direct']:.2f} ms directly, {cpu['runtime']:.2f} ms through it, means of the"
        f" runs above); rate and latencies are Azurite's and the machine's (load average"
        f" {os.getloadavg()[0]:.1f} at the end, other work included).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.runtime", description=__doc__)
    parser.add_argument("--invocations", nargs=2, metavar=("MODE", "APP"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.invocations:
        mode, app = options.invocations
        print(json.dumps(invocations(mode, Path(app))))
        return 0
    from devhost.runtime import runtime_installed  # noqa: PLC0415

    if not runtime_installed():
        print("bench.runtime needs azure-functions-runtime: run it on Python 3.13", file=sys.stderr)
        return 1
    started = time.monotonic()
    report = write(per_execution(), per_request())
    RESULTS.write_text(report)
    print(report)
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
