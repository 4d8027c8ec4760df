"""Performing a job's actions: each type in its own module, chosen here by `action.type`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from shared.actions.http import HttpActions
from shared.actions.service_bus import ServiceBusActions
from shared.actions.storage_queue import StorageQueueActions
from shared.execution import Attempt, Outcome
from shared.jobs import ActionName, ActionType
from shared.resources import JobId

log = logging.getLogger("scheduler.actions")
_HTTP_TYPES = (ActionType.HTTP.value, ActionType.HTTPS.value)


class Actions:
    def __init__(
        self,
        clock: Callable[[], datetime],
        *,
        http: HttpActions,
        storage_queue: StorageQueueActions,
        service_bus: ServiceBusActions,
    ) -> None:
        self._clock = clock
        self._http, self._storage_queue, self._service_bus = http, storage_queue, service_bus

    def perform(
        self, definition: dict[str, Any], job: JobId, attempt: Attempt, region: str = ""
    ) -> Outcome:
        """Run the attempt's action (the main one or the errorAction) and say how it went.

        `region` is the job collection's location, which a StorageQueue message names.
        """
        action = definition["action"]
        if attempt.action is ActionName.ERROR_ACTION:
            action = action["errorAction"]
        started = self._clock()
        try:
            if action["type"] in _HTTP_TYPES:
                succeeded, message = self._http.perform(action, job, attempt)
            elif action["type"] == ActionType.STORAGE_QUEUE.value:
                succeeded, message = self._storage_queue.perform(action, job, attempt, region)
            else:
                succeeded, message = self._service_bus.perform(action, job, attempt)
        except Exception as error:  # a fault of ours is a failed attempt, never a lost record
            log.exception("action of %s failed unexpectedly", job.arm_id)
            succeeded = False
            message = f"The action could not be performed: internal error ({type(error).__name__})"
        return Outcome(succeeded, started, self._clock(), message)
