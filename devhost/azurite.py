"""Azurite, the Table/Queue/Blob emulator, started from node_modules.

By default on a fresh temporary data folder that `stop()` removes (the tests' Azurites); given a
`location`, on that folder, kept as it is (`make run`'s `.azurite/`), and durable: Azurite then
answers a write only once it is in the folder's files, so that killing Azurite loses nothing it
acknowledged (azurite-durable.cjs says how; docs/local-data.md what is kept).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AZURITE = ROOT / "node_modules" / "azurite" / "dist" / "src" / "azurite.js"
# `make run`'s data folder (in .gitignore and .funcignore), and the function key it keeps there.
LOCAL_DATA = ROOT / ".azurite"
FUNCTION_KEY_FILE = LOCAL_DATA / "function-key"
# Loaded into Azurite's Node process: saves its data before each answer instead of every 5 s.
DURABLE = Path(__file__).resolve().parent / "azurite-durable.cjs"
# Azurite's fixed development account (public, documented by Microsoft).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
# Azurite's standard ports (blob, queue, table), which `UseDevelopmentStorage=true` and Azure
# Storage Explorer's "Emulator" connection assume.
STANDARD_PORTS = (10000, 10001, 10002)
# Usually 1-2 s; the first start after a machine boots, with Node's files not yet cached, once
# took over 20 s here.
STARTUP_TIMEOUT_S = 60.0
# Azurite's process creates files readable by its owner only (keep_private).
PRIVATE_UMASK = 0o077


@dataclass
class Azurite:
    """A running Azurite; `connection_string` points the Azure SDKs at it."""

    blob_port: int
    queue_port: int
    table_port: int
    process: subprocess.Popen[bytes] = field(repr=False)
    location: Path
    # The temporary folder that `stop()` removes; None for a persistent `location`.
    temporary: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    @property
    def endpoints(self) -> dict[str, str]:
        """The account's blob, queue and table endpoints, in that order."""
        ports = {"blob": self.blob_port, "queue": self.queue_port, "table": self.table_port}
        return {name: f"http://127.0.0.1:{port}/{ACCOUNT}" for name, port in ports.items()}

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            + "".join(f"{name.title()}Endpoint={url};" for name, url in self.endpoints.items())
        )

    @property
    def queue_endpoint_template(self) -> str:
        return queue_endpoint_template(self.connection_string)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.temporary is not None:
            self.temporary.cleanup()


def start(
    blob_port: int = 0,
    queue_port: int = 0,
    table_port: int = 0,
    options: Sequence[str] = (),
    location: Path | None = None,
    *,
    durable: bool | None = None,
) -> Azurite:
    """Start Azurite on the given ports (0: any free one) and wait until it answers.

    `options` go to Azurite as they are (`--oauth basic --cert ... --key ...`, say).
    `location` is the data folder, created if missing and never removed; without it, a fresh
    temporary folder that `stop()` removes.
    `durable` (by default: when a `location` is given) makes Azurite write what a request
    changed to its files before it answers; otherwise it writes every 5 s, and a crash loses
    up to the last 5 s of acknowledged writes. A temporary folder has no use for that, and
    Azurite answers faster without it.
    """
    if durable is None:
        durable = location is not None
    if not AZURITE.exists():
        raise RuntimeError(f"{AZURITE} is missing: run `npm ci` (make does) first")
    ports = chosen_ports((blob_port, queue_port, table_port))
    temporary = None
    if location is None:
        temporary = tempfile.TemporaryDirectory(prefix="azurite-")
        location = Path(temporary.name)
    keep_private(location)
    # --skipApiVersionCheck: the current Python SDKs send API versions Azurite does not know yet.
    preload = ["--require", str(DURABLE)] if durable else []
    command = [
        "node", *preload, str(AZURITE), "--silent", "--disableTelemetry", "--skipApiVersionCheck",
        "--location", str(location),
        "--blobPort", str(ports[0]), "--queuePort", str(ports[1]), "--tablePort", str(ports[2]),
        *options,
    ]  # fmt: skip
    # umask: the files Azurite creates are its owner's alone, as keep_private left the others.
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, umask=PRIVATE_UMASK
    )
    azurite = Azurite(
        ports[0], ports[1], ports[2], process=process, location=location, temporary=temporary
    )
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not all(_answers(port) for port in ports):
        if process.poll() is not None or time.monotonic() > deadline:
            stderr = process.stderr  # a pipe (stderr=PIPE above), so never None
            exited = process.poll() is not None
            error = stderr.read().decode(errors="replace") if exited and stderr is not None else ""
            azurite.stop()
            raise RuntimeError(f"Azurite did not start on ports {ports}: {error[-2000:]}")
        time.sleep(0.05)
    return azurite


def queue_endpoint_template(connection_string: str) -> str:
    """Where StorageQueue actions find an account's queues on this Azurite (its QueueEndpoint
    with the account left open), for SCHEDULER_QUEUE_ENDPOINT_TEMPLATE."""
    fields = dict(part.split("=", 1) for part in connection_string.split(";") if "=" in part)
    return fields["QueueEndpoint"].rstrip("/").rsplit("/", 1)[0] + "/{account}"


def standard_ports_or_free() -> tuple[int, int, int]:
    """Azurite's standard ports when all three are free, otherwise three free ones."""
    if all(is_free(port) for port in STANDARD_PORTS):
        return STANDARD_PORTS
    blob, queue, table = chosen_ports((0, 0, 0))
    return blob, queue, table


def empty(location: Path, keep: Container[str] = ()) -> None:
    """Delete everything in a data folder but the names in `keep` (and the folder itself), for
    a fresh start."""
    for entry in location.iterdir() if location.is_dir() else ():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def free_port() -> int:
    return chosen_ports((0,))[0]


def chosen_ports(wanted: Sequence[int]) -> list[int]:
    """`wanted` with each 0 replaced by a free port, no two alike and none of the given ones.

    Every probe socket stays bound until all are chosen: a port the kernel hands out is free
    again once its probe closes, and asking one at a time has handed back the same port twice.
    """
    with contextlib.ExitStack() as probes:

        def free() -> int:
            while True:
                probe = probes.enter_context(socket.socket())
                probe.bind(("127.0.0.1", 0))
                found = int(probe.getsockname()[1])
                if found not in wanted:
                    return found

        return [port or free() for port in wanted]


def keep_private(folder: Path) -> None:
    """Make `folder` (created if missing) and everything in it its owner's alone: folders 0700,
    files 0600, whatever modes an earlier run left. Local data holds jobs' secrets in plain
    text, and the function key."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in (folder, *folder.rglob("*")):
        if path.is_symlink():
            continue
        private = 0o700 if path.is_dir() else 0o600
        if stat.S_IMODE(path.stat().st_mode) != private:
            path.chmod(private)


def is_free(port: int) -> bool:
    """Whether nothing listens on `port` on 127.0.0.1 and it can be bound."""
    if _answers(port):
        return False
    with socket.socket() as probe:
        # As servers bind (Node's included): connections of a stopped Azurite lingering in
        # TIME_WAIT do not keep its ports from the next one.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
