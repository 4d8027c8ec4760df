"""The execution pipeline under load: lateness, storage requests per execution, timer rows, memory.

The benchmark process is the host: it loads function_app and runs its timer and queue triggers
with the local host's own runners, on a fresh Azurite, as `make run` does. HTTP targets run in a
separate process and note, for every call, how late it came (arrival minus the
`x-ms-scheduler-expected-execution-time` header). Jobs are saved as the API saves them.

Phases (issue 4's targets), in this order:
  raw      Azurite's own queue send + receive + delete rate, for the ratio
  tick     rows and requests of a tick with 1,000 due rows, alone and among 100,000 not due
  lone     one job at a time (a one-off every 2 s): lateness p99 <= 200 ms
  ramp     jobs once a minute added step by step while p99 stays under 1 s
  load     then up to 3,000 such jobs (50 executions/s): lateness p50 <= 150 ms and p99 <= 1 s
           over 5 minutes; storage requests per execution <= 4.5; RSS growth <= 10% over 10
           minutes
  beyond   more jobs, in smaller steps, until p99 reaches 1 s: the highest sustained rate
Jobs live in Standard collections of 50, as a quota of 50 requires.

`--compare-processes` runs a mode of its own instead: the local host as a separate process
(`python -m devhost --own-host`), with FUNCTIONS_WORKER_PROCESS_COUNT 1 and then 2, each on a
fresh Azurite, ramped until p99 lateness reaches 1 s (about 35 minutes for the pair); the target
counts calls per execution id, so that an occurrence run twice or skipped shows. Its section of
bench/results/pipeline.md is replaced, the rest kept (and the full run keeps that section).
`--lone-only` runs the lone phase alone and prints each call's lateness on one line (`LONE`
and a JSON list, in ms), writing nothing: `bench.lone_ab` compares two commits with it.
Run with `python -m bench.pipeline` (30 minutes, more if many steps pass beyond the load);
results go to bench/results/pipeline.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from azure.storage.queue import QueueClient

from bench.actions import cpu_seconds
from bench.http_target import QuietHandler, TargetServer
from bench.schedule import machine
from devhost import azurite

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "pipeline.md"
LONE_MARK = "LONE"  # what --lone-only prints before the lateness of each call
JOBS_PER_COLLECTION = 50
DEFINED_AT = datetime(2026, 1, 1, tzinfo=UTC)  # of the tick phase's index rows: any instant will do


# --- the target, in its own process -------------------------------------------------------------


def _serve_target(port_out: Any, log_path: str) -> None:
    """Answer 200 to everything; append a line per call to `log_path`: arrival (epoch seconds),
    lateness (arrival minus expected time, ms), execution id, job name, expected time."""
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 (lives as long as the process)
    lock = threading.Lock()

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            arrived = time.time()
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            expected = self.headers.get("x-ms-scheduler-expected-execution-time", "")
            moment = datetime.fromisoformat(expected.replace("Z", "+00:00")).timestamp()
            execution = self.headers.get("x-ms-scheduler-execution-id", "-")
            job = self.headers.get("x-ms-scheduler-jobid", "-").rsplit("/", 1)[-1]
            with lock:
                late = (arrived - moment) * 1000
                log.write(f"{arrived:.4f} {late:.1f} {execution} {job} {moment:.3f}\n")
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    server = TargetServer(("127.0.0.1", 0), Handler)
    port_out.send(server.server_address[1])
    server.serve_forever()


@dataclass(frozen=True)
class Call:
    arrived: float  # epoch seconds
    late_ms: float
    execution: str  # x-ms-scheduler-execution-id: the same for every delivery of an occurrence
    job: str
    expected: float  # epoch seconds


class Calls:
    """What the target process noted."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[Call]:
        found = []
        for line in self.path.read_text().splitlines():
            arrived, late, execution, job, expected = line.split()
            found.append(Call(float(arrived), float(late), execution, job, float(expected)))
        return found

    def since(self, moment: float, until: float = float("inf")) -> list[float]:
        """Lateness (ms) of the calls that arrived from `moment` until `until`."""
        return [call.late_ms for call in self.all() if moment <= call.arrived < until]

    def run_twice(self) -> int:
        """Occurrences called more than once (counted once each time they were repeated)."""
        counts = Counter(call.execution for call in self.all())
        return sum(count - 1 for count in counts.values())

    def missed(self, period: float = 60.0, until: float = float("inf")) -> int:
        """Occurrences skipped between a recurring job's first and last call seen, of those
        expected no later than `until`."""
        seen: dict[str, set[float]] = defaultdict(set)
        for call in self.all():
            if call.expected <= until:
                seen[call.job].add(round(call.expected))
        return sum(
            round((max(moments) - min(moments)) / period) + 1 - len(moments)
            for moments in seen.values()
        )


# --- the host, in this process ------------------------------------------------------------------


HOST_SETTINGS = {
    "SCHEDULER_TICK_SCHEDULE": "0 * * * * *",
    "SCHEDULER_LOOKAHEAD_SECONDS": "90",
    "SCHEDULER_CLEANUP_SCHEDULE": "0 0 0 1 1 *",
    "SCHEDULER_OUTBOUND_ALLOWLIST": "127.0.0.1/32",
}


class Host:
    """Saves jobs as the API does; with `run_triggers`, this process is also the host (the
    local host's trigger runners in threads), otherwise a `HostProcesses` runs them."""

    def __init__(self, storage: str, target_url: str, *, run_triggers: bool = True) -> None:
        os.environ.update({"AzureWebJobsStorage": storage, **HOST_SETTINGS})
        sys.path.insert(0, str(ROOT))
        from shared import services  # noqa: PLC0415
        from shared.settings import Settings  # noqa: PLC0415

        self.request_counter = services.STORAGE_REQUESTS
        self.target_url = target_url
        self.runners: list[Any] = []
        if run_triggers:
            import function_app  # noqa: PLC0415 (reads its settings when imported)
            from devhost.triggers import triggers_of  # noqa: PLC0415

            self.services = services.current()  # the one function_app's functions use
            queues = json.loads((ROOT / "host.json").read_text())["extensions"]["queues"]
            functions = function_app.app.get_functions()
            self.runners = triggers_of(
                functions, queues, storage, raw_request_hook=services.STORAGE_REQUESTS
            )
            for runner in self.runners:
                threading.Thread(target=runner.run, daemon=True).start()
        else:  # services of their own: each comparison runs on an Azurite of its own
            self.services = services.build(Settings.from_environment())
        self.collection = self.new_collection()
        self._filling, self._room = self.collection, JOBS_PER_COLLECTION

    def new_collection(self) -> Any:
        """A Standard collection, as most users have: up to 50 jobs, each at most once a minute."""
        from shared.domain.collection import CollectionBody  # noqa: PLC0415
        from shared.domain.collection_document import CollectionDocument  # noqa: PLC0415
        from shared.domain.ids import CollectionId  # noqa: PLC0415
        from shared.storage.interface import Preconditions  # noqa: PLC0415

        collection = CollectionId("bench", "pipeline", f"jc-{uuid.uuid4().hex[:6]}")
        body = CollectionBody.model_validate(
            {
                "location": "West Europe",
                "properties": {"sku": {"name": "Standard"}},
            }
        )
        document = CollectionDocument.created(body)
        self.services.storage.collections.save_collection(collection, document, Preconditions())
        return collection

    def put_jobs(self, bodies: list[dict[str, Any]]) -> None:
        """Save jobs as the API's PUT does (the same code, without the HTTP round trip)."""
        from shared.domain.ids import JobId  # noqa: PLC0415
        from shared.domain.job_definition import JobBody  # noqa: PLC0415

        scheduling, now = self.services.scheduling, self.services.now

        homes = []
        for _ in bodies:  # fill collections 50 jobs at a time, as a quota of 50 requires
            if self._room == 0:
                self._filling, self._room = self.new_collection(), JOBS_PER_COLLECTION
            homes.append(self._filling)
            self._room -= 1

        def put(body: dict[str, Any], home: Any) -> None:
            job = JobId(home, f"job-{uuid.uuid4().hex[:12]}")
            properties = JobBody.model_validate({"properties": body}).properties
            scheduling.save_definition(job, properties, now())

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, bodies, homes))

    def job_body(self, start: datetime, recurring: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "startTime": start.isoformat(),
            "action": {
                "type": "Http",
                "request": {"uri": self.target_url, "method": "POST", "body": "x"},
                "retryPolicy": {"retryType": "None"},
            },
        }
        if recurring:
            body["recurrence"] = {"frequency": "Minute", "interval": 1}
        return body

    @property
    def storage_requests(self) -> int:
        return self.request_counter.count


class HostProcesses:
    """`python -m devhost --own-host` with FUNCTIONS_WORKER_PROCESS_COUNT=`count`, as
    `make run` serves the app, on `storage`; its output goes to `log_path`. By default this
    checkout's code on this Python; `app_root` and `python` choose others (bench.ab)."""

    def __init__(
        self,
        storage: str,
        count: int,
        log_path: Path,
        *,
        app_root: Path = ROOT,
        python: str = sys.executable,
        start_within: float = 60.0,
    ) -> None:
        self.port, self.key = azurite.free_port(), uuid.uuid4().hex
        environment = (
            os.environ
            | HOST_SETTINGS
            | {
                "AzureWebJobsStorage": storage,
                "FUNCTIONS_WORKER_PROCESS_COUNT": str(count),
                "SCHEDULER_PORT": str(self.port),
                "SCHEDULER_FUNCTION_KEY": self.key,
            }
        )
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [python, "-m", "devhost", "--no-azurite", "--own-host"],
                cwd=app_root, env=environment, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + start_within
        while not _answers(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"the local host did not start: see {log_path}")
            time.sleep(0.1)

    @property
    def base(self) -> str:
        """The host's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as connection:
            connection.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := connection.recv(65536):  # all of it: the host closes when done
                answer += chunk
            return answer.startswith(b"HTTP/1.1")
    except OSError:
        return False


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else float("nan")


def spread_minute(count: int, first: datetime) -> list[datetime]:
    """`count` start times spread evenly over one minute from `first`."""
    return [first + timedelta(seconds=60 * n / count) for n in range(count)]


# --- phases -------------------------------------------------------------------------------------


def lone(host: Host, calls: Calls, jobs: int) -> dict[str, float]:
    late = lone_lateness(host, calls, jobs)
    return {
        "calls": len(late),
        "p50": statistics.median(late),
        "p99": percentile(late, 0.99),
        "max": max(late),
    }


def lone_lateness(host: Host, calls: Calls, jobs: int) -> list[float]:
    """How late (ms) each of `jobs` one-offs 2 s apart was called, nothing else running."""
    first = datetime.now(UTC) + timedelta(seconds=10)
    host.put_jobs(
        [host.job_body(first + timedelta(seconds=2 * n), recurring=False) for n in range(jobs)]
    )
    began = first.timestamp() - 1
    time.sleep((first - datetime.now(UTC)).total_seconds() + 2 * jobs + 3)
    return calls.since(began)


def add_jobs(host: Host, count: int, lead: float | None = None) -> datetime:
    """Save `count` more jobs once a minute, spread over the minute; when the first is due
    (`lead` seconds from now: by default enough for saving at 30 jobs/s, and 20 s more)."""
    # Saving runs at about 45 jobs/s here: the first occurrences come after the last is saved.
    lead = 20 + count / 30 if lead is None else lead
    first = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)
    host.put_jobs([host.job_body(start, recurring=True) for start in spread_minute(count, first)])
    return first


def ramp(
    host: Host,
    *,
    calls: Calls,
    jobs: int,
    step: int,
    most: int,
    measure: float,
    log: Callable[[str], None],
) -> list[tuple[int, float, float, float]]:
    """Add `step` jobs at a time to the `jobs` running; (jobs, executions/s, p50, p99) per step,
    until p99 >= 1 s or `most` jobs."""
    found: list[tuple[int, float, float, float]] = []
    while jobs + step <= most and not (found and found[-1][3] >= 1000):
        first = add_jobs(host, step)
        jobs += step
        time.sleep(max(0.0, (first - datetime.now(UTC)).total_seconds()) + 60)
        began = time.time()
        time.sleep(measure)
        late = calls.since(began, time.time())
        found.append((jobs, len(late) / measure, statistics.median(late), percentile(late, 0.99)))
        log(f"ramp: {jobs} jobs, {found[-1][1]:.1f}/s, p99 {found[-1][3]:.0f} ms")
    return found


def load(
    host: Host,
    *,
    calls: Calls,
    more_jobs: int,
    warm_up: float,
    measure: float,
    soak: float,
    log: Callable[[str], None],
) -> dict[str, float]:
    """Lateness, requests and memory once `more_jobs` have joined those the ramp left."""
    if more_jobs > 0:
        first = add_jobs(host, more_jobs)
        time.sleep(max(0.0, (first - datetime.now(UTC)).total_seconds()))
    time.sleep(warm_up)
    began, requests_before, rss_start = time.time(), host.storage_requests, rss_mib()
    time.sleep(measure)
    ended, requests_after = time.time(), host.storage_requests
    late = calls.since(began, ended)
    samples = [rss_start]
    while time.time() < began + soak:
        time.sleep(min(30.0, began + soak - time.time()))
        samples.append(rss_mib())
        log(f"load: RSS {samples[-1]:.1f} MiB")
    return {
        "rate": len(late) / (ended - began),
        "p50": statistics.median(late),
        "p99": percentile(late, 0.99),
        "requests_per_execution": (requests_after - requests_before) / max(len(late), 1),
        "rss_start": rss_start,
        "rss_end": samples[-1],
        "rss_max": max(samples),
    }


# --- one worker process against two ------------------------------------------------------------

COMPARE_HEADING = "## One worker process against two"


@dataclass(frozen=True)
class Step:
    jobs: int
    rate: float  # executions/s measured
    p50: float  # lateness, ms
    p99: float
    busy: float = float("nan")  # the share of the machine's CPU in use while measured, 0 to 1
    azurite: float = float("nan")  # Azurite's CPU while measured, in cores (at most ~1: one thread)
    host: float = float("nan")  # the local host's CPU while measured, workers included, cores
    ended: float = float("nan")  # when its measurement ended (epoch seconds)

    @property
    def sustained(self) -> bool:
        return self.p99 < 1000


@dataclass(frozen=True)
class ProcessRun:
    """The local host with `count` worker processes, ramped until p99 reached a second."""

    count: int
    steps: list[Step]
    jobs_saved: int
    jobs_called: int
    calls: int
    run_twice: int
    missed: int  # skipped occurrences due before the last sustained step ended
    missed_all: int  # skipped occurrences, the overloaded step included

    @property
    def best(self) -> Step:
        return max(
            (step for step in self.steps if step.sustained),
            key=lambda step: step.rate,
            default=Step(0, 0.0, float("nan"), float("nan")),
        )


def sustained_rate(
    storage: str,
    count: int,
    rates: list[float],
    *,
    measure: float,
    budget: float,
    work: Path,
    log: Callable[[str], None],
    storage_pid: int,
) -> ProcessRun:
    """Ramp jobs a minute through `rates` (executions/s) on a host of `count` worker processes,
    until p99 lateness reaches 1 s, the rates run out, or the next step would end past `budget`
    seconds."""
    calls_path = work / f"calls-{count}.log"
    calls_path.touch()
    target = _start_target(calls_path)
    host_processes = HostProcesses(storage, count, work / f"host-{count}.log")
    try:
        host = Host(storage, f"http://127.0.0.1:{target.port}/hook", run_triggers=False)
        calls, steps, jobs, began = Calls(calls_path), [], 0, time.monotonic()
        for rate in rates:
            more = round(rate * 60) - jobs
            # Saving runs at 80-100 jobs/s when the host is a process of its own: the first
            # occurrences still come after the last is saved.
            lead = 10 + more / 40
            takes = lead + 60 + measure
            if steps and time.monotonic() - began + takes > budget:
                log(f"{count} process(es): no time left for {rate:.1f}/s")
                break
            first = add_jobs(host, more, lead)
            jobs += more
            time.sleep(max(0.0, (first - datetime.now(UTC)).total_seconds()) + 60)
            start, cpu_before = time.time(), machine_cpu()
            azurite_before = cpu_seconds(storage_pid)
            host_before = tree_cpu_seconds(host_processes.process.pid)
            time.sleep(measure)
            ended = time.time()
            late = calls.since(start, ended)
            busy = share_busy(cpu_before, machine_cpu())
            azurite_cores = (cpu_seconds(storage_pid) - azurite_before) / (ended - start)
            host_cores = (tree_cpu_seconds(host_processes.process.pid) - host_before) / (
                ended - start
            )
            steps.append(
                Step(jobs, len(late) / measure, statistics.median(late), percentile(late, 0.99),
                     busy, azurite_cores, host_cores, ended)
            )  # fmt: skip
            log(f"{count} process(es): {jobs} jobs, {steps[-1].rate:.1f}/s,"
                f" p50 {steps[-1].p50:.0f} ms, p99 {steps[-1].p99:.0f} ms,"
                f" machine CPU {busy:.0%}, host {host_cores:.2f} cores,"
                f" Azurite {azurite_cores:.2f} cores")  # fmt: skip
            if not steps[-1].sustained:
                break
        every = calls.all()
        # Past the ceiling a job may skip a minute by design: an occurrence delivered after the
        # next one is due is postponed in its favour. Below it, none may.
        sustained_until = max((step.ended for step in steps if step.sustained), default=0.0)
        return ProcessRun(
            count, steps, jobs_saved=jobs, jobs_called=len({call.job for call in every}),
            calls=len(every), run_twice=calls.run_twice(),
            missed=calls.missed(until=sustained_until), missed_all=calls.missed(),
        )  # fmt: skip
    finally:
        host_processes.stop()
        target.stop()


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process `pid` and its children (the local host's workers)
    so far."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    total = 0.0
    for process in [pid, *children]:
        try:
            total += cpu_seconds(process)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def machine_cpu() -> tuple[int, int]:
    """The whole machine's CPU time so far, in clock ticks of all cores: (busy, all)."""
    ticks = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = ticks[3] + ticks[4]  # idle and waiting for I/O
    return sum(ticks) - idle, sum(ticks)


def share_busy(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the machine's CPU (all cores) in use between two `machine_cpu` readings."""
    busy, every = after[0] - before[0], after[1] - before[1]
    return busy / every if every else float("nan")


def compare_processes(
    options: argparse.Namespace, log: Callable[[str], None]
) -> tuple[ProcessRun, ProcessRun]:
    """The highest sustained rate with one worker process, then with two, each on a fresh
    Azurite. Both ramps start at the same rate; two's climbs twice as fast unless told. (Two's
    ramp once started at one's best rate: thousands of jobs all new to a cold host in its first
    minute fell behind at a rate one process had sustained when warmed by the steps below it.)"""
    work = Path(tempfile.mkdtemp(prefix="bench-processes-"))
    runs = []
    for count in (1, 2):
        start, climb = options.compare_start, climbs(options)[count - 1]
        rates = [start + climb * n for n in range(16)]
        emulator = azurite.start()
        try:
            run = sustained_rate(
                emulator.connection_string, count, rates, measure=options.compare_measure,
                budget=options.compare_budget, work=work, log=log,
                storage_pid=emulator.process.pid,
            )  # fmt: skip
            runs.append(run)
        finally:
            emulator.stop()
    log(f"logs of the hosts and the target: {work}")
    return runs[0], runs[1]


def climbs(options: argparse.Namespace) -> tuple[float, float]:
    """Executions/s added per step: (one process's ramp, two processes')."""
    two = options.compare_climb_two or 2 * options.compare_climb
    return options.compare_climb, two


def compare_report(
    runs: tuple[ProcessRun, ProcessRun], measure: float, climb: tuple[float, float]
) -> str:
    one, two = runs
    ratio = two.best.rate / one.best.rate if one.best.rate else float("nan")

    def first_missed(run: ProcessRun) -> str:
        missed = [step for step in run.steps if not step.sustained]
        if not missed:
            return "none (the ramp ended first)"
        step = missed[0]
        return f"{step.rate:.1f}/s: p50 {step.p50:,.0f} ms, p99 {step.p99:,.0f} ms"

    def best(run: ProcessRun) -> str:
        # A ramp that ended before a step missed found a floor, not the ceiling.
        floor = "" if any(not step.sustained for step in run.steps) else "≥ "
        return f"{floor}{run.best.rate:.1f}/s ({run.best.jobs} jobs)"

    rows = [
        ("highest sustained rate (p99 < 1 s)", *(best(r) for r in runs)),
        ("lateness p50 / p99 at that rate", *(f"{r.best.p50:.0f} / {r.best.p99:.0f} ms"
                                               for r in runs)),
        ("first step that missed", *(first_missed(r) for r in runs)),
        ("calls at the target, all steps", *(f"{r.calls:,}" for r in runs)),
        ("occurrences run twice (same execution id)", *(f"{r.run_twice}" for r in runs)),
        ("occurrences skipped (a job's minute missing between its first and last call),"
         " up to the last sustained step (all steps)",
         *(f"{r.missed} ({r.missed_all})" for r in runs)),
        ("jobs called at least once / saved", *(f"{r.jobs_called:,} / {r.jobs_saved:,}"
                                                 for r in runs)),
    ]  # fmt: skip
    whole = all(r.run_twice == r.missed == 0 and r.jobs_called == r.jobs_saved for r in runs)
    one_found_its_ceiling = any(not step.sustained for step in one.steps)
    if not (ratio >= 1.5 and whole):
        met = "missed"
    elif one_found_its_ceiling:
        met = "met"
    else:  # one process's rate is only a floor: the ratio may be lower than it reads
        met = "not shown: one process's ramp ended before a step missed, so its rate is a floor"
        met += " and the ratio an upper bound"
    lines = [
        COMPARE_HEADING,
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} by `python -m bench.pipeline --compare-processes`"
        f" on {machine()}; other processes may have shared the cores. The local host ran as its",
        "own process (`python -m devhost --own-host`, FUNCTIONS_WORKER_PROCESS_COUNT=1, then 2),",
        "each time on a fresh Azurite, with the HTTP target in another process. Jobs once a",
        f"minute were added step by step; each step was measured for {measure:.0f} s, a minute",
        f"after its jobs began. Both ramps started at the same rate and climbed by {climb[0]:g}/s",
        f"(one process) and {climb[1]:g}/s (two) a step.",
        "",
        "| measure | 1 worker process | 2 worker processes |",
        "|---|---:|---:|",
        *(f"| {name} | {a} | {b} |" for name, a, b in rows),
        "",
        f"Ratio of the sustained rates, two processes to one: **{ratio:.2f}** (target ≥ 1.5,"
        f" nothing lost, nothing run twice: {met}).",
        "",
        "| worker processes | jobs | executions/s | p50 ms | p99 ms | machine CPU in use |"
        " host's CPU | Azurite's CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {r.count} | {s.jobs} | {s.rate:.1f} | {s.p50:,.0f} | {s.p99:,.0f} | {s.busy:.0%} |"
          f" {s.host:.2f} cores | {s.azurite:.2f} cores |" for r in runs for s in r.steps),
        "",
        "Machine CPU in use: the share of both cores busy while the step was measured, whoever",
        "used it (the host's workers, Azurite, the target, this benchmark). The host's CPU: the",
        "local host's process and its workers', in cores; one Python process can keep at most",
        "about one core busy. Azurite's CPU: its process's, in cores; its JavaScript runs on one",
        "thread, so near 1.0 it is saturated.",
        "",
    ]  # fmt: skip
    return "\n".join(lines)


def write_section(text: str, heading: str, section: str) -> str:
    """`text` with the section under `heading` (to the next `## ` heading) replaced by
    `section`, or with `section` added at the end."""
    start = text.find(heading)
    if start < 0:
        return text.rstrip("\n") + "\n\n" + section
    end = text.find("\n## ", start + len(heading))
    rest = text[end + 1 :] if end >= 0 else ""
    return text[:start] + section + ("\n" + rest if rest else "")


def section_of(text: str, heading: str) -> str:
    """The section under `heading` in `text` (to the next `## ` heading), or ''."""
    start = text.find(heading)
    if start < 0:
        return ""
    end = text.find("\n## ", start + len(heading))
    return text[start : end + 1 if end >= 0 else len(text)]


class _Target:
    """The target process, and its port."""

    def __init__(self, process: multiprocessing.Process, port: int) -> None:
        self.process, self.port = process, port

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(5)


def _start_target(calls_path: Path) -> _Target:
    receiving, sending = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.Process(
        target=_serve_target, args=(sending, str(calls_path)), daemon=True
    )
    process.start()
    return _Target(process, receiving.recv())


def raw_queue_rate(storage: str, seconds: float = 10.0) -> float:
    """Messages per second through send + receive + delete, 16 threads, straight to Azurite."""
    queue = QueueClient.from_connection_string(storage, f"raw{uuid.uuid4().hex[:8]}")
    queue.create_queue()
    done = 0
    lock = threading.Lock()
    deadline = time.time() + seconds

    def worker() -> None:
        nonlocal done
        while time.time() < deadline:
            queue.send_message("x" * 300)
            for message in queue.receive_messages(messages_per_page=1, max_messages=1):
                queue.delete_message(message)
                with lock:
                    done += 1

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done / seconds


def tick_rows(host: Host, due: int, extra: int) -> list[tuple[int, int, int]]:
    """(rows not due, rows a tick read, requests it made), without and with `extra` rows.

    The requests include one send per due row: those are the executions' own.
    """
    return [_one_tick(host, due, 0), _one_tick(host, due, extra)]


def _one_tick(host: Host, due: int, extra: int) -> tuple[int, int, int]:
    from azure.data.tables import TableServiceClient  # noqa: PLC0415

    from shared.domain.attempts import Attempt, Delivery, Pending  # noqa: PLC0415
    from shared.domain.ids import JobId  # noqa: PLC0415
    from shared.execution.dispatch import Dispatcher  # noqa: PLC0415
    from shared.execution.timer import tick  # noqa: PLC0415
    from shared.storage.due_index import DueIndex  # noqa: PLC0415

    storage = os.environ["AzureWebJobsStorage"]
    counted = host.request_counter
    tables = TableServiceClient.from_connection_string(storage, raw_request_hook=counted)
    name = f"tick{uuid.uuid4().hex[:8]}"
    tables.create_table(name)
    table = tables.get_table_client(name)
    index = DueIndex(table)
    now = datetime.now(UTC)
    queue = QueueClient.from_connection_string(storage, name, raw_request_hook=counted)
    queue.create_queue()
    dispatcher = Dispatcher(queue, index, timedelta(0))

    def add(n: int) -> None:
        moment = now + timedelta(seconds=n % 50)
        job = JobId(host.collection, f"j{n}")
        index.add(Delivery(job, DEFINED_AT, Pending(Attempt(moment), moment)))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(add, range(due)))
    _bulk_rows(table, extra, now)
    index.set_watermark(now, ticked_at=now)
    read: list[int] = []
    reading = index.rows  # what the tick reads each partition's window with

    def counting(partition: str, low: str, high: str, most: int) -> list[Any]:
        found = reading(partition, low, high, most)
        read.append(len(found))
        return found

    index.rows = counting  # type: ignore[method-assign]
    before = host.storage_requests
    tick(index, dispatcher, now, timedelta(seconds=60))
    requests = host.storage_requests - before
    # While Azurite holds these 100,000 rows it stalls every request for about 600 ms at regular
    # intervals (seen every 10 s in the lone phase): they must not outlive this phase.
    tables.delete_table(name)
    queue.delete_queue()
    return extra, sum(read), requests


def _bulk_rows(table: Any, count: int, now: datetime) -> None:
    """`count` rows due between 1 and 30 days from now, written in batches of 100 per partition."""
    from shared.storage.due_index import _partition, bucket_of  # noqa: PLC0415

    def batch(start: int) -> None:
        due = now + timedelta(days=1) + timedelta(minutes=5 * (start // 100))
        partition = _partition(bucket_of(due), 0)
        table.submit_transaction(
            [
                (
                    "upsert",
                    {
                        "PartitionKey": partition,
                        "RowKey": f"{int(due.timestamp() * 1e7):020d}-x-{n}",
                        "Message": "{}",
                    },
                )
                for n in range(start, start + 100)
            ]
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(batch, range(0, count, 100)))


# --- the report ---------------------------------------------------------------------------------


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument(
        "--measure", type=float, default=300.0, help="seconds of lateness measured under load"
    )
    parser.add_argument("--soak", type=float, default=600.0, help="seconds of the memory soak")
    parser.add_argument("--lone", type=int, default=60)
    parser.add_argument(
        "--lone-only", action="store_true", help="only the lone phase: print each call's lateness"
    )
    parser.add_argument("--ramp-step", type=int, default=900, help="jobs added per ramp step")
    parser.add_argument("--step-measure", type=float, default=60.0, help="seconds per ramp step")
    parser.add_argument("--beyond-step", type=int, default=300, help="jobs per step after load")
    parser.add_argument("--beyond-most", type=int, default=6000, help="jobs the steps stop at")
    parser.add_argument("--extra-rows", type=int, default=100_000)
    parser.add_argument(
        "--compare-processes",
        action="store_true",
        help="only the comparison of 1 and 2 worker processes (the local host as a process)",
    )
    parser.add_argument("--compare-start", type=float, default=50.0, help="executions/s first")
    parser.add_argument(
        "--compare-climb", type=float, default=10.0,
        help="executions/s per step of one process (two climb twice as fast)",
    )  # fmt: skip
    parser.add_argument(
        "--compare-climb-two", type=float, help="executions/s per step of two processes"
    )
    parser.add_argument("--compare-measure", type=float, default=30.0, help="seconds per step")
    parser.add_argument(
        "--compare-budget", type=float, default=1200.0, help="seconds of ramp per process count"
    )
    return parser


@contextlib.contextmanager
def running() -> Iterator[tuple[str, Host, Calls]]:
    """A fresh Azurite (its connection string), the host in this process on it, and an HTTP
    target in another process (what it noted), all stopped at the end."""
    emulator = azurite.start()
    calls_path = Path(tempfile.mkdtemp(prefix="bench-calls-")) / "calls.log"
    calls_path.touch()
    target = _start_target(calls_path)
    host: Host | None = None
    try:
        host = Host(emulator.connection_string, f"http://127.0.0.1:{target.port}/hook")
        yield emulator.connection_string, host, Calls(calls_path)
    finally:
        for runner in host.runners if host is not None else ():
            runner.stop()
        time.sleep(1)
        target.stop()
        emulator.stop()


def main(argv: list[str] | None = None) -> int:
    options = _arguments().parse_args(argv)

    def log(text: str) -> None:
        print(f"{datetime.now(UTC):%H:%M:%S} {text}", flush=True)

    if options.compare_processes:
        runs = compare_processes(options, log)
        previous = RESULTS.read_text() if RESULTS.exists() else "# Execution pipeline under load\n"
        compared = compare_report(runs, options.compare_measure, climbs(options))
        RESULTS.write_text(write_section(previous, COMPARE_HEADING, compared))
        print(section_of(RESULTS.read_text(), COMPARE_HEADING))
        return 0

    if options.lone_only:
        with running() as (_, host, calls):
            late = lone_lateness(host, calls, options.lone)
        print(LONE_MARK, json.dumps(late), flush=True)
        return 0

    with running() as (storage, host, calls):
        # Azurite's own rate and the tick first, while nothing else runs.
        raw = raw_queue_rate(storage)
        log(f"raw queue: {raw:.1f}/s")
        ticks = tick_rows(host, 1000, options.extra_rows)
        log(f"ticks: {ticks}")
        log("lone job")
        alone = lone(host, calls, options.lone)
        log(f"lone: {alone}")
        ramped = ramp(host, calls=calls, jobs=0, step=options.ramp_step, most=options.jobs,
                      measure=options.step_measure, log=log)  # fmt: skip
        ramp_jobs = ramped[-1][0] if ramped else 0
        loaded = load(host, calls=calls, more_jobs=options.jobs - ramp_jobs, warm_up=60.0,
                      measure=options.measure, soak=options.soak, log=log)  # fmt: skip
        log(f"load: {loaded}")
        if loaded["p99"] < 1000:
            ramped += ramp(host, calls=calls, jobs=options.jobs, step=options.beyond_step,
                           most=options.beyond_most, measure=options.step_measure,
                           log=log)  # fmt: skip
    text = report(alone=alone, loaded=loaded, ramped=ramped, raw=raw, ticks=ticks, options=options)
    # The comparison of worker processes is a mode of its own: its last figures stay.
    kept = section_of(RESULTS.read_text(), COMPARE_HEADING) if RESULTS.exists() else ""
    RESULTS.write_text(write_section(text, COMPARE_HEADING, kept) if kept else text)
    print(RESULTS.read_text())
    return 0


def report(
    *,
    alone: dict[str, float],
    loaded: dict[str, float],
    ramped: list[tuple[int, float, float, float]],
    raw: float,
    ticks: list[tuple[int, int, int]],
    options: argparse.Namespace,
) -> str:
    under_load = (options.jobs, loaded["rate"], loaded["p50"], loaded["p99"])
    steps = sorted([*ramped, under_load])  # by jobs
    sustained = [step for step in steps if step[3] < 1000]
    best = max(sustained, key=lambda step: step[1], default=(0, 0.0, 0.0, 0.0))
    # The rate lies between the best step and the first above it that missed (if one did).
    missed = [step for step in steps if step[3] >= 1000 and step[0] > best[0]]
    above = (f"; {missed[0][1]:.1f}/s ({missed[0][0]} jobs) was not" if missed
             else "; no step tried missed")  # fmt: skip
    growth = (loaded["rss_end"] - loaded["rss_start"]) / loaded["rss_start"] * 100
    rss = f"{loaded['rss_start']:.1f} → {loaded['rss_end']:.1f} MiB ({growth:+.1f}%)"
    load_words = f"{options.jobs} jobs a minute, {loaded['rate']:.1f}/s, {options.measure:.0f} s"
    rows = [
        (f"lone job lateness p50 / p99 (one-offs 2 s apart, {alone['calls']:.0f} calls)",
         f"{alone['p50']:.1f} / {alone['p99']:.1f} ms", "p99 ≤ 200 ms"),
        (f"lateness p50 under load ({load_words})", f"{loaded['p50']:.0f} ms", "≤ 150 ms"),
        ("lateness p99 under the same load", f"{loaded['p99']:.0f} ms", "≤ 1,000 ms"),
        ("storage requests per execution (every request of the host)",
         f"{loaded['requests_per_execution']:.2f}", "≤ 4.5"),
        (f"RSS over the {options.soak / 60:.0f}-minute soak (peak {loaded['rss_max']:.1f} MiB)",
         rss, "growth ≤ 10%"),
        ("highest sustained rate with p99 < 1 s", f"{best[1]:.1f}/s ({best[0]} jobs){above}", ""),
        ("Azurite's raw queue send + receive + delete, 16 threads", f"{raw:.1f}/s", ""),
        ("ratio of the two", f"{best[1] / raw:.2f}", ""),
    ]  # fmt: skip
    lines = [
        "# Execution pipeline under load",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} by `python -m bench.pipeline` on {machine()}:",
        "this process as the host (the local host's own trigger runners), Azurite, and an HTTP",
        "target in another process, all on the same machine.",
        "",
        "| measure | result | target |",
        "|---|---:|---:|",
        *(f"| {measure} | {result} | {target} |" for measure, result, target in rows),
        "",
        f"Ramp (jobs once a minute, {options.step_measure:.0f} s measured per step, after a minute"
        f" to settle; steps above {options.jobs} jobs came after the load and the soak):",
        "",
        "| jobs | executions/s | p50 ms | p99 ms |",
        "|---:|---:|---:|---:|",
        *(f"| {jobs} | {rate:.1f} | {p50:.0f} | {p99:.0f} |" for jobs, rate, p50, p99 in ramped),
        "",
        "A timer tick over 1,000 due rows, without and with rows that are not due:",
        "",
        "| rows not due | rows the tick read | storage requests of the tick (1,000 are sends) |",
        "|---:|---:|---:|",
        *(f"| {extra:,} | {read} | {requests} |" for extra, read, requests in ticks),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # The in-process host's threads may still be waiting on the Azurite just stopped.
    os._exit(code)
