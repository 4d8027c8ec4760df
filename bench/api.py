"""Management API: job creation beside replacing PUTs of the same jobs, in one run on one machine.

16 concurrent clients create jobs through the local host on Azurite, then replace the same jobs
with PUTs, first all in one collection, then spread over 16 collections. Targets (issue 19): in
both layouts, creates run at no less than 0.8x the rate of the replaces, with p99 no more than
1.5x theirs; a replacing PUT takes less host CPU than the 6.9 ms measured before the counter
stripes. Raw Azurite upserts and point reads, and API GETs, are measured too, as context.

The storage calls each write makes (create, replace, PATCH) are counted in this process, through
the API's own handlers, on the same Azurite, by the URL and body of every request the storage
clients send. Run with `make bench`; the tables are written to bench/results/api.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
from azure.data.tables import TableServiceClient, UpdateMode
from azure.storage.queue import TextBase64EncodePolicy

from bench.actions import cpu_seconds
from bench.schedule import machine
from devhost import azurite
from shared.api.arm import ApiRequest
from shared.api.collection_operations import put_collection
from shared.api.job_operations import patch_job, put_job
from shared.execution.dispatch import Dispatcher
from shared.execution.scheduling import Scheduling
from shared.services import build
from shared.settings import Settings
from shared.storage.clients import queue_client
from shared.storage.due_index import DUE_TABLE, DueIndex
from shared.storage.keys import COUNTER_PREFIX
from shared.storage.table_store import table_storage

CLIENTS = 16
REQUESTS_PER_CLIENT = 40
COLLECTIONS = 16
COUNTED = 10  # writes of each kind whose storage calls are counted
ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "api.md"
CREATE_RATE_TARGET = 0.8  # create rate / replace rate, at least
CREATE_P99_TARGET = 1.5  # create p99 / replace p99, at most
REPLACE_CPU_BEFORE_MS = 6.9  # host CPU of a replacing PUT in the run before this design
API_VERSION = "2016-03-01"
SUBSCRIPTION, GROUP = "bench", "bench"


@dataclasses.dataclass(frozen=True)
class Workload:
    rate: float  # requests per second
    p50: float  # ms
    p99: float  # ms
    host_cpu: float  # ms of the local host's CPU per request
    azurite_cpu: float  # ms of Azurite's CPU per request


def job_body() -> dict[str, object]:
    start = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0).isoformat()
    return {
        "properties": {
            "startTime": start,
            "action": {
                "type": "Http",
                "request": {"uri": "https://example.org/hook", "method": "POST", "body": "x" * 200},
            },
            "recurrence": {"frequency": "Hour", "interval": 1, "schedule": {"minutes": [5, 35]}},
        }
    }


def measure(work: Callable[[int, int], None], pids: tuple[int, int]) -> Workload:
    """CLIENTS threads calling `work(client, request)` in turn, REQUESTS_PER_CLIENT times each:
    their rate and latencies, and the CPU of the local host and of Azurite (`pids`)."""
    latencies: list[float] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        own = []
        for request in range(REQUESTS_PER_CLIENT):
            started = time.perf_counter()
            work(number, request)
            own.append((time.perf_counter() - started) * 1000)
        with lock:
            latencies.extend(own)

    cpu_before = [cpu_seconds(pid) for pid in pids]
    started = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    elapsed = time.perf_counter() - started
    host_cpu, azurite_cpu = (
        (cpu_seconds(pid) - before) * 1000 / len(latencies)
        for pid, before in zip(pids, cpu_before, strict=True)
    )
    ordered = sorted(latencies)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    return Workload(len(ordered) / elapsed, statistics.median(ordered), p99, host_cpu, azurite_cpu)


def main() -> int:
    emulator = azurite.start()
    key, port = secrets.token_urlsafe(24), azurite.free_port()
    log = Path(tempfile.mkdtemp(prefix="devhost-")) / "output.log"
    host = subprocess.Popen(
        [sys.executable, "-m", "devhost", "--no-azurite", "--own-host"],
        cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        env=os.environ | {"AzureWebJobsStorage": emulator.connection_string,
                          "SCHEDULER_FUNCTION_KEY": key, "SCHEDULER_PORT": str(port)},
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(base)
        rows = run(base, key, emulator.connection_string, (host.pid, emulator.process.pid))
        calls = storage_calls(emulator.connection_string)
    finally:
        host.terminate()
        host.wait(timeout=10)
        emulator.stop()
    write(rows, calls)
    return 0


def _collection_url(base: str, name: str) -> str:
    return (
        f"{base}/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}"
        f"/providers/Microsoft.Scheduler/jobCollections/{name}"
    )


def run(base: str, key: str, connection: str, pids: tuple[int, int]) -> dict[str, Workload]:
    headers = {"x-functions-key": key}
    params = {"api-version": API_VERSION}
    clients = [httpx.Client(headers=headers, params=params, timeout=60) for _ in range(CLIENTS)]
    run_id = uuid.uuid4().hex[:6]
    one = _collection_url(base, f"one-{run_id}")
    many = [_collection_url(base, f"many-{run_id}-{n}") for n in range(COLLECTIONS)]
    # The one collection's quota is exactly the jobs it gets, so that its last creates meet a
    # full quota (a P20 collection's estate moved in); the 16 have P20's own, 1,000.
    exact = {"quota": {"maxJobCount": CLIENTS * REQUESTS_PER_CLIENT}}
    for url in (one, *many):
        properties = {"sku": {"name": "P20Premium"}, **(exact if url == one else {})}
        definition = {"location": "local", "properties": properties}
        clients[0].put(url, json=definition).raise_for_status()
    body = job_body()

    def in_one(client: int, request: int) -> str:
        return f"{one}/jobs/job-{client}-{request}"

    def spread(client: int, request: int) -> str:
        # Each collection gets the writes of several clients, as a script provisioning many
        # collections at once would send them.
        return f"{many[(client + request) % COLLECTIONS]}/jobs/job-{client}-{request}"

    def put(where: Callable[[int, int], str], expected: int) -> Callable[[int, int], None]:
        def work(client: int, request: int) -> None:
            response = clients[client].put(where(client, request), json=body)
            if response.status_code != expected:
                raise RuntimeError(f"PUT job: {response.status_code} {response.text}")

        return work

    def get_job(client: int, request: int) -> None:
        clients[client].get(in_one(client, request)).raise_for_status()

    service = TableServiceClient.from_connection_string(connection)
    table_name = f"raw{uuid.uuid4().hex[:8]}"
    service.create_table(table_name)
    tables = [
        TableServiceClient.from_connection_string(connection).get_table_client(table_name)
        for _ in range(CLIENTS)
    ]
    document = json.dumps({"definition": body["properties"], "status": {"executionCount": 0}})

    def raw_upsert(client: int, request: int) -> None:
        tables[client].upsert_entity(
            {"PartitionKey": "bench", "RowKey": f"job-{client}-{request}", "Document": document},
            mode=UpdateMode.REPLACE,
        )

    def raw_get(client: int, request: int) -> None:
        tables[client].get_entity("bench", f"job-{client}-{request}")

    rows = {}
    for name, work in (
        ("raw Azurite upsert", raw_upsert),
        ("PUT create, one collection", put(in_one, 201)),
        ("PUT replace, one collection", put(in_one, 200)),
        (f"PUT create, {COLLECTIONS} collections", put(spread, 201)),
        (f"PUT replace, {COLLECTIONS} collections", put(spread, 200)),
        ("raw Azurite point get", raw_get),
        ("GET job", get_job),
    ):
        rows[name] = measure(work, pids)
        row = rows[name]
        print(
            f"{name:30s} {row.rate:8.1f}/s  p50 {row.p50:6.1f} ms  p99 {row.p99:6.1f} ms  "
            f"host CPU {row.host_cpu:5.1f} ms",
            flush=True,
        )
    return rows


class StorageCalls:
    """The storage clients' request hook: each request the API's handlers send, named by what
    it touches (read from its URL, or from the body of an insert)."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def __call__(self, request: Any) -> None:
        self.seen[_touched(request.http_request)] += 1

    def take(self) -> Counter[str]:
        seen, self.seen = self.seen, Counter()
        return seen


def _touched(request: Any) -> str:
    url = unquote(request.url)
    path = url.split("?", 1)[0]
    if "/$batch" in path:
        return "batch"
    if "/executions" in path:
        return "queue message"
    if "/jobcollections" in path:
        return "collection row"
    if f"/{DUE_TABLE}" in path:
        return "due-index row"
    if "/jobs" in path:
        if request.method == "GET" and "/jobs()" in path:
            return "counter rows (query)" if COUNTER_PREFIX in url else "jobs (query)"
        body = request.body if isinstance(request.body, str | bytes) else b""
        text = body.decode() if isinstance(body, bytes) else body
        if f"RowKey='{COUNTER_PREFIX}" in path or f'"RowKey": "{COUNTER_PREFIX}' in text:
            return "counter row"
        return "job row"
    return path.rsplit("/", 1)[-1]


def storage_calls(connection: str) -> dict[str, Counter[str]]:
    """The storage calls of creates, replaces and PATCHes through the API's handlers: those of
    the last `COUNTED` of each, after as many others (so that cold caches are left out)."""
    hook = StorageCalls()
    settings = Settings(
        storage_connection=connection, lookahead=timedelta(seconds=90), outbound_allowlist="",
        outbound_ca_file=None, authority_host="https://login.invalid",
    )  # fmt: skip
    tables = TableServiceClient.from_connection_string(connection, raw_request_hook=hook)
    store = table_storage(tables)
    services = build(settings, storage=store)
    queue = queue_client(
        settings, "executions", message_encode_policy=TextBase64EncodePolicy(),
        raw_request_hook=hook,
    )  # fmt: skip
    dispatcher = Dispatcher(queue, DueIndex.in_service(tables, DUE_TABLE), settings.horizon)
    services = dataclasses.replace(
        services, dispatcher=dispatcher, scheduling=Scheduling(store, dispatcher)
    )
    collection = f"calls-{uuid.uuid4().hex[:6]}"
    route = {"subscriptionId": SUBSCRIPTION, "resourceGroupName": GROUP,
             "jobCollectionName": collection}  # fmt: skip
    url = _collection_url("http://bench", collection)
    definition = {"location": "local", "properties": {"sku": {"name": "P20Premium"}}}
    put_collection(_request("PUT", url, route, definition), services)
    body = job_body()
    patch = {"properties": {"action": {"request": {"body": "y" * 200}}}}
    counted: dict[str, Counter[str]] = {}
    for label, operation, content in (
        ("create", put_job, body),
        ("replace", put_job, body),
        ("PATCH", patch_job, patch),
    ):
        for n in range(2 * COUNTED):
            if n == COUNTED:
                hook.take()
            job_route = {**route, "jobName": f"job-{n}"}
            operation(_request(label, f"{url}/jobs/job-{n}", job_route, content), services)
        counted[label] = hook.take()
    return counted


def _request(label: str, url: str, route: dict[str, str], body: dict[str, Any]) -> ApiRequest:
    return ApiRequest(
        method="PATCH" if label == "PATCH" else "PUT",
        url=f"{url}?api-version={API_VERSION}",
        route=route,
        query={"api-version": API_VERSION},
        headers={"content-type": "application/json"},
        body=json.dumps(body).encode(),
    )


def write(rows: dict[str, Workload], calls: dict[str, Counter[str]]) -> None:
    layouts = ("one collection", f"{COLLECTIONS} collections")
    verdicts, ratio_lines = [], []
    for layout in layouts:
        create, replace = rows[f"PUT create, {layout}"], rows[f"PUT replace, {layout}"]
        rate, p99 = create.rate / replace.rate, create.p99 / replace.p99
        met = rate >= CREATE_RATE_TARGET and p99 <= CREATE_P99_TARGET
        verdicts.append(met)
        ratio_lines.append(
            f"| {layout} | {rate:.2f} (≥ {CREATE_RATE_TARGET}) | {p99:.2f} "
            f"(≤ {CREATE_P99_TARGET}) | {'met' if met else 'MISSED'} |"
        )
    replace_cpu = max(rows[f"PUT replace, {layout}"].host_cpu for layout in layouts)
    cpu_met = replace_cpu < REPLACE_CPU_BEFORE_MS
    everything = all(verdicts) and cpu_met
    lines = [
        "# Management API: creating jobs beside replacing them",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `python -m bench.api` on {machine()}:",
        "the local host (one Python process) and Azurite on the same machine, "
        f"{CLIENTS} concurrent",
        f"clients, {REQUESTS_PER_CLIENT} requests each; other processes may have shared the cores",
        "during the run. Creates and replaces of the same jobs are measured one after the other in",
        "the same run, in one collection and spread over "
        f"{COLLECTIONS} collections. The one collection's",
        "`maxJobCount` is exactly the number of jobs it receives, so its last creates meet a full",
        f"quota; the {COLLECTIONS} collections (P20Premium, quota 1,000) receive "
        f"{CLIENTS * REQUESTS_PER_CLIENT // COLLECTIONS} jobs each, each",
        "request going to the collection after its client's previous one.",
        "",
        f"**Targets: {'all met' if everything else 'NOT ALL MET'}.** Creates against replaces:",
        "",
        "| layout | create rate / replace rate | create p99 / replace p99 | |",
        "|---|---:|---:|---|",
        *ratio_lines,
        "",
        f"Host CPU of a replacing PUT: {replace_cpu:.1f} ms at most (target: less than the "
        f"{REPLACE_CPU_BEFORE_MS} ms of",
        "the run before the counter stripes, 2026-11-23, on a machine of the same kind: "
        f"{'met' if cpu_met else 'MISSED'}).",
        "",
        "| workload | requests/s | p50 ms | p99 ms | CPU ms per request: local host / Azurite |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {row.rate:.1f} | {row.p50:.1f} | {row.p99:.1f} | "
            + (
                f"– / {row.azurite_cpu:.1f} |"
                if name.startswith("raw")
                else f"{row.host_cpu:.1f} / {row.azurite_cpu:.1f} |"
            )
            for name, row in rows.items()
        ),
        "",
        "CPU time is read from /proc over each workload. The raw workloads' client CPU is this",
        "benchmark's own process, so only Azurite's is shown; they are context for what one",
        "storage call costs here, not a target.",
        "",
        "## Storage calls per write",
        "",
        f"Counted through the API's own handlers, over {COUNTED} writes of each kind after "
        f"{COUNTED} others",
        "(warm), by what each request touches; per write:",
        "",
        "| write | calls | of which |",
        "|---|---:|---|",
        *(
            f"| {label} | {sum(seen.values()) / COUNTED:g} | "
            + ", ".join(f"{name} {count / COUNTED:g}" for name, count in sorted(seen.items()))
            + " |"
            for label, seen in calls.items()
        ),
        "",
        "Before the counter stripes a create made six (the collection, the job, a query of the",
        "counter rows, the due-index row, one batch of the job and a counter row, the counter",
        "rows again to check the quota), and more when racing creators lost; a replace and a",
        "PATCH made the same four as now, each of which the write needs (see docs/performance.md,",
        "Management API).",
    ]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[10:18]))


def _wait_for(base: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/openapi.json", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the local host did not start")


if __name__ == "__main__":
    sys.exit(main())
