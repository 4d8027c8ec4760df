"""Every setting the app reads, with its default and meaning, read once per process.

Trigger schedules are read by the Functions host itself, from `%SETTING%` expressions in
function_app.py; they are listed here too so that this module names every setting there is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

STORAGE = "AzureWebJobsStorage"
TICK_SCHEDULE = "SCHEDULER_TICK_SCHEDULE"  # NCRONTAB of the due-index timer: every minute
CLEANUP_SCHEDULE = "SCHEDULER_CLEANUP_SCHEDULE"  # NCRONTAB of the retention clean-up: daily
LOOKAHEAD = "SCHEDULER_LOOKAHEAD_SECONDS"
OUTBOUND_ALLOWLIST = "SCHEDULER_OUTBOUND_ALLOWLIST"
OUTBOUND_CA_FILE = "SCHEDULER_OUTBOUND_CA_FILE"
AUTHORITY_HOST = "SCHEDULER_AUTHORITY_HOST"

DEFAULT_LOOKAHEAD_S = 90  # with a tick a minute, every occurrence is on the queue 30 s early
DEFAULT_AUTHORITY_HOST = "https://login.microsoftonline.com"


class SettingError(ValueError):
    """A setting is present but unusable: the app refuses to start with it."""


@dataclass(frozen=True)
class Settings:
    storage_connection: str
    lookahead: timedelta
    outbound_allowlist: str
    outbound_ca_file: str | None
    authority_host: str

    @property
    def horizon(self) -> timedelta:
        """Attempts due within this go straight onto the queue (see shared.dispatch)."""
        return 2 * self.lookahead

    @classmethod
    def from_environment(cls, environment: Mapping[str, str] = os.environ) -> Settings:
        lookahead = environment.get(LOOKAHEAD) or str(DEFAULT_LOOKAHEAD_S)
        try:
            seconds = float(lookahead)
        except ValueError:
            raise SettingError(
                f"{LOOKAHEAD} must be a number of seconds, not {lookahead!r}"
            ) from None
        if not 1 <= seconds <= 3600:
            raise SettingError(f"{LOOKAHEAD} must be between 1 and 3600 seconds")
        return cls(
            storage_connection=environment.get(STORAGE, ""),
            lookahead=timedelta(seconds=seconds),
            outbound_allowlist=environment.get(OUTBOUND_ALLOWLIST, ""),
            outbound_ca_file=environment.get(OUTBOUND_CA_FILE) or None,
            authority_host=environment.get(AUTHORITY_HOST) or DEFAULT_AUTHORITY_HOST,
        )
