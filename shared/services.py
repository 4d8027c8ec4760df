"""The composition root: every service the functions use, built once per process.

`current()` builds them from the settings the Functions host provides, on first use. API
handlers, the timer and the executor all take the same `Services`; tests build their own with
`build`, on their own Azurite, clock and queue.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core.exceptions import ResourceExistsError

from shared.actions import ActionPerformer, Actions
from shared.actions.deferred import BuiltOnFirstUse
from shared.domain.job_definition import ActionType
from shared.execution.dispatch import Dispatcher
from shared.execution.fan_out import FanOut
from shared.execution.scheduling import Scheduling
from shared.execution.worker import ExecutionWorker
from shared.logs import quiet_third_party_loggers
from shared.settings import Settings
from shared.storage.activity_log import ACTIVITY_TABLE, ActivityLog
from shared.storage.clients import queue_client, storage_credential, table_service
from shared.storage.due_index import DUE_TABLE, DueIndex
from shared.storage.interface import Storage
from shared.storage.queue_http import Base64Text, QueueLike
from shared.storage.role_assignments import ASSIGNMENTS_TABLE, RoleAssignments
from shared.storage.table_http import TableServiceLike
from shared.storage.table_store import TABLES, create_tables, table_storage
from shared.telemetry import configure as configure_telemetry
from shared.telemetry import current as telemetry

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
    dispatcher: Dispatcher
    scheduling: Scheduling
    build_worker: Callable[[], ExecutionWorker]
    blocking_threads: ThreadPoolExecutor
    """Threads for the executor's blocking work: an execution mostly waits on storage and on
    its target, so many can be under way at once (asyncio's default pool has cores + 4)."""
    fan_out: FanOut  # ranges of the due index, handed on by the tick, moved by the executor
    activity_log: ActivityLog  # who changed what, and who was refused (shared/api/activity.py)
    role_assignments: RoleAssignments  # roles given at a subscription or resource group

    def now(self) -> datetime:
        return self.clock()

    @functools.cached_property
    def worker(self) -> ExecutionWorker:
        """The executor and its action performers, built on first use: the API and the timers
        never need them, and a setting only they read must not take the API down."""
        return self.build_worker()

    def close(self) -> None:
        """Close what holds connections open beyond a call (Service Bus senders)."""
        if "worker" in self.__dict__:
            self.worker.close()
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
    """Every service, connected to the storage the settings name (tables and queue created).

    A test passes its own clock, queue and table names, and may pass a `storage` built on the
    same tables (one whose aggregate is wrapped to inject faults or count calls). With `tables`
    (a table service) and `queues` (a queue by its name) as well, no storage account is used:
    tests/in_memory.py builds every service in memory that way.
    """
    quiet_third_party_loggers()  # before any client is built: none may log a target's URL
    identity = settings.storage_identity
    # One credential for every storage client (it caches its tokens); None on Azurite.
    credential = storage_credential(identity) if identity is not None else None
    account: TableServiceLike = tables or table_service(
        settings, credential, raw_request_hook=STORAGE_REQUESTS
    )
    create_tables(account, (*TABLES, due_table, ACTIVITY_TABLE, ASSIGNMENTS_TABLE))
    storage = storage or table_storage(account)
    # The Functions host reads queue messages as base64 by default (host.json messageEncoding).
    queue = (
        queues(queue_name)
        if queues
        else queue_client(
            settings,
            queue_name,
            credential,
            message_encode_policy=Base64Text(),
            raw_request_hook=STORAGE_REQUESTS,
        )
    )
    with contextlib.suppress(ResourceExistsError):
        queue.create_queue()
    due_index = DueIndex(account.get_table_client(due_table))
    # Follow-ups wait a moment for others of the same second (shared.execution.dispatch).
    # Where the host moves a message after its last failed delivery (/health reports its depth).
    poison_queue = f"{queue_name}-poison"
    poison = queues(poison_queue) if queues else queue_client(settings, poison_queue, credential)
    dispatcher = Dispatcher(
        queue, due_index, settings.horizon, coalesce=follow_up_gathering, poison=poison
    )
    telemetry().watch_queues(dispatcher.queue_depth, dispatcher.poison_depth)
    timeouts = {} if action_timeout is None else {"timeout": action_timeout}

    # The performers' modules are imported when their first action comes (BuiltOnFirstUse):
    # their SDKs (httpx, azure-servicebus, the Queue SDK, azure-identity) would otherwise be
    # half a second of every cold start, and most deployments use one or two kinds of action.
    def http_actions() -> ActionPerformer:
        import httpx  # noqa: PLC0415

        from shared.actions.http import HttpActions  # noqa: PLC0415
        from shared.actions.managed_identity import IdentityTokens, storage_hosts  # noqa: PLC0415
        from shared.actions.oauth import TokenCache  # noqa: PLC0415
        from shared.actions.outbound import OutboundPolicy, tls_context  # noqa: PLC0415

        tls = tls_context(settings.outbound_ca_file)
        return HttpActions(
            OutboundPolicy.from_setting(settings.outbound_allowlist),
            settings.outbound_ca_file,
            TokenCache(settings.authority_host, httpx.Client(verify=tls), clock),
            # Without the platform's endpoint there is no identity: such jobs fail at once.
            IdentityTokens(clock, settings.identity_client_id)
            if settings.identity_endpoint
            else None,
            storage_hosts(
                [identity.table_service_uri, identity.queue_service_uri] if identity else []
            ),
            tls=tls,  # one context for both clients: the same roots, loaded once
        )

    def service_bus_actions() -> ActionPerformer:
        from shared.actions.service_bus import ServiceBusActions  # noqa: PLC0415

        return ServiceBusActions(settings, **timeouts)

    def storage_queue_actions() -> ActionPerformer:
        from shared.actions.storage_queue import StorageQueueActions  # noqa: PLC0415

        return StorageQueueActions(settings, **timeouts)

    def build_worker() -> ExecutionWorker:
        http = BuiltOnFirstUse(http_actions)
        service_bus = BuiltOnFirstUse(service_bus_actions)
        performers: dict[ActionType, ActionPerformer] = {
            ActionType.HTTP: http,
            ActionType.HTTPS: http,
            ActionType.STORAGE_QUEUE: BuiltOnFirstUse(storage_queue_actions),
            ActionType.SERVICE_BUS_QUEUE: service_bus,
            ActionType.SERVICE_BUS_TOPIC: service_bus,
        }
        actions = Actions(clock, performers)
        return ExecutionWorker(
            storage,
            dispatcher,
            actions,
            clock=clock,
            sleep=sleep,
            max_dequeue_count=settings.max_dequeue_count,
        )

    threads = ThreadPoolExecutor(EXECUTION_THREADS, thread_name_prefix="execution")
    scheduling = Scheduling(storage, dispatcher)
    # Range messages travel on the execution queue (shared.execution.fan_out).
    fan_out = FanOut(
        queue, due_index, dispatcher, clock=clock, max_dequeue_count=settings.max_dequeue_count
    )
    return Services(
        settings, clock, storage, due_index, dispatcher, scheduling, build_worker, threads, fan_out,
        ActivityLog(account.get_table_client(ACTIVITY_TABLE)),
        RoleAssignments(account.get_table_client(ASSIGNMENTS_TABLE)),
    )  # fmt: skip


@functools.cache
def current() -> Services:
    """This process's services, built on first use from the environment's settings."""
    settings = Settings.from_environment()
    configure_telemetry(settings)
    return build(settings)
