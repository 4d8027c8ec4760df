"""Several worker processes, as one instance of the Functions host runs them.

FUNCTIONS_WORKER_PROCESS_COUNT (up to 10, default 1) is how many Python worker processes an
instance of the Functions host starts; Azure runs many instances besides. The local host honours
it the same way, so that nothing that works here relies on sharing one process: with more than
one, this process starts that many workers (`python -m devhost.worker`), each of which loads
function_app and serves HTTP. This process polls the queues and hands each message to the next
worker in turn, as the Functions host hands invocations to its workers (`handoff`). Worker 0
alone runs the timers, as in Azure a timer fires on one instance at a time.

HTTP: this process opens the listening socket and every worker inherits it; each new connection
goes to whichever worker accepts it first (the pre-fork model of gunicorn and nginx). A worker
busy with its own requests accepts later, so new connections go to the free ones. SO_REUSEPORT,
one listener per worker, was the alternative: Linux spreads connections over such listeners by a
hash of their addresses, busy or not, and macOS does not spread them at all (the last listener
takes every connection), where a shared socket behaves the same on every POSIX system.

Stopping: SIGTERM or SIGINT here is passed on to every worker, and this process waits for them.
Each worker also holds the read end of a pipe whose write end only this process holds; the
kernel closes it when this process ends, however it ends (SIGKILL included), and a worker that
sees the pipe end stops: no worker outlives the host. A worker that stops on its own stops the
host, with an error (the Functions host would start another; here the failure should be seen).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from devhost.handoff import HandOff
from devhost.triggers import QueueSettings, host_extensions
from shared.logs import app_logger

ROOT = Path(__file__).resolve().parent.parent
WORKER_PROCESS_COUNT = "FUNCTIONS_WORKER_PROCESS_COUNT"
MOST_WORKER_PROCESSES = 10  # the Functions host's own limit
LISTEN_BACKLOG = 512  # Kestrel's default, as FunctionsHttpServer's
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,9}")  # what .NET's int.Parse takes, within an int
STOP_PATIENCE_S = 10.0  # how long a worker has to stop before it is killed

log = app_logger("devhost")


def worker_process_count(environment: Mapping[str, str]) -> int:
    """FUNCTIONS_WORKER_PROCESS_COUNT, read as the Functions host reads it: unset, 1; a whole
    number up to 10, that many, any below 1 counting as 1 (the host's `> 1 ? value : 1`);
    ValueError for one above 10 or one that is not a whole number, which stop the host from
    starting its workers (it logs an error and runs none)."""
    value = environment.get(WORKER_PROCESS_COUNT, "").strip()
    if not value:
        return 1
    if not _WHOLE_NUMBER.fullmatch(value) or int(value) > MOST_WORKER_PROCESSES:
        raise ValueError(
            f"{WORKER_PROCESS_COUNT} must be a whole number no greater than"
            f" {MOST_WORKER_PROCESSES}, not '{value}'"
        )
    return max(1, int(value))


def listen(port: int) -> socket.socket:
    """The host's listening socket on 127.0.0.1 (`port` 0: a free one), ready to be shared: it
    does not block, so a worker that loses the race for a connection goes back to waiting."""
    listener = socket.create_server(("127.0.0.1", port), backlog=LISTEN_BACKLOG)
    listener.setblocking(False)
    return listener


def run_workers(listener: socket.socket, count: int, key: str) -> int:
    """Start `count` workers on `listener`, hand them the queues' messages and wait for them; 0
    once stopped by a signal, 1 if a worker stopped on its own."""
    parent_end, worker_end = _pipe()
    environment = os.environ | {"SCHEDULER_FUNCTION_KEY": key}
    channels = [socket.socketpair() for _ in range(count)]
    workers = [
        _start_worker(index, listener, worker_end, theirs, environment)
        for index, (_, theirs) in enumerate(channels)
    ]
    os.close(worker_end)  # the workers' copies are the only ones left
    for _, theirs in channels:
        theirs.close()
    log.info("%d worker processes: %s", count, ", ".join(str(w.pid) for w in workers))
    hand_off = HandOff(
        [ours for ours, _ in channels], os.environ["AzureWebJobsStorage"], _queue_settings()
    )
    threading.Thread(target=hand_off.run, name="hand-off", daemon=True).start()
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = False
    while not stopping.wait(0.2):
        ended = [worker for worker in workers if worker.poll() is not None]
        if ended:
            log.error("worker process %d stopped on its own: stopping the host", ended[0].pid)
            failed = True
            break
    hand_off.stop()  # nothing more is handed over, and then the workers are told to stop
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=STOP_PATIENCE_S)
        except subprocess.TimeoutExpired:
            log.error("worker process %d did not stop: killed", worker.pid)
            worker.kill()
            worker.wait()
    for ours, _ in channels:
        ours.close()
    os.close(parent_end)
    return 1 if failed else 0


def _queue_settings() -> QueueSettings:
    """host.json's queue settings: they are the instance's, so this process applies them."""
    return QueueSettings.from_host_json(host_extensions().get("queues", {}))


def _start_worker(
    index: int,
    listener: socket.socket,
    pipe: int,
    channel: socket.socket,
    environment: dict[str, str],
) -> subprocess.Popen[bytes]:
    arguments = ["--index", str(index), "--listener", str(listener.fileno()),
                 "--parent-pipe", str(pipe), "--host-channel", str(channel.fileno())]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "devhost.worker", *arguments],
        cwd=ROOT,
        env=environment,
        pass_fds=(listener.fileno(), pipe, channel.fileno()),
    )


def _pipe() -> tuple[int, int]:
    """(the end this process keeps open for as long as it lives, the end the workers watch)."""
    worker_end, parent_end = os.pipe()  # neither is inherited unless passed on by name
    return parent_end, worker_end
