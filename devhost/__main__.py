"""`python -m devhost`: run the function app locally, on Azurite.

Starts Azurite (unless --no-azurite) on the project's .azurite/ folder, whose data is kept
between runs (--fresh empties it first) and through a crash of Azurite: it answers a write once
the write is saved (--azurite-interval-saves: Azurite's own saving every 5 s, faster with much
data, losing up to 5 s of writes in a crash); on its standard ports 10000-10002 when they are free;
points AzureWebJobsStorage (and StorageQueue actions, SCHEDULER_QUEUE_ENDPOINT_TEMPLATE) at it,
then runs the app: under `func start` when Azure Functions Core Tools are installed, otherwise
with this package's own host. It prints Azurite's endpoints and connection string, the base URL,
the addresses of the web console and of the health route, and the function key, and stops
Azurite when it stops.

Settings come from the environment, then local.settings.json (or the sample), as with
`func start`. SCHEDULER_PORT and SCHEDULER_FUNCTION_KEY fix the port and the key (without
SCHEDULER_FUNCTION_KEY, the key made on the first run is kept in .azurite/function-key and used
again, so that a restart leaves signed-in consoles and scripts working);
FUNCTIONS_WORKER_PROCESS_COUNT (up to 10) runs that many worker processes (`devhost.processes`);
PYTHON_THREADPOOL_THREAD_COUNT (1 or more; invalid: a warning and the default) is how many plain
functions each runs at once, read as Azure's Python worker reads it (`devhost.invocation`, or the
runtime library itself: `devhost.runtime`). On Python 3.13+ the functions run through the runtime
library (`devhost.runtime`); DEVHOST_INVOCATION=direct calls them directly.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

from devhost import azurite, identity, runtime, worker
from devhost.processes import listen, run_workers, worker_process_count
from shared.logs import app_logger, quiet_third_party_loggers
from shared.settings import SERVICEBUS_ENDPOINT as SERVICE_BUS_SETTING

if TYPE_CHECKING:
    from devhost.service_bus import AmqpBroker, Received

log = app_logger("devhost")
# Microsoft's Service Bus emulator's port, which the stand-in takes too when it is free.
AMQP_PORT = 5672
# How much of a message's body the stand-in's log line shows.
SHOWN_BODY = 200

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PORT = 7071
AZURITE_DATA = azurite.LOCAL_DATA
LOCK_NAME = "devhost.lock"  # in AZURITE_DATA, held while an Azurite runs on it
KEY_NAME = azurite.FUNCTION_KEY_FILE.name  # the key made on the first run, used by the next


def main(argv: list[str] | None = None) -> int:
    options = _arguments().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    quiet_third_party_loggers()  # the SDKs and httpx log every request, URL and all, at INFO
    load_local_settings()
    port = options.port or int(os.environ.get("SCHEDULER_PORT") or DEFAULT_PORT)
    key = os.environ.get("SCHEDULER_FUNCTION_KEY") or kept_key(AZURITE_DATA)
    # The app checks the key itself: its routes are anonymous to the host, so that signed-in
    # callers need none.
    os.environ["SCHEDULER_FUNCTION_KEY"] = key

    emulator = None
    if not options.no_azurite:
        lock = _lock(AZURITE_DATA)  # held (open) until this process exits
        if lock is None:
            print(f"Another local host is using {AZURITE_DATA}: stop it first.", file=sys.stderr)
            return 1
        if options.fresh:
            # The data, not the keys.
            azurite.empty(AZURITE_DATA, keep={LOCK_NAME, KEY_NAME, identity.KEY_NAME})
        emulator = _start_azurite(AZURITE_DATA, durable=not options.azurite_interval_saves)
        _print_azurite(emulator)
        os.environ["AzureWebJobsStorage"] = emulator.connection_string
        os.environ["SCHEDULER_QUEUE_ENDPOINT_TEMPLATE"] = emulator.queue_endpoint_template
    broker = None
    if options.service_bus:
        try:
            broker = local_service_bus()
        except ModuleNotFoundError:
            print(
                "--service-bus needs python-qpid-proton: `make run SERVICE_BUS=1` installs it.",
                file=sys.stderr,
            )
            return 1
    try:
        if shutil.which("func") and not options.own_host:
            return _run_core_tools(port)
        return _run_own_host(port, key)
    finally:
        if broker is not None:
            broker.stop()
        if emulator is not None:
            emulator.stop()


def local_service_bus(port: int = AMQP_PORT) -> AmqpBroker | None:
    """Where Service Bus jobs send when run locally (`--service-bus`), said on the terminal: the
    endpoint SCHEDULER_SERVICEBUS_ENDPOINT already names; else whatever listens on `port`
    (Microsoft's emulator's, by default); else this package's stand-in, started there (and
    returned, to be stopped), which takes any queue or topic name and logs each message."""
    configured = os.environ.get(SERVICE_BUS_SETTING)
    if configured:
        print(f"Service Bus: every namespace goes to {configured} ({SERVICE_BUS_SETTING})")
        return None
    if not azurite.is_free(port):
        os.environ[SERVICE_BUS_SETTING] = f"sb://127.0.0.1:{port}"
        print(
            f"Service Bus: every namespace goes to sb://127.0.0.1:{port}, where something listens "
            "(Microsoft's emulator, or another broker)",
            flush=True,
        )
        return None
    from devhost.service_bus import EMULATOR_KEY, EMULATOR_KEY_NAME, AmqpBroker  # noqa: PLC0415

    logging.getLogger("proton").setLevel(logging.WARNING)  # a line per connection otherwise
    broker = AmqpBroker(
        {EMULATOR_KEY_NAME: EMULATOR_KEY}, port=port, on_message=_log_message
    ).start()
    os.environ[SERVICE_BUS_SETTING] = broker.endpoint
    print(f"Service Bus stand-in on {broker.endpoint}: every namespace goes to it", flush=True)
    print(
        f"  any queue or topic name; key name {EMULATOR_KEY_NAME}, key {EMULATOR_KEY} "
        "(Microsoft's emulator's defaults); each message it receives is logged",
        flush=True,
    )
    return broker


def _log_message(received: Received) -> None:
    body = received.body
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    if len(text) > SHOWN_BODY:
        text = f"{text[:SHOWN_BODY]}... ({len(text)} characters)"
    message_id = received.properties["message_id"]
    log.info("Service Bus: '%s' received message %s: %s", received.entity, message_id, text)


def kept_key(folder: Path) -> str:
    """The function key kept in `folder` by an earlier run, or a new one, kept there (readable by
    its owner only) for the runs to come."""
    path = folder / KEY_NAME
    azurite.keep_private(folder)  # a key file an earlier version left readable is made private
    try:
        kept = path.read_text().strip()
    except FileNotFoundError:
        kept = ""
    if kept:
        return kept
    key = secrets.token_urlsafe(32)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        file.write(key + "\n")
    return key


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m devhost", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--port", type=int, help=f"HTTP port (default $SCHEDULER_PORT or {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--no-azurite", action="store_true", help="use AzureWebJobsStorage as it is"
    )
    parser.add_argument(
        "--fresh", action="store_true", help="delete Azurite's data (.azurite/) first: start empty"
    )
    parser.add_argument(
        "--azurite-interval-saves",
        action="store_true",
        help="let Azurite save every 5 s, as it does by itself: faster with much data, but a "
        "crash of Azurite loses up to the last 5 s of writes (docs/local-data.md)",
    )
    parser.add_argument("--own-host", action="store_true", help="never hand over to `func start`")
    parser.add_argument(
        "--service-bus",
        action="store_true",
        help="a local Service Bus for Service Bus jobs: Microsoft's emulator if one answers on "
        "port 5672, otherwise this package's stand-in (needs python-qpid-proton)",
    )
    return parser


def _lock(folder: Path) -> IO[bytes] | None:
    """An exclusive lock on `folder`'s Azurite data (None: another process holds it), so that
    two local hosts never run two Azurites on the same files."""
    azurite.keep_private(folder)
    handle = (folder / LOCK_NAME).open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def _start_azurite(location: Path, durable: bool) -> azurite.Azurite:
    """Azurite on `location`, on its standard ports if they are free, otherwise on free ones."""
    ports = azurite.standard_ports_or_free()
    try:
        return azurite.start(*ports, location=location, durable=durable)
    except RuntimeError:
        if ports != azurite.STANDARD_PORTS:
            raise
        # Taken in the meantime: any free ones.
        return azurite.start(location=location, durable=durable)


def _print_azurite(emulator: azurite.Azurite) -> None:
    try:
        shown = f"{emulator.location.relative_to(Path.cwd())}/"
    except ValueError:
        shown = str(emulator.location)
    print(f"Azurite, data kept in {shown} (`make run FRESH=1` starts empty):", flush=True)
    for name, url in emulator.endpoints.items():
        print(f"  {name:<6} {url}", flush=True)
    print(f"  connection string: {emulator.connection_string}", flush=True)
    standard = (emulator.blob_port, emulator.queue_port, emulator.table_port)
    if standard != azurite.STANDARD_PORTS:
        print(
            "  (ports 10000-10002 are taken: UseDevelopmentStorage=true is not this one)",
            flush=True,
        )


def load_local_settings() -> None:
    """Values from local.settings.json (or its sample), under what the environment already says."""
    for name in ("local.settings.json", "local.settings.sample.json"):
        path = ROOT / name
        if path.exists():
            for setting, value in json.loads(path.read_text()).get("Values", {}).items():
                os.environ.setdefault(setting, str(value))
            return


def _run_own_host(port: int, key: str) -> int:
    try:
        count = worker_process_count(os.environ)
        invocation = runtime.describe(os.environ)
    except ValueError as problem:
        print(problem, file=sys.stderr)
        return 1
    listener = listen(port)
    # The app builds its `nextLink`s on the site's host name, which the platform sets in Azure:
    # here it is this host's own address (the app's SCHEDULER_PUBLIC_BASE_URL overrides it).
    os.environ["WEBSITE_HOSTNAME"] = f"127.0.0.1:{listener.getsockname()[1]}"
    # This host plays the platform's sign-in (devhost.identity) unless told it is off: it drops
    # principal headers a client sends, so the app may trust the ones it passes on.
    os.environ.setdefault("WEBSITE_AUTH_ENABLED", "True")

    def announce() -> None:
        _print_addresses(f"http://127.0.0.1:{listener.getsockname()[1]}")
        print(f"Function key (x-functions-key header or ?code=): {key}", flush=True)
        if os.environ["WEBSITE_AUTH_ENABLED"].lower() == "true":
            print(
                "Signed-in callers: python -m devhost.identity token --name alice"
                " --role Scheduler.Reader",
                flush=True,
            )
        print(f"{invocation}, on Python {sys.version.split()[0]}", flush=True)

    if count == 1:  # this process is the one worker
        return worker.serve(listener, key, runs_timers=True, on_ready=announce)
    announce()  # connections wait in the listen backlog until a worker takes them
    return run_workers(listener, count, key)


def _print_addresses(base_url: str) -> None:
    """Where the API, the web console and the health route answer: the console is the first
    thing a newcomer opens, so its address is printed rather than left to the docs."""
    print(f"Serving on {base_url}", flush=True)
    print(f"  console  {base_url}/console  (sign in with the function key)", flush=True)
    print(f"  health   {base_url}/health", flush=True)


def _run_core_tools(port: int) -> int:
    print(f"Azure Functions Core Tools found: running `func start --port {port}`.", flush=True)
    _print_addresses(f"http://127.0.0.1:{port}")
    key = os.environ["SCHEDULER_FUNCTION_KEY"]
    print(f"The app checks the function key itself: {key}", flush=True)
    return subprocess.call(["func", "start", "--port", str(port)], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
