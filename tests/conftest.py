"""Shared test settings and the real components the tests run against, started once a session.

Hypothesis runs derandomized by default so that every run of `make test` tries the same
examples; `HYPOTHESIS_PROFILE=thorough` explores fresh random ones, many more of them.

Every test that needs a process of its own (Azurite, the local host, the Service Bus test
broker) is marked `services`, by the fixtures it uses; `make test-fast` runs the others, which
need none of them (nor Node, nor the broker's AMQP package, imported only when a broker starts).
A test without the mark that starts a process anyway fails, saying so, rather than passing
where Node and Azurite happen to be installed and erring on a clean clone.
"""

from __future__ import annotations

import multiprocessing.process
import os
import platform
import secrets
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from hypothesis import HealthCheck, settings

from devhost import azurite
from tests.pipeline import Pipeline
from tests.targets import Target

if TYPE_CHECKING:
    from devhost.service_bus import AmqpBroker

ROOT = Path(__file__).resolve().parent.parent
API_VERSION = "2016-03-01"
# The Service Bus namespace the test broker plays: its keys and entities.
SAS_KEY_NAME, SAS_KEY = "scheduler-send", "c2NoZWR1bGVyLXRlc3Qta2V5LW5vdC1hLXNlY3JldA=="
BROKER_QUEUES, BROKER_TOPICS = ("orders", "alerts"), ("reports",)
STARTUP_TIMEOUT_S = 30.0

settings.register_profile(
    "default", max_examples=300, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# The Azure SDKs' user agent names the processor, which platform finds by running `uname -p`
# once per interpreter: asked here, before any test refuses processes, so that a test building an
# SDK client passes alone as it does after others (tests/actions/test_managed_identity.py).
platform.processor()

# The fixtures that start processes (or, for the broker, need its AMQP package).
NEEDS_SERVICES = {
    "storage", "service", "replay_host", "service_bus", "broker", "secure_azurite", "browser",
}  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if NEEDS_SERVICES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


class UnmarkedProcessError(RuntimeError):
    """A test (or a fixture it uses) started a process without being marked `services`."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _processes_refused_unless_marked(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _processes_refused_unless_marked(item):
        return (yield)


@contextmanager
def _processes_refused_unless_marked(item: pytest.Item) -> Iterator[None]:
    """Starting a process (subprocess or multiprocessing) fails in a test not marked `services`:
    the fixtures that start one belong in NEEDS_SERVICES, a test that does so itself needs
    `@pytest.mark.services`."""
    if item.get_closest_marker("services") is not None:
        yield
        return

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise UnmarkedProcessError(
            f"{item.nodeid} starts a process but is not marked `services`: add its fixture to "
            "NEEDS_SERVICES in tests/conftest.py, or mark the test, so that `make test-fast` "
            "needs no Node and no Azurite"
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", refuse)
        patch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
        yield


@dataclass(frozen=True)
class Service:
    base_url: str
    key: str
    storage: str  # connection string of the Azurite it runs on
    log: Path  # what the host printed and logged


@pytest.fixture(scope="session")
def storage() -> Iterator[str]:
    """A fresh Azurite for the session: its connection string."""
    emulator = azurite.start()
    yield emulator.connection_string
    emulator.stop()


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    """An HTTP target of the module's own (tests/targets.py); a module whose target must answer
    a certain way from the start defines its own."""
    server = Target()
    yield server
    server.close()


@pytest.fixture
def pipeline(storage: str) -> Pipeline:
    """The app's timer, queue and executor on the session's Azurite, with a clock of its own."""
    return Pipeline(storage)


@pytest.fixture(scope="session")
def service_bus() -> Iterator[AmqpBroker]:
    """The session's Service Bus stand-in (devhost/service_bus.py), which the local host sends to."""
    from devhost.service_bus import AmqpBroker  # noqa: PLC0415 (proton only where a broker runs)

    broker = AmqpBroker({SAS_KEY_NAME: SAS_KEY}, queues=BROKER_QUEUES, topics=BROKER_TOPICS)
    yield broker.start()
    broker.stop()


@pytest.fixture(scope="session")
def service(
    storage: str, service_bus: AmqpBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """The function app served by the local host, as `make run` serves it, on Azurite."""
    port, key = azurite.free_port(), secrets.token_urlsafe(24)
    log_path = tmp_path_factory.mktemp("devhost") / "output.log"
    host = launch_host(storage, port, key, log_path, service_bus=service_bus.endpoint)
    yield Service(f"http://127.0.0.1:{port}", key, storage, log_path)
    host.terminate()
    host.wait(timeout=10)


def launch_host(
    storage: str, port: int, key: str, log_path: Path, *, service_bus: str = "",
    settings: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:  # fmt: skip
    """`python -m devhost` on `storage`, answering on `port`; its output appended to `log_path`.

    `settings` are app settings added to (or replacing) the ones every test host has.
    """
    environment = os.environ | {
        "AzureWebJobsStorage": storage,
        "SCHEDULER_QUEUE_ENDPOINT_TEMPLATE": azurite.queue_endpoint_template(storage),
        "SCHEDULER_SERVICEBUS_ENDPOINT": service_bus,
        "SCHEDULER_FUNCTION_KEY": key,
        "SCHEDULER_PORT": str(port),
        # Tick every second and look 2 s ahead, so that a job due in a few seconds takes the
        # due index's path (horizon 4 s) within a test's patience.
        "SCHEDULER_TICK_SCHEDULE": "* * * * * *",
        "SCHEDULER_LOOKAHEAD_SECONDS": "2",
        "SCHEDULER_OUTBOUND_ALLOWLIST": "127.0.0.1/32,localhost",
        # The local issuer's key: the tests sign their tokens with it (tests/api/test_access.py).
        "SCHEDULER_IDENTITY_FOLDER": str(identity_folder_of(log_path)),
    } | (settings or {})
    # A file, not a pipe: a pipe nobody reads fills up and blocks the host mid-request.
    with log_path.open("ab") as log:
        host = subprocess.Popen(
            [sys.executable, "-m", "devhost", "--no-azurite", "--own-host"],
            cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not _answers(port):
        if host.poll() is not None or time.monotonic() > deadline:
            host.kill()
            pytest.fail(f"the local host did not start:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.05)
    return host


def identity_folder_of(log_path: Path) -> Path:
    """Where a host launched with `log_path` keeps its local issuer's key."""
    return log_path.parent / "identity"


@pytest.fixture(scope="session")
def replay_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A host where nothing runs (timers and executor off), on an Azurite of its own, for the
    replays of recorded traffic: on the session's Azurite, the session host's executor would
    take the replay's execution messages from the shared queue and run its jobs mid-comparison."""
    emulator = azurite.start()
    port, key = azurite.free_port(), secrets.token_urlsafe(24)
    log_path = tmp_path_factory.mktemp("replay-host") / "output.log"
    nothing_runs = {
        f"AzureWebJobs.{name}.Disabled": "true"
        for name in ("due_attempts_timer", "executor", "retention_timer")
    }
    host = launch_host(emulator.connection_string, port, key, log_path, settings=nothing_runs)
    yield Service(f"http://127.0.0.1:{port}", key, emulator.connection_string, log_path)
    host.terminate()
    host.wait(timeout=10)
    emulator.stop()


@pytest.fixture
def api(service: Service) -> Iterator[httpx.Client]:
    """An HTTP client for the management API: function key and api-version already set."""
    with httpx.Client(
        base_url=service.base_url,
        headers={"x-functions-key": service.key},
        params={"api-version": API_VERSION},
        timeout=10.0,
    ) as client:
        yield client


def _answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=0.5)
        return True
    except httpx.TransportError:
        return False
