"""Executions per second of each action type, side by side, through the app's own executor.

For each type, the same number of one-off jobs, all due at one moment, is saved as the API saves
them; the timer's tick puts their attempts on the execution queue, and a pool of threads (as
many as the executor's trigger runs at once) takes them off, runs `ExecutionWorker.handle` and
deletes them, as the Functions host does. An execution is the whole of it: reading the job, the
action against its real peer, the history and status written back. Peers, all on this machine:
a threaded HTTP server answering 200, Azurite's queues (with a SAS token), and the test AMQP
broker (devhost/service_bus.py) through the unmodified azure-servicebus SDK.

The Service Bus rows also say how many sender links were opened during the run: one per entity
means that no execution paid the sender's opening cost but the first.

Run with `python -m bench.actions` (about a minute); results go to bench/results/actions.md.
"""

from __future__ import annotations

import argparse
import base64
import os
import resource
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from azure.storage.queue import QueueClient, QueueSasPermissions, generate_queue_sas

from bench.http_target import QuietHandler, TargetServer
from bench.schedule import machine
from devhost import azurite
from devhost.service_bus import AmqpBroker
from shared.execution.timer import tick
from shared.storage.table_store import table_storage_from_connection_string
from tests.pipeline import START, Pipeline
from tests.wrapped_store import Wrapped, wrapping

RESULTS = Path(__file__).parent / "results" / "actions.md"
KEY_NAME, KEY = "bench", "YmVuY2gtYnJva2VyLWtleS1ub3QtYS1zZWNyZXQ="
WORKERS = 32  # the executor's threads (shared/services.py)
GIVE_UP_AFTER_S = 300.0


class _Ok(QuietHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def actions(target: str, storage: str) -> dict[str, dict[str, Any]]:
    queue = QueueClient.from_connection_string(storage, "bench-actions")
    queue.create_queue()
    sas = generate_queue_sas(azurite.ACCOUNT, "bench-actions", azurite.ACCOUNT_KEY,
                             permission=QueueSasPermissions(add=True),
                             expiry=datetime.now(UTC) + timedelta(hours=2))  # fmt: skip
    key = {"type": "SharedAccessKey", "sasKeyName": KEY_NAME, "sasKey": KEY}
    bus = {"namespace": "bench-namespace", "message": "tick", "authentication": key}
    return {
        "Http": {"type": "Http", "request": {"uri": target, "method": "POST", "body": "tick"}},
        "StorageQueue": {"type": "StorageQueue", "queueMessage": {
            "storageAccount": azurite.ACCOUNT, "queueName": "bench-actions", "sasToken": sas,
            "message": "tick"}},
        "ServiceBusQueue": {"type": "ServiceBusQueue",
                            "serviceBusQueueMessage": bus | {"queueName": "jobs"}},
        "ServiceBusTopic": {"type": "ServiceBusTopic",
                            "serviceBusTopicMessage": bus | {"topicPath": "events"}},
    }  # fmt: skip


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) this process, or process `pid`, has used so far."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(
    storage: str, broker: AmqpBroker, action: dict[str, Any], count: int, storage_pid: int
) -> dict[str, float]:
    """Save `count` one-offs due at START, tick once, then time the executions.

    Attempts due in the same second share queue messages (up to 64 each), so an execution is
    timed by when its outcome was recorded, from the moment the first message was taken.
    """
    recorded: list[float] = []

    class TimingExecutor(Wrapped):
        def settle_job(self, *arguments: Any) -> Any:
            settled = self.inner.settle_job(*arguments)
            if settled:
                recorded.append(time.perf_counter())  # list.append is atomic
            return settled

    real = table_storage_from_connection_string(storage)
    pipeline = Pipeline(storage, service_bus=broker.endpoint, action_timeout=30,
                        store=wrapping(real, executor=TimingExecutor))  # fmt: skip
    once = action | {"retryPolicy": {"retryType": "None"}}
    jobs = [pipeline.put_job(f"job-{n}", {"startTime": START.isoformat(), "action": once})
            for n in range(count)]  # fmt: skip
    pipeline.clock.at = START
    tick(pipeline.index, pipeline.dispatcher, START, lookahead=timedelta(microseconds=1))

    def execute(message: Any) -> None:
        pipeline.handle(base64.b64decode(message.content).decode(), message.dequeue_count)
        pipeline._incoming.delete_message(message)

    started = time.perf_counter()
    cpu_here, cpu_storage = cpu_seconds(), cpu_seconds(storage_pid)
    with ThreadPoolExecutor(WORKERS) as pool:
        while len(recorded) < count and time.perf_counter() - started < GIVE_UP_AFTER_S:
            received = pipeline._incoming.receive_messages(max_messages=32, visibility_timeout=60)
            batch = list(received)
            if not batch:
                time.sleep(0.01)
                continue
            list(pool.map(execute, batch))
    elapsed = time.perf_counter() - started
    cpu_here, cpu_storage = cpu_seconds() - cpu_here, cpu_seconds(storage_pid) - cpu_storage
    pipeline.services.close()
    last = [pipeline.history(job)[-1:] for job in jobs]
    failed = [entries for entries in last if not entries or entries[0]["status"] != "Completed"]
    after = sorted(moment - started for moment in recorded)
    return {
        "rate": len(recorded) / elapsed,
        "p50": statistics.median(after) * 1000,
        "p99": after[int(0.99 * (len(after) - 1))] * 1000,
        "last": after[-1] * 1000,
        "failed": len(failed),
        "cpu_ms": cpu_here / count * 1000,
        "azurite_cpu_ms": cpu_storage / count * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=300, help="executions per action type")
    options = parser.parse_args(argv)
    emulator = azurite.start()
    broker = AmqpBroker({KEY_NAME: KEY}, queues=["jobs"], topics=["events"]).start()
    server = TargetServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{server.server_port}/hook"
    results: dict[str, dict[str, float]] = {}
    try:
        for kind, action in actions(target, emulator.connection_string).items():
            links = broker.sender_links
            results[kind] = run(emulator.connection_string, broker, action, options.jobs,
                                emulator.process.pid)  # fmt: skip
            results[kind]["links"] = broker.sender_links - links
            print(f"{kind}: {results[kind]}", flush=True)
    finally:
        server.shutdown()
        broker.stop()
        emulator.stop()
    RESULTS.write_text(report(results, options.jobs))
    print(RESULTS.read_text())
    return 0


def report(results: dict[str, dict[str, float]], jobs: int) -> str:
    http = results["Http"]["rate"]
    rows = "\n".join(
        f"| {kind} | {r['rate']:.1f} | {r['rate'] / http:.2f} | {r['p50']:.0f} / {r['p99']:.0f} "
        f"| {r['last']:.0f} | {int(r['links']) if kind.startswith('ServiceBus') else '–'} "
        f"| {int(r['failed'])} | {r['cpu_ms']:.1f} + {r['azurite_cpu_ms']:.1f} |"
        for kind, r in results.items()
    )
    return f"""# Executions per second by action type

Measured {datetime.now(UTC):%Y-%m-%d} by `python -m bench.actions` on {machine()}:
{jobs} one-off jobs per type, all due at once, executed by the app's executor on {WORKERS}
threads against Azurite, with each action's peer on the same machine (an HTTP server, Azurite's
queues with a SAS token, the test AMQP broker through the unmodified azure-servicebus SDK).

| action | executions/s | to Http | recorded p50 / p99 ms | all ms | SB links | failed | CPU ms |
|---|---:|---:|---:|---:|---:|---:|---:|
{rows}

An execution is the whole of it: reading the job, the action, and the history and status
written back in one batch; the storage calls around the action are the same for every type.
The attempts share queue messages (up to 64 each, as they are due in the same second), so each
execution is timed by when its record was written, counted from when the first message was
taken: "recorded" is how long half, and 99%, of them took, "all" how long all of them took.
"SB links" counts the Service Bus links the broker saw attached. "CPU ms" is the CPU
time per execution of this process (executor, peers but Azurite, the SDKs) plus that of
Azurite, read from the kernel's counters over the timed part of the run.
"""


if __name__ == "__main__":
    raise SystemExit(main())
