"""Management API throughput and latency against raw Azurite, in one run on one machine.

16 concurrent clients PUT jobs (then GET them) through the local host on Azurite; side by side,
16 concurrent clients upsert (then point-get) table entities of the same size straight into
Azurite. Target (issue 3): the API reaches at least half the raw rate, with p99 at most 100 ms.
Run with `make bench`; the table is written to bench/results/api.md.
"""

from __future__ import annotations

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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from azure.data.tables import TableServiceClient, UpdateMode

from bench.actions import cpu_seconds
from bench.schedule import machine
from devhost import azurite

CLIENTS = 16
REQUESTS_PER_CLIENT = 40
ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "api.md"
RATE_RATIO_TARGET = 0.5
P99_TARGET_MS = 100.0


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


def measure(
    work: Callable[[int, int], None], pids: tuple[int, int]
) -> tuple[float, float, float, float, float]:
    """Requests per second, p50 and p99 in ms, of CLIENTS threads calling `work` in turn; and
    the CPU ms per request of the local host's process and of Azurite (`pids`)."""
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
    return len(ordered) / elapsed, statistics.median(ordered), p99, host_cpu, azurite_cpu


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
    finally:
        host.terminate()
        host.wait(timeout=10)
        emulator.stop()
    write(rows)
    return 0


def run(
    base: str, key: str, connection: str, pids: tuple[int, int]
) -> dict[str, tuple[float, float, float, float, float]]:
    collection = (
        f"{base}/subscriptions/bench/resourceGroups/bench"
        "/providers/Microsoft.Scheduler/jobCollections/bench"
    )
    params = {"api-version": "2016-03-01"}
    headers = {"x-functions-key": key}
    clients = [httpx.Client(headers=headers, params=params, timeout=30) for _ in range(CLIENTS)]
    quota = {"maxJobCount": CLIENTS * REQUESTS_PER_CLIENT}
    definition = {
        "location": "local",
        "properties": {"sku": {"name": "P20Premium"}, "quota": quota},
    }
    clients[0].put(collection, json=definition).raise_for_status()
    body = job_body()

    def put_job(client: int, request: int) -> None:
        response = clients[client].put(f"{collection}/jobs/job-{client}-{request}", json=body)
        if response.is_error:
            raise RuntimeError(f"PUT job: {response.status_code} {response.text}")

    def get_job(client: int, request: int) -> None:
        clients[client].get(f"{collection}/jobs/job-{client}-{request}").raise_for_status()

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
    for name, work in (("raw Azurite upsert", raw_upsert), ("API PUT job (create)", put_job),
                       ("API PUT job (replace)", put_job), ("raw Azurite point get", raw_get),
                       ("API GET job", get_job)):  # fmt: skip
        rows[name] = measure(work, pids)
        rate, p50, p99, _, _ = rows[name]
        print(f"{name:24s} {rate:8.1f}/s  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms", flush=True)
    return rows


def write(rows: dict[str, tuple[float, float, float, float, float]]) -> None:
    raw_put, raw_get = rows["raw Azurite upsert"][0], rows["raw Azurite point get"][0]
    create_ratio = rows["API PUT job (create)"][0] / raw_put
    replace_ratio = rows["API PUT job (replace)"][0] / raw_put
    get_ratio = rows["API GET job"][0] / raw_get
    worst_p99 = max(
        rate_p50_p99[2] for name, rate_p50_p99 in rows.items() if name.startswith("API")
    )
    met = (
        min(create_ratio, replace_ratio, get_ratio) >= RATE_RATIO_TARGET
        and worst_p99 <= P99_TARGET_MS
    )
    lines = [
        "# Management API: throughput and latency against raw Azurite",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} by `make bench` on {machine()}: the local host and",
        f"Azurite on the same machine, {CLIENTS} concurrent clients, "
        f"{REQUESTS_PER_CLIENT} requests each.",
        "",
        f"**API/raw rate: PUT create {create_ratio:.2f}, PUT replace {replace_ratio:.2f}, "
        f"GET {get_ratio:.2f} (target ≥ {RATE_RATIO_TARGET}); "
        f"worst API p99 {worst_p99:.1f} ms (target ≤ {P99_TARGET_MS:g}): "
        f"{'targets met' if met else 'TARGETS MISSED'}.**",
        "",
        "| workload | requests/s | p50 ms | p99 ms | CPU ms per request: local host / Azurite |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {rate:.1f} | {p50:.1f} | {p99:.1f} | "
            + (
                f"{host:.1f} / {azurite_cpu:.1f} |"
                if name.startswith("API")
                else f"– / {azurite_cpu:.1f} |"
            )
            for name, (rate, p50, p99, host, azurite_cpu) in rows.items()
        ),
        "",
        "CPU time is read from /proc over each workload. The raw workloads' client CPU is this",
        "benchmark's own process; the API's is the local host's, one Python process.",
    ]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[6:8]))


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
