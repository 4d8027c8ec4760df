"""An action performer built when the first action of its kind comes, not when the app starts.

Each performer stands on an SDK that is slow to import (httpx, azure-servicebus, the Queue SDK:
a tenth of a second or more each, on every cold start), and a deployment may never run some
kinds of action. So the composition root (shared/services.py) hands the executor this stand-in,
which imports and builds the real performer on its first `perform`.
"""

from __future__ import annotations

from collections.abc import Callable

from shared.actions import ActionPerformer, Performed
from shared.domain.attempts import Attempt
from shared.domain.ids import JobId
from shared.domain.job_definition import ErrorAction
from shared.once import Once


class BuiltOnFirstUse:
    """The performer `build` makes, made once, on the first action (an ActionPerformer)."""

    def __init__(self, build: Callable[[], ActionPerformer]) -> None:
        self._performer = Once(build)

    def perform(
        self, action: ErrorAction, job: JobId, attempt: Attempt, region: str = ""
    ) -> Performed:
        return self._performer().perform(action, job, attempt, region)

    def close(self) -> None:
        """Close the performer's connections, if it was ever built."""
        if (built := self._performer.built) is not None:
            built.close()
