"""Performing a job's actions: one `ActionPerformer` per kind of action, looked up by its type.

Each performer lives in its own module (`http`, `storage_queue`, `service_bus`); `Actions` picks
the one the action's `type` names, hands it the action as typed records (the wire models of
shared/domain/job_definition.py, read from the stored definition), and turns whatever happens
into an `Outcome`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import NamedTuple, Protocol

from shared.domain.attempts import Attempt
from shared.domain.decisions import Outcome
from shared.domain.ids import JobId
from shared.domain.job_definition import ActionName, ActionType, ErrorAction, JobProperties
from shared.domain.job_secrets import secret_values
from shared.domain.redaction import masked_values, redact_text
from shared.logs import app_logger

log = app_logger("scheduler.actions")
# The HTTP action timeout, static (docs/behaviour.md#timeouts). Here rather than in `outbound`,
# so that the executor can read it without importing httpx (a cold start's import).
ACTION_TIMEOUT_S = 60.0


class Performed(NamedTuple):
    """How a performer's action went."""

    succeeded: bool
    message: str  # what history keeps


class ActionPerformer(Protocol):
    def perform(
        self, action: ErrorAction, job: JobId, attempt: Attempt, region: str = ""
    ) -> Performed:
        """Perform one action: the main action or its errorAction (an `ErrorAction` is what
        both hold; the main action's model adds only the errorAction itself). `region` is the
        job collection's location, which a StorageQueue message names."""
        ...

    def close(self) -> None:
        """Close the connections it keeps open."""
        ...


class Actions:
    def __init__(
        self, clock: Callable[[], datetime], performers: Mapping[ActionType, ActionPerformer]
    ) -> None:
        self._clock, self._performers = clock, performers

    def perform(
        self, properties: JobProperties, job: JobId, attempt: Attempt, region: str = ""
    ) -> Outcome:
        """Run the attempt's action (the main one or the errorAction) and say how it went."""
        action: ErrorAction | None = properties.action
        if attempt.action is ActionName.ERROR_ACTION:
            action = properties.action.error_action
        started = self._clock()
        performer = None if action is None else self._performers.get(action.type)
        if action is None or performer is None:
            missing = (
                "no errorAction" if action is None else f"no performer for {action.type.value}"
            )
            message = f"The action could not be performed: {missing}"
            return Outcome(False, started, self._clock(), message)
        # What a target echoes back (a body quoting the request), or an exception quotes, must
        # not carry the job's secrets into history and the logs.
        secrets = secret_values(properties)
        try:
            succeeded, message = performer.perform(action, job, attempt, region)
        except Exception as error:  # a fault of ours is a failed attempt, never a lost record
            # The traceback goes through redact_text: an exception's message may quote the
            # job's URI, keys in its query string included.
            trace = redact_text("".join(traceback.format_exception(error)))
            log.error(
                "action of %s failed unexpectedly\n%s", job.arm_name, masked_values(trace, secrets)
            )
            succeeded = False
            message = f"The action could not be performed: internal error ({type(error).__name__})"
        message = masked_values(message, secrets)
        return Outcome(succeeded, started, self._clock(), message)

    def close(self) -> None:
        for performer in {
            id(performer): performer for performer in self._performers.values()
        }.values():
            performer.close()
