"""One worker process of the local host: it loads function_app and runs what the app declares.

Every worker serves HTTP on the listening socket it is given and runs the queue functions on the
messages its host process hands it (`handoff`), as each Python worker of a Functions host
instance does; a host that is its own one worker polls the queues itself. Only the worker told
to (`runs_timers`) runs the timers: in Azure a timer fires on one instance at a time (a blob
lease), and the local host gives them to worker 0.

`python -m devhost.worker` is how `devhost.processes` starts the workers when
FUNCTIONS_WORKER_PROCESS_COUNT asks for more than one; with one, `python -m devhost` calls
`serve` in its own process.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from devhost.handoff import WorkerFeed
from devhost.http_host import FunctionsHttpServer, http_functions
from devhost.identity import LocalSignIn, identity_folder
from devhost.runtime import start_worker, uses_runtime
from devhost.triggers import QueueTrigger, TimerTrigger, host_extensions, triggers_of
from shared.logs import app_logger, quiet_third_party_loggers

ROOT = Path(__file__).resolve().parent.parent
PLATFORM_AUTHENTICATION = "WEBSITE_AUTH_ENABLED"  # the platform's; the app reads it too
FINISH_PATIENCE_S = 8.0  # under devhost.processes' patience, after which a worker is killed


def serve(
    listener: socket.socket,
    key: str,
    *,
    runs_timers: bool,
    on_ready: Callable[[], None] | None = None,
    parent_gone: int | None = None,
    host_channel: socket.socket | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT (or until `parent_gone`, a pipe's read end, reaches its
    end: the parent died without stopping this worker). `on_ready` is called once requests are
    served. Queue messages come from `host_channel` if given; otherwise this worker polls.
    """
    extensions = host_extensions()
    route_prefix = extensions.get("http", {}).get("routePrefix", "api")
    functions = declared_functions()
    server = FunctionsHttpServer(
        listener.getsockname()[:2], http_functions(functions, route_prefix), keys=[key],
        listener=listener, sign_in=local_sign_in(os.environ),
    )  # fmt: skip
    triggers = triggers_of(
        functions, extensions.get("queues", {}), os.environ["AzureWebJobsStorage"]
    )
    timers = [runner for runner in triggers if isinstance(runner, TimerTrigger)]
    queues = [runner for runner in triggers if isinstance(runner, QueueTrigger)]
    runners: list[TimerTrigger | QueueTrigger | WorkerFeed] = [*timers] if runs_timers else []
    runners += queues if host_channel is None else [WorkerFeed(host_channel, queues)]
    threads = [
        threading.Thread(target=runner.run, name=type(runner).__name__, daemon=True)
        for runner in runners
    ]
    for thread in threads:
        thread.start()

    def shut_down(signum: int | None = None, frame: FrameType | None = None) -> None:
        for runner in runners:
            runner.stop()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shut_down)
    signal.signal(signal.SIGINT, shut_down)
    if parent_gone is not None:
        threading.Thread(
            target=_stop_when_closed, args=(parent_gone, shut_down), daemon=True
        ).start()
    if on_ready is not None:
        on_ready()
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    # Let the functions already running finish, as the Functions host does when it stops: a
    # queue trigger's run ends once its messages are done (or given back), within a bound.
    deadline = time.monotonic() + FINISH_PATIENCE_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return 0


def local_sign_in(environment: Mapping[str, str]) -> LocalSignIn | None:
    """The platform's authentication played locally, when WEBSITE_AUTH_ENABLED says it is on
    (`python -m devhost` turns it on unless told otherwise)."""
    if environment.get(PLATFORM_AUTHENTICATION, "").lower() != "true":
        return None
    return LocalSignIn.in_folder(identity_folder(environment))


def declared_functions() -> list[Any]:
    """The app's functions, with what to call for each: through the runtime library where it is
    installed (`devhost.runtime`, which indexes function_app.py itself), otherwise the app's own
    declarations, called directly."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if uses_runtime(os.environ):
        return list(start_worker())
    import function_app  # noqa: PLC0415 (it reads its settings when imported, so only now)

    return list(function_app.app.get_functions())  # the library allows one call per app


def _stop_when_closed(pipe: int, stop: Callable[[], None]) -> None:
    """Wait for the pipe's other end to close, then stop: the parent is gone, even if it was
    killed with no chance to say so (its end closes with the process)."""
    while os.read(pipe, 1):
        pass
    app_logger("devhost").warning("the local host's parent process is gone: stopping")
    stop()


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m devhost.worker", description=__doc__)
    parser.add_argument("--index", type=int, required=True, help="this worker's number, from 0")
    parser.add_argument("--listener", type=int, required=True, help="the listening socket's fd")
    parser.add_argument("--parent-pipe", type=int, required=True, help="read end of a pipe")
    parser.add_argument(
        "--host-channel", type=int, required=True, help="socket to the host, for queue messages"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    options = _arguments().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s [worker {options.index} pid %(process)d] %(name)s %(levelname)s"
        " %(message)s",
    )
    quiet_third_party_loggers()
    # The key comes through the environment, never the command line, which `ps` shows anyone.
    key = os.environ["SCHEDULER_FUNCTION_KEY"]
    listener = socket.socket(fileno=options.listener)
    return serve(
        listener,
        key,
        runs_timers=options.index == 0,
        parent_gone=options.parent_pipe,
        host_channel=socket.socket(fileno=options.host_channel),
    )


if __name__ == "__main__":
    sys.exit(main())
