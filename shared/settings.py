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
STORAGE_SUFFIX = "SCHEDULER_STORAGE_ENDPOINT_SUFFIX"
QUEUE_ENDPOINT_TEMPLATE = "SCHEDULER_QUEUE_ENDPOINT_TEMPLATE"
SERVICEBUS_SUFFIX = "SCHEDULER_SERVICEBUS_ENDPOINT_SUFFIX"
SERVICEBUS_ENDPOINT = "SCHEDULER_SERVICEBUS_ENDPOINT"

DEFAULT_LOOKAHEAD_S = 90  # with a tick a minute, every occurrence is on the queue 30 s early
DEFAULT_AUTHORITY_HOST = "https://login.microsoftonline.com"
DEFAULT_STORAGE_SUFFIX = "core.windows.net"  # sovereign clouds: core.chinacloudapi.cn, ...
DEFAULT_SERVICEBUS_SUFFIX = "servicebus.windows.net"


class SettingError(ValueError):
    """A setting is present but unusable: the app refuses to start with it."""


@dataclass(frozen=True)
class Settings:
    storage_connection: str
    lookahead: timedelta
    outbound_allowlist: str
    outbound_ca_file: str | None
    authority_host: str
    storage_suffix: str = DEFAULT_STORAGE_SUFFIX
    queue_endpoint_template: str | None = None
    servicebus_suffix: str = DEFAULT_SERVICEBUS_SUFFIX
    servicebus_endpoint: str | None = None

    @property
    def horizon(self) -> timedelta:
        """Attempts due within this go straight onto the queue (see shared.dispatch)."""
        return 2 * self.lookahead

    def queue_account_url(self, account: str) -> str:
        """Where a StorageQueue action's account serves its queues.

        The account name is validated by the API (letters and digits), so it cannot steer the
        request anywhere but a host of the configured suffix, or of the template (Azurite).
        """
        account = account.lower()
        if self.queue_endpoint_template:
            return self.queue_endpoint_template.replace("{account}", account)
        return f"https://{account}.queue.{self.storage_suffix}"

    def service_bus_host(self, namespace: str) -> tuple[str, bool]:
        """The host (and port) a Service Bus action's namespace is reached at, and whether over TLS.

        `SCHEDULER_SERVICEBUS_ENDPOINT` sends every namespace to one local emulator, in the
        clear, as the SDK's `UseDevelopmentEmulator` does.
        """
        if self.servicebus_endpoint:
            return self.servicebus_endpoint.split("://", 1)[-1].rstrip("/"), False
        return f"{namespace.lower()}.{self.servicebus_suffix}", True

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
            storage_suffix=environment.get(STORAGE_SUFFIX) or DEFAULT_STORAGE_SUFFIX,
            queue_endpoint_template=environment.get(QUEUE_ENDPOINT_TEMPLATE) or None,
            servicebus_suffix=environment.get(SERVICEBUS_SUFFIX) or DEFAULT_SERVICEBUS_SUFFIX,
            servicebus_endpoint=environment.get(SERVICEBUS_ENDPOINT) or None,
        )
