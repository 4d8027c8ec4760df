"""The composition root: every service the functions use, built once per process.

`current()` builds them from the settings the Functions host provides, on first use. API
handlers, the timer and the executor all take the same `Services`; tests build their own with
`build`, on their own Azurite, clock and queue.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from shared.logs import quiet_third_party_loggers
from shared.once import Once
from shared.settings import Settings
from shared.storage.activity_log import ACTIVITY_TABLE, ActivityLog
from shared.storage.clients import queue_client, storage_credential, table_service
from shared.storage.due_index import DUE_TABLE, DueIndex
from shared.storage.interface import Storage
from shared.storage.queue_http import QueueLike
from shared.storage.role_assignments import ASSIGNMENTS_TABLE, RoleAssignments
from shared.storage.table_http import TableServiceLike
from shared.storage.table_store import TABLES, create_tables, table_storage
from shared.telemetry import configure as configure_telemetry
from shared.telemetry import current as telemetry

if TYPE_CHECKING:
    from shared.execution.composition import Execution
    from shared.execution.dispatch import Dispatcher
    from shared.execution.fan_out import FanOut
    from shared.execution.scheduling import Scheduling
    from shared.execution.worker import ExecutionWorker

EXECUTIONS_QUEUE = "executions"
EXECUTION_THREADS = 32
FOLLOW_UP_GATHERING = timedelta(milliseconds=250)


class StorageRequestCounter:
    """Counts the storage requests this process sends, retries included (a batch is one).

    It is the clients' `raw_request_hook`: the storage SDKs build their own pipelines and take
    no extra policies, but call this hook on every try of every request.
    """

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> None:
        with self._lock:
            self._count += 1

    @property
    def count(self) -> int:
        return self._count


STORAGE_REQUESTS = StorageRequestCounter()


def utc_now() -> datetime:
    """The current instant: the one place the app reads the clock."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Services:
    settings: Settings
    clock: Callable[[], datetime]
    storage: Storage
    due_index: DueIndex
    blocking_threads: ThreadPoolExecutor
    """Threads for the executor's blocking work: an execution mostly waits on storage and on
    its target, so many can be under way at once (asyncio's default pool has cores + 4)."""
    activity_log: ActivityLog  # who changed what, and who was refused (shared/api/activity.py)
    role_assignments: RoleAssignments  # roles given at a subscription or resource group
    execution: Once[Execution]
    """Built on first use: an instance that only reads through the API never imports the
    schedule, dispatch and action modules, nor creates the queue (issue 49)."""

    def now(self) -> datetime:
        return self.clock()

    @property
    def dispatcher(self) -> Dispatcher:
        return self.execution().dispatcher

    @property
    def scheduling(self) -> Scheduling:
        return self.execution().scheduling

    @property
    def fan_out(self) -> FanOut:
        return self.execution().fan_out

    @property
    def worker(self) -> ExecutionWorker:
        """The executor and its action performers, built on first use: the API and the timers
        never need them, and a setting only they read must not take the API down."""
        return self.execution().worker()

    def close(self) -> None:
        """Close what holds connections open beyond a call (Service Bus senders)."""
        execution = self.execution.built
        if execution is not None and (worker := execution.worker.built) is not None:
            worker.close()
        self.blocking_threads.shutdown(wait=False)


def build(
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utc_now,
    sleep: Callable[[float], None] = time.sleep,
    queue_name: str = EXECUTIONS_QUEUE,
    due_table: str = DUE_TABLE,
    follow_up_gathering: timedelta = FOLLOW_UP_GATHERING,
    action_timeout: float | None = None,
    storage: Storage | None = None,
    tables: TableServiceLike | None = None,
    queues: Callable[[str], QueueLike] | None = None,
) -> Services:
    """Every service, connected to the storage the settings name (tables created; the queue
    with the execution side, on its first use).

    A test passes its own clock, queue and table names, and may pass a `storage` built on the
    same tables (one whose aggregate is wrapped to inject faults or count calls). With `tables`
    (a table service) and `queues` (a queue by its name) as well, no storage account is used:
    tests/in_memory.py builds every service in memory that way.
    """
    quiet_third_party_loggers()  # before any client is built: none may log a target's URL
    identity = settings.storage_identity
    # One credential for every storage client (it caches its tokens); None on Azurite.
    credential = storage_credential(identity) if identity is not None else None
    # Taken now: the queues' clients are built later, with the execution side, and a test swaps
    # the hook for build() alone.
    counter = STORAGE_REQUESTS
    account: TableServiceLike = tables or table_service(
        settings, credential, raw_request_hook=counter
    )
    create_tables(account, (*TABLES, due_table, ACTIVITY_TABLE, ASSIGNMENTS_TABLE))
    storage = storage or table_storage(account)
    due_index = DueIndex(account.get_table_client(due_table))

    def queue(name: str, **options: Any) -> QueueLike:
        if queues:
            return queues(name)
        return queue_client(settings, name, credential, raw_request_hook=counter, **options)

    def execution() -> Execution:
        from shared.execution.composition import Wiring, build_execution  # noqa: PLC0415

        return build_execution(
            Wiring(settings, storage, due_index, queue, clock, sleep, queue_name,
                   follow_up_gathering, action_timeout)
        )  # fmt: skip

    services = Services(
        settings, clock, storage, due_index,
        ThreadPoolExecutor(EXECUTION_THREADS, thread_name_prefix="execution"),
        ActivityLog(account.get_table_client(ACTIVITY_TABLE)),
        RoleAssignments(account.get_table_client(ASSIGNMENTS_TABLE)),
        Once(execution),
    )  # fmt: skip
    # Read at each export of the metrics, and only then (the lambdas look the dispatcher up
    # late): that builds the execution side, if nothing has yet.
    telemetry().watch_queues(
        lambda: services.dispatcher.queue_depth(),  # noqa: PLW0108
        lambda: services.dispatcher.poison_depth(),  # noqa: PLW0108
    )
    return services


@functools.cache
def current() -> Services:
    """This process's services, built on first use from the environment's settings."""
    settings = Settings.from_environment()
    configure_telemetry(settings)
    return build(settings)
