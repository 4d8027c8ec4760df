"""Azurite, the Table/Queue/Blob emulator, started from node_modules on a fresh data folder."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AZURITE = ROOT / "node_modules" / "azurite" / "dist" / "src" / "azurite.js"
# Azurite's fixed development account (public, documented by Microsoft).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
STARTUP_TIMEOUT_S = 20.0


@dataclass
class Azurite:
    """A running Azurite; `connection_string` points the Azure SDKs at it."""

    blob_port: int
    queue_port: int
    table_port: int
    process: subprocess.Popen[bytes] = field(repr=False)
    location: tempfile.TemporaryDirectory[str] = field(repr=False)

    @property
    def connection_string(self) -> str:
        host = "http://127.0.0.1"
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={host}:{self.blob_port}/{ACCOUNT};"
            f"QueueEndpoint={host}:{self.queue_port}/{ACCOUNT};"
            f"TableEndpoint={host}:{self.table_port}/{ACCOUNT};"
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
        self.location.cleanup()


def start(
    blob_port: int = 0, queue_port: int = 0, table_port: int = 0, options: Sequence[str] = ()
) -> Azurite:
    """Start Azurite on the given ports (0: any free one) and wait until it answers.

    `options` go to Azurite as they are (`--oauth basic --cert ... --key ...`, say).
    """
    if not AZURITE.exists():
        raise RuntimeError(f"{AZURITE} is missing: run `npm ci` (make does) first")
    ports = [port or free_port() for port in (blob_port, queue_port, table_port)]
    location = tempfile.TemporaryDirectory(prefix="azurite-")
    # --skipApiVersionCheck: the current Python SDKs send API versions Azurite does not know yet.
    command = [
        "node", str(AZURITE), "--silent", "--disableTelemetry", "--skipApiVersionCheck",
        "--location", location.name,
        "--blobPort", str(ports[0]), "--queuePort", str(ports[1]), "--tablePort", str(ports[2]),
        *options,
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    azurite = Azurite(ports[0], ports[1], ports[2], process=process, location=location)
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
