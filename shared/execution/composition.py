"""The execution side, put together: the execution queue, and what reads and writes it.

The composition root (shared/services.py) builds this on first use, so that a cold start
serving an API read imports none of it (issue 49): the dispatcher and the scheduling behind
every write, the fan-out of the tick, the executor, and each kind of action's performer (itself
built on that kind's first action: shared/actions/deferred.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from azure.core.exceptions import ResourceExistsError

from shared.actions import ActionPerformer, Actions
from shared.actions.deferred import BuiltOnFirstUse
from shared.domain.job_definition import ActionType
from shared.execution.dispatch import Dispatcher
from shared.execution.fan_out import FanOut
from shared.execution.scheduling import Scheduling
from shared.execution.worker import ExecutionWorker
from shared.once import Once
from shared.settings import Settings
from shared.storage.due_index import DueIndex
from shared.storage.interface import Storage
from shared.storage.queue_http import Base64Text, QueueLike


class Execution(NamedTuple):
    dispatcher: Dispatcher
    scheduling: Scheduling  # the API's writes, which hand near attempts to the dispatcher
    fan_out: FanOut  # ranges of the due index, handed on by the tick, moved by the executor
    worker: Once[ExecutionWorker]  # the executor and its performers, on the first delivery


class Wiring(NamedTuple):
    """What the execution side stands on, from the composition root."""

    settings: Settings
    storage: Storage
    due_index: DueIndex
    queue: Callable[..., QueueLike]  # a queue by its name, with the client's options
    clock: Callable[[], datetime]
    sleep: Callable[[float], None]
    queue_name: str
    follow_up_gathering: timedelta
    action_timeout: float | None


def build_execution(wiring: Wiring) -> Execution:
    settings = wiring.settings
    # The Functions host reads queue messages as base64 by default (host.json messageEncoding).
    queue = wiring.queue(wiring.queue_name, message_encode_policy=Base64Text())
    with contextlib.suppress(ResourceExistsError):
        queue.create_queue()
    # Where the host moves a message after its last failed delivery (/health reports its depth).
    poison = wiring.queue(f"{wiring.queue_name}-poison")
    # Follow-ups wait a moment for others of the same second (shared.execution.dispatch).
    dispatcher = Dispatcher(
        queue,
        wiring.due_index,
        settings.horizon,
        coalesce=wiring.follow_up_gathering,
        poison=poison,
    )

    def build_worker() -> ExecutionWorker:
        actions = Actions(wiring.clock, _performers(wiring))
        return ExecutionWorker(
            wiring.storage,
            dispatcher,
            actions,
            clock=wiring.clock,
            sleep=wiring.sleep,
            max_dequeue_count=settings.max_dequeue_count,
        )

    # Range messages travel on the execution queue (shared.execution.fan_out).
    fan_out = FanOut(
        queue,
        wiring.due_index,
        dispatcher,
        clock=wiring.clock,
        max_dequeue_count=settings.max_dequeue_count,
    )
    return Execution(
        dispatcher, Scheduling(wiring.storage, dispatcher), fan_out, Once(build_worker)
    )


def _performers(wiring: Wiring) -> dict[ActionType, ActionPerformer]:
    """One performer per kind of action, each imported and built on its kind's first action:
    their SDKs (httpx, azure-servicebus, the Queue SDK, azure-identity) would otherwise be half
    a second of every cold start, and most deployments use one or two kinds of action."""
    settings, clock = wiring.settings, wiring.clock
    timeouts: dict[str, Any] = (
        {} if wiring.action_timeout is None else {"timeout": wiring.action_timeout}
    )

    def http_actions() -> ActionPerformer:
        import httpx  # noqa: PLC0415

        from shared.actions.http import HttpActions  # noqa: PLC0415
        from shared.actions.managed_identity import IdentityTokens, storage_hosts  # noqa: PLC0415
        from shared.actions.oauth import TokenCache  # noqa: PLC0415
        from shared.actions.outbound import OutboundPolicy, tls_context  # noqa: PLC0415

        identity = settings.storage_identity
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

    http = BuiltOnFirstUse(http_actions)
    service_bus = BuiltOnFirstUse(service_bus_actions)
    return {
        ActionType.HTTP: http,
        ActionType.HTTPS: http,
        ActionType.STORAGE_QUEUE: BuiltOnFirstUse(storage_queue_actions),
        ActionType.SERVICE_BUS_QUEUE: service_bus,
        ActionType.SERVICE_BUS_TOPIC: service_bus,
    }
