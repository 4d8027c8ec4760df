"""CPU per execution and per API request: the local host's, beside Azurite's for the same work.

One run, on a fresh Azurite, with the local host as a process of its own (`python -m devhost
--own-host`, one worker process, as `make run` serves the app) and an HTTP target in another
process. A loopback proxy between the host and Azurite counts every storage request the host
sends (`bench.counting_proxy`). The host's CPU (its process and any children) and Azurite's are
read from /proc before and after each workload:

  create    PUTs creating jobs (16 clients, spread over 16 P20Premium collections)
  replace   PUTs replacing the same jobs with the same definition (a template deployed again)
  change    PUTs replacing them with another definition (a new action URI, the same schedule)
  get       GETs of the same jobs
  execute   jobs once a minute at `--rate` executions/s (in Standard collections of 50, created
            through the API), measured for `--measure` seconds once every job has run once:
            host CPU, Azurite's CPU and storage requests per execution, lateness p50 / p99

`--ramp-step N` then adds N executions/s at a time until lateness p99 reaches a second (or
`--ramp-budget` seconds pass): the highest rate one worker process sustains. Only HTTP and
loopback; every loop is bounded. `--app-root` runs the host from another checkout
(`bench.ab` uses it for A/B runs); this benchmark's own code always drives it, so both sides of
an A/B get the same workload. Run `python -m bench.cpu` (about three minutes); results go to
bench/results/cpu.md, or as JSON to `--json`.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.actions import cpu_seconds
from bench.api import API_VERSION, job_body
from bench.counting_proxy import CountingProxy
from bench.pipeline import (
    JOBS_PER_COLLECTION,
    Calls,
    HostProcesses,
    _start_target,
    percentile,
    spread_minute,
    tree_cpu_seconds,
)
from devhost import azurite

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "cpu.md"
CLIENTS = 16
API_COLLECTIONS = 16
SUBSCRIPTION, GROUP = "bench", "cpu"
HOST_START_S = 90.0  # at most, for the host to answer
# The activity log writes a request's event within a second of its answer: each API workload
# waits this long before it is read, so that those writes count for the workload that made them.
EVENTS_WRITTEN_WITHIN_S = 1.5


@dataclasses.dataclass(frozen=True)
class Cost:
    """One workload's cost, per request (or per execution)."""

    count: int  # requests, or executions at the target
    seconds: float  # wall time measured
    host_cpu_ms: float
    azurite_cpu_ms: float
    storage_requests: float
    p50_ms: float  # latency of a request; lateness of an execution
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else float("nan")

    @property
    def host_to_azurite(self) -> float:
        return self.host_cpu_ms / self.azurite_cpu_ms if self.azurite_cpu_ms else float("nan")


@dataclasses.dataclass(frozen=True)
class Run:
    """What one run measured, and on what."""

    costs: dict[str, Cost]
    machine: str  # CPU model and cores
    host_python: str  # the Python that ran the host, and which path ran the functions
    commit: str  # of the code the host ran
    rate: float  # executions/s asked for
    when: str
    ramp: list[Cost] = dataclasses.field(default_factory=list)  # executions, rate rising

    @property
    def sustained(self) -> float:
        """The highest rate of the ramp with lateness p99 under a second (0: none, or no ramp)."""
        return max((step.rate for step in self.ramp if step.p99_ms < 1000), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Run:
        costs = {name: Cost(**cost) for name, cost in data.pop("costs").items()}
        steps = [Cost(**step) for step in data.pop("ramp", [])]
        return cls(costs=costs, ramp=steps, **data)


class Meter:
    """CPU of the host's process tree and of Azurite, and storage requests, between readings."""

    def __init__(self, host_pid: int, azurite_pid: int, proxy: CountingProxy) -> None:
        self.host_pid, self.azurite_pid, self.proxy = host_pid, azurite_pid, proxy

    def reading(self) -> tuple[float, float, int, float]:
        """(host CPU s, Azurite CPU s, storage requests, wall clock s)"""
        return (tree_cpu_seconds(self.host_pid), cpu_seconds(self.azurite_pid),
                self.proxy.total, time.perf_counter())  # fmt: skip

    def cost(
        self, before: tuple[float, float, int, float], count: int, latencies: list[float]
    ) -> Cost:
        host, storage, requests, wall = (
            now - then for now, then in zip(self.reading(), before, strict=True)
        )
        per = max(count, 1)
        return Cost(count, wall, host * 1000 / per, storage * 1000 / per, requests / per,
                    percentile(latencies, 0.5), percentile(latencies, 0.99))  # fmt: skip


def machine_name() -> str:
    """The CPU model (from /proc/cpuinfo) and how many cores this machine has."""
    cpu = platform.processor() or platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"{cpu}, {os.cpu_count()} cores"


def functions_path(host_output: str) -> str:
    """The line in which the local host says which Python runs it and how the functions run
    (direct calls or the runtime library), or '' if it said none."""
    for line in host_output.splitlines():
        if ", on Python " in line:
            return line.strip()
    return ""


def commit_of(tree: Path) -> str:
    def git(*arguments: str) -> str:
        return subprocess.run(["git", "-C", str(tree), *arguments], capture_output=True,
                              text=True, check=False).stdout.strip()  # fmt: skip

    changed = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + (" with uncommitted changes" if changed else "")


def collection_url(base: str, name: str) -> str:
    return (f"{base}/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}"
            f"/providers/Microsoft.Scheduler/jobCollections/{name}")  # fmt: skip


def in_parallel(calls: list[Callable[[httpx.Client], httpx.Response]], key: str) -> list[float]:
    """Each call once, on CLIENTS threads with a client each; the latencies (ms). A call whose
    answer is not a success stops the run."""
    clients = [httpx.Client(headers={"x-functions-key": key}, params={"api-version": API_VERSION},
                            timeout=60) for _ in range(CLIENTS)]  # fmt: skip
    latencies: list[float] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        own = []
        for call in calls[number::CLIENTS]:
            started = time.perf_counter()
            response = call(clients[number])
            own.append((time.perf_counter() - started) * 1000)
            if response.is_error:
                raise RuntimeError(f"{response.request.method} {response.request.url}:"
                                   f" {response.status_code} {response.text[:500]}")  # fmt: skip
        with lock:
            latencies.extend(own)

    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(client, range(CLIENTS)))
    finally:
        for each in clients:
            each.close()
    return latencies


def put(url: str, body: dict[str, Any]) -> Callable[[httpx.Client], httpx.Response]:
    return lambda client: client.put(url, json=body)


def get(url: str) -> Callable[[httpx.Client], httpx.Response]:
    return lambda client: client.get(url)


def api_costs(host: HostProcesses, meter: Meter, jobs: int) -> dict[str, Cost]:
    """Creates, replaces and GETs of `jobs` jobs, spread over API_COLLECTIONS collections."""
    collections = [collection_url(host.base, f"api-{n}") for n in range(API_COLLECTIONS)]
    premium = {"location": "local", "properties": {"sku": {"name": "P20Premium"}}}
    in_parallel([put(url, premium) for url in collections], host.key)
    urls = [f"{collections[n % API_COLLECTIONS]}/jobs/job-{n}" for n in range(jobs)]
    body = job_body()  # starts tomorrow: each write puts its first attempt in the due index
    changed: dict[str, Any] = copy.deepcopy(body)
    changed["properties"]["action"]["request"]["uri"] = "https://example.org/another-hook"
    costs = {}
    for name, calls in (
        ("create", [put(url, body) for url in urls]),
        ("replace", [put(url, body) for url in urls]),
        ("change", [put(url, changed) for url in urls]),
        ("get", [get(url) for url in urls]),
    ):
        before = meter.reading()
        latencies = in_parallel(calls, host.key)
        time.sleep(EVENTS_WRITTEN_WITHIN_S)
        costs[name] = meter.cost(before, len(calls), latencies)
    return costs


class Executions:
    """Jobs once a minute calling the target, created through the API in Standard collections
    of 50, and what their executions cost."""

    def __init__(self, host: HostProcesses, meter: Meter, calls: Calls, target: str) -> None:
        self.host, self.meter, self.calls, self.target = host, meter, calls, target
        self.jobs = 0

    def add(self, count: int) -> datetime:
        """`count` more jobs, their starts spread over a minute; when the first starts."""
        lead = 15 + count / 40  # creating runs at 60-130 jobs/s here: all saved before the first
        first = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)
        numbers = range(self.jobs, self.jobs + count)
        homes = sorted({n // JOBS_PER_COLLECTION for n in numbers} - {
            n // JOBS_PER_COLLECTION for n in range(self.jobs)})  # fmt: skip
        standard = {"location": "local", "properties": {"sku": {"name": "Standard"}}}
        in_parallel([put(self._home(home), standard) for home in homes], self.host.key)
        bodies = [
            {"properties": {
                "startTime": start.isoformat(),
                "action": {"type": "Http", "retryPolicy": {"retryType": "None"},
                           "request": {"uri": self.target, "method": "POST", "body": "x"}},
                "recurrence": {"frequency": "Minute", "interval": 1},
            }}
            for start in spread_minute(count, first)
        ]  # fmt: skip
        in_parallel(
            [put(f"{self._home(n // JOBS_PER_COLLECTION)}/jobs/job-{n}", body)
             for n, body in zip(numbers, bodies, strict=True)], self.host.key,
        )  # fmt: skip
        self.jobs += count
        return first

    def _home(self, number: int) -> str:
        return collection_url(self.host.base, f"run-{number}")

    def cost(self, first: datetime, measure: float) -> Cost:
        """Measured for `measure` seconds from a minute after `first`: each job has run once
        by then (their first minute warms the host up)."""
        time.sleep(max(0.0, (first - datetime.now(UTC)).total_seconds() + 60))
        began, before = time.time(), self.meter.reading()
        time.sleep(measure)
        ended = time.time()
        late = self.calls.since(began, ended)
        return self.meter.cost(before, len(late), late)


def ramp(executions: Executions, step: float, measure: float, budget: float) -> list[Cost]:
    """`step` executions/s more at a time, each measured for `measure` seconds, until lateness
    p99 reaches a second or the next step would end past `budget` seconds from now."""
    steps: list[Cost] = []
    began = time.monotonic()
    while not steps or steps[-1].p99_ms < 1000:
        count = round(step * 60)
        takes = 15 + count / 40 + 60 + measure
        if time.monotonic() - began + takes > budget:
            break
        steps.append(executions.cost(executions.add(count), measure))
    return steps


def measure_run(options: argparse.Namespace) -> Run:
    app_root = Path(options.app_root).resolve()
    commit = commit_of(app_root)  # before the run: the checkout may move on meanwhile
    work = Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    emulator = azurite.start()
    proxy = CountingProxy([emulator.blob_port, emulator.queue_port, emulator.table_port])
    proxied = dataclasses.replace(
        emulator, blob_port=proxy.ports[emulator.blob_port],
        queue_port=proxy.ports[emulator.queue_port], table_port=proxy.ports[emulator.table_port],
    )  # fmt: skip
    (work / "calls.log").touch()
    target = _start_target(work / "calls.log")
    host = None
    try:
        host = HostProcesses(proxied.connection_string, 1, work / "host.log", app_root=app_root,
                             python=options.python, start_within=HOST_START_S)  # fmt: skip
        meter = Meter(host.process.pid, emulator.process.pid, proxy)
        costs = api_costs(host, meter, options.api_jobs)
        executions = Executions(host, meter, Calls(work / "calls.log"),
                                f"http://127.0.0.1:{target.port}/hook")  # fmt: skip
        first = executions.add(round(options.rate * 60))
        costs["execute"] = executions.cost(first, options.measure)
        steps = [costs["execute"]]
        if options.ramp_step:
            steps += ramp(executions, options.ramp_step, options.ramp_measure, options.ramp_budget)
    finally:
        if host is not None:
            host.stop()
        target.stop()
        proxy.stop()
        emulator.stop()
    return Run(
        costs=costs, machine=machine_name(),
        host_python=functions_path((work / "host.log").read_text(errors="replace")),
        commit=commit, rate=options.rate, ramp=steps if options.ramp_step else [],
        when=f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
    )  # fmt: skip


LABELS = {
    "create": "PUT creating a job",
    "replace": "PUT replacing a job with its definition",
    "change": "PUT replacing a job with another definition",
    "get": "GET of a job",
    "execute": "execution (Http action, jobs once a minute)",
}


def report(run: Run, options: argparse.Namespace) -> str:
    execute = run.costs["execute"]
    rows = [
        f"| {LABELS[name]} | {cost.count} | {cost.rate:.1f} | {cost.host_cpu_ms:.2f} |"
        f" {cost.azurite_cpu_ms:.2f} | {cost.host_to_azurite:.2f} | {cost.storage_requests:.2f} |"
        f" {cost.p50_ms:.0f} / {cost.p99_ms:.0f} |"
        for name, cost in run.costs.items()
    ]
    lines = [
        "# CPU per execution and per request",
        "",
        f"Measured {run.when} by `python -m bench.cpu` on {run.machine}; the host:",
        f"{run.host_python} (code at {run.commit}). Other processes may have shared the cores.",
        "",
        f"{options.api_jobs} jobs created, replaced (with their definition, then another) and"
        f" read by {CLIENTS} clients; then"
        f" {round(run.rate * 60)} jobs once a minute ({run.rate:g} executions/s), measured for"
        f" {options.measure:.0f} s after their first minute.",
        "",
        "| per | count | per second | host CPU ms | Azurite CPU ms | host / Azurite |"
        " storage requests | p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Host CPU per execution is {execute.host_to_azurite:.2f} times Azurite's for the same"
        f" executions (issue 34's target: at most 1.3); storage requests per execution"
        f" {execute.storage_requests:.2f} (at most 2.5); lateness p99 {execute.p99_ms:.0f} ms at"
        f" {execute.rate:.1f}/s.",
        "",
        "p50 / p99: a request's latency at the client, or an execution's lateness at the target.",
        "Storage requests: every request the host sent to Azurite, counted by a proxy between",
        "them (the queue trigger's polling and the timer's ticks included).",
        "",
    ]
    if run.ramp:
        lines += [
            f"Ramp: {options.ramp_step:g} executions/s more a step, each measured for"
            f" {options.ramp_measure:.0f} s after its new jobs' first minute; the highest rate with"
            f" lateness p99 under 1 s: {run.sustained:.1f}/s.",
            "",
            "| executions/s | p50 / p99 ms | host CPU ms per execution | host's cores |"
            " Azurite's cores |",
            "|---:|---:|---:|---:|---:|",
            *(f"| {step.rate:.1f} | {step.p50_ms:.0f} / {step.p99_ms:.0f} |"
              f" {step.host_cpu_ms:.2f} | {step.host_cpu_ms * step.rate / 1000:.2f} |"
              f" {step.azurite_cpu_ms * step.rate / 1000:.2f} |" for step in run.ramp),
            "",
        ]  # fmt: skip
    return "\n".join(lines)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_measurement_options(parser)
    parser.add_argument("--app-root", default=str(ROOT), help="the checkout the host runs from")
    parser.add_argument("--json", help="write the run as JSON here instead of the results page")
    return parser


def add_measurement_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=20.0, help="executions/s measured")
    parser.add_argument("--measure", type=float, default=60.0, help="seconds of executions")
    parser.add_argument("--api-jobs", type=int, default=320, help="jobs created, replaced, read")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs the host")
    parser.add_argument(
        "--ramp-step", type=float, default=0.0,
        help="then add this many executions/s at a time until lateness p99 is 1 s (0: none)",
    )  # fmt: skip
    parser.add_argument("--ramp-measure", type=float, default=30.0, help="seconds per ramp step")
    parser.add_argument(
        "--ramp-budget", type=float, default=900.0, help="seconds the ramp may take, at most"
    )


def main(argv: list[str] | None = None) -> int:
    options = arguments().parse_args(argv)
    run = measure_run(options)
    if options.json:
        Path(options.json).write_text(json.dumps(run.to_json(), indent=1))
        return 0
    RESULTS.write_text(report(run, options))
    print(RESULTS.read_text())
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the proxy's and the target's threads may still wait on closed sockets
