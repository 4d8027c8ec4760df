"""What invisible messages cost Azurite: queue send + receive + delete with messages waiting.

The pipeline keeps each recurring job's next occurrence on the queue, invisible until it is due:
3,000 jobs a minute means about 3,000 such messages at any moment. This measures Azurite's own
CPU time per visible message sent, received and deleted while N invisible messages wait, in the
same queue and in another queue of the account, read from the kernel's counters.

Run with `python -m bench.azurite_queue` (about a minute); results go to
bench/results/azurite_queue.md.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from azure.storage.queue import QueueClient

from bench.actions import cpu_seconds
from bench.schedule import machine
from devhost import azurite

RESULTS = Path(__file__).parent / "results" / "azurite_queue.md"
MESSAGES = 300
HIDDEN = (0, 1000, 3000, 6000)


def measure(storage: str, azurite_pid: int, hidden: int, elsewhere: bool) -> tuple[float, float]:
    """(messages/s, Azurite CPU ms per message) for MESSAGES visible ones, `hidden` waiting."""
    work = QueueClient.from_connection_string(storage, f"work-{uuid.uuid4().hex[:8]}")
    work.create_queue()
    waiting = work
    if elsewhere:
        waiting = QueueClient.from_connection_string(storage, f"wait-{uuid.uuid4().hex[:8]}")
        waiting.create_queue()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: waiting.send_message(f"later {n}", visibility_timeout=3600),
                      range(hidden)))  # fmt: skip
    cpu, started = cpu_seconds(azurite_pid), time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: work.send_message(f"now {n}"), range(MESSAGES)))

    def drain(_: int) -> int:
        done = 0
        while batch := list(work.receive_messages(max_messages=32)):
            for message in batch:
                work.delete_message(message)
                done += 1
        return done

    with ThreadPoolExecutor(8) as pool:
        handled = sum(pool.map(drain, range(8)))
    elapsed = time.perf_counter() - started
    cost = (cpu_seconds(azurite_pid) - cpu) / handled * 1000
    for queue in {work.queue_name: work, waiting.queue_name: waiting}.values():
        queue.delete_queue()  # the next row starts from an empty account
    return handled / elapsed, cost


def main() -> int:
    emulator = azurite.start()
    rows = []
    try:
        for hidden in HIDDEN:
            for elsewhere in (False, True) if hidden else (False,):
                rate, cost = measure(emulator.connection_string, emulator.process.pid, hidden,
                                     elsewhere)  # fmt: skip
                where = ("another queue" if elsewhere else "the same queue") if hidden else "–"
                rows.append(f"| {hidden:,} | {where} | {rate:.0f} | {cost:.1f} |")
                print(rows[-1], flush=True)
    finally:
        emulator.stop()
    RESULTS.write_text(f"""# Azurite's queue cost with invisible messages waiting

Measured {datetime.now(UTC):%Y-%m-%d} by `python -m bench.azurite_queue` on {machine()}:
{MESSAGES} visible messages sent (16 threads), then received in batches of 32 and deleted
(8 threads), while invisible messages wait; Azurite's CPU time read from /proc.

| invisible messages | where they wait | messages/s | Azurite CPU ms per message |
|---:|---|---:|---:|
{chr(10).join(rows)}
""")
    print(RESULTS.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
