"""Every setting there is, who reads it and where it is set; the app's own, read once per process.

`EVERY_SETTING` is the one list: tests check that the code reads no other names, that
local.settings.sample.json holds exactly those marked for it, and that the Bicep templates set
exactly those marked for Azure. Trigger schedules are read by the Functions host itself, from
`%SETTING%` expressions in function_app.py. One value comes from the app's host.json rather than
the environment: the delivery at which the host gives a queue message up (`maxDequeueCount`),
which the executor must know to record the attempt first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

STORAGE = "AzureWebJobsStorage"  # a connection string: Azurite, locally
# Identity-based storage, as the Functions host reads it too (shared-key access is off in Azure).
STORAGE_TABLE_URI = "AzureWebJobsStorage__tableServiceUri"
STORAGE_QUEUE_URI = "AzureWebJobsStorage__queueServiceUri"
STORAGE_BLOB_URI = "AzureWebJobsStorage__blobServiceUri"  # the host's: timer leases, keys
STORAGE_CREDENTIAL = "AzureWebJobsStorage__credential"  # "managedidentity"
STORAGE_CLIENT_ID = "AzureWebJobsStorage__clientId"  # of the user-assigned identity
TICK_SCHEDULE = "SCHEDULER_TICK_SCHEDULE"  # NCRONTAB of the due-index timer: every minute
CLEANUP_SCHEDULE = "SCHEDULER_CLEANUP_SCHEDULE"  # NCRONTAB of the retention clean-up: daily
LOOKAHEAD = "SCHEDULER_LOOKAHEAD_SECONDS"
OUTBOUND_ALLOWLIST = "SCHEDULER_OUTBOUND_ALLOWLIST"
OUTBOUND_CA_FILE = "SCHEDULER_OUTBOUND_CA_FILE"
AUTHORITY_HOST = "SCHEDULER_AUTHORITY_HOST"
STORAGE_SUFFIX = "SCHEDULER_STORAGE_ENDPOINT_SUFFIX"
# Which client speaks to the app's tables and queues: "http", the app's own (the default), or
# "sdk", azure-data-tables and azure-storage-queue: the way back if the own client misbehaves.
STORAGE_CLIENT = "SCHEDULER_STORAGE_CLIENT"
STORAGE_CLIENTS = ("http", "sdk")
QUEUE_ENDPOINT_TEMPLATE = "SCHEDULER_QUEUE_ENDPOINT_TEMPLATE"
SERVICEBUS_SUFFIX = "SCHEDULER_SERVICEBUS_ENDPOINT_SUFFIX"
SERVICEBUS_ENDPOINT = "SCHEDULER_SERVICEBUS_ENDPOINT"
# The managed identity endpoint the platform provides (App Service, Functions): read by
# azure-identity, for ManagedServiceIdentity jobs; a local token server's in tests.
IDENTITY_ENDPOINT = "IDENTITY_ENDPOINT"
IDENTITY_HEADER = "IDENTITY_HEADER"
# Where clients reach the API, which `nextLink`s are built on (never a request's own Host header):
# the setting if given (a custom domain, a gateway in front), else the site's host name, which
# the platform sets in Azure and the local host sets to its own address.
PUBLIC_BASE_URL = "SCHEDULER_PUBLIC_BASE_URL"
INSIGHTS_CONNECTION = "APPLICATIONINSIGHTS_CONNECTION_STRING"
# `ClientId=...;Authorization=AAD`: telemetry goes in as that identity (Entra ID ingestion).
INSIGHTS_AUTHENTICATION = "APPLICATIONINSIGHTS_AUTHENTICATION_STRING"
TELEMETRY_EXPORTER = "SCHEDULER_TELEMETRY_EXPORTER"  # console or otlp: metrics without Azure
# `memory`: recorded and kept in memory, never sent (what the benchmarks measure the cost of).
TELEMETRY_EXPORTERS = ("console", "otlp", "memory")
SITE_HOST_NAME = "WEBSITE_HOSTNAME"
# Who may call (docs/security.md): the administrator's key, which a setting can turn off, and
# the platform's authentication (App Service Authentication), whose caller headers the app
# trusts only when the platform says it is on (it then replaces any a client sent).
FUNCTION_KEY = "SCHEDULER_FUNCTION_KEY"
KEY_ACCESS = "SCHEDULER_FUNCTION_KEY_ACCESS"  # "off": the key opens nothing
PLATFORM_AUTHENTICATION = "WEBSITE_AUTH_ENABLED"
PYDANTIC_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"  # read by pydantic; this module gives a default


@dataclass(frozen=True)
class Setting:
    """A setting's name, who reads it, and where it is set."""

    name: str
    read_by: frozenset[str]  # "app" (shared/), "host" (the Functions host), "devhost",
    # "azure-identity" (the library, from the process's environment, not through Settings)
    in_sample: bool = True  # local.settings.sample.json, for local runs on Azurite
    in_azure: bool = True  # the app settings of infra/app/api.bicep


def _setting(name: str, *read_by: str, in_sample: bool = True, in_azure: bool = True) -> Setting:
    return Setting(name, frozenset(read_by), in_sample, in_azure)


EVERY_SETTING = (
    _setting(STORAGE, "app", "host", in_azure=False),
    _setting(STORAGE_TABLE_URI, "app", in_sample=False),
    _setting(STORAGE_QUEUE_URI, "app", "host", in_sample=False),
    _setting(STORAGE_BLOB_URI, "host", in_sample=False),
    _setting(STORAGE_CREDENTIAL, "app", "host", in_sample=False),
    _setting(STORAGE_CLIENT_ID, "app", "host", in_sample=False),
    _setting(TICK_SCHEDULE, "host"),
    _setting(CLEANUP_SCHEDULE, "host"),
    _setting(LOOKAHEAD, "app"),
    _setting(OUTBOUND_ALLOWLIST, "app"),
    _setting(OUTBOUND_CA_FILE, "app", in_azure=False),  # a development CA
    _setting(AUTHORITY_HOST, "app"),
    _setting(STORAGE_SUFFIX, "app"),
    _setting(STORAGE_CLIENT, "app", in_sample=False, in_azure=False),
    _setting(QUEUE_ENDPOINT_TEMPLATE, "app", in_azure=False),  # Azurite
    _setting(SERVICEBUS_SUFFIX, "app"),
    _setting(SERVICEBUS_ENDPOINT, "app", in_azure=False),  # a local broker
    # Set by the platform itself, never by the templates or the sample.
    _setting(IDENTITY_ENDPOINT, "app", "azure-identity", in_sample=False, in_azure=False),
    _setting(IDENTITY_HEADER, "azure-identity", in_sample=False, in_azure=False),
    _setting(SITE_HOST_NAME, "app", in_sample=False, in_azure=False),  # the local host sets it too
    _setting(PUBLIC_BASE_URL, "app", in_sample=False, in_azure=False),  # only to override the above
    # Flex Consumption takes the language from the site's runtime settings, not this one.
    _setting("FUNCTIONS_WORKER_RUNTIME", "host", in_azure=False),
    _setting("AzureWebJobsFeatureFlags", "host", in_azure=False),
    # The host's own page at `/` gives way to the app's, which leads to the console.
    _setting("AzureWebJobsDisableHomepage", "host", in_sample=False),
    _setting(INSIGHTS_CONNECTION, "host", "app", in_sample=False),
    _setting(INSIGHTS_AUTHENTICATION, "host", "app", in_sample=False),
    _setting(TELEMETRY_EXPORTER, "app", in_sample=False, in_azure=False),
    _setting("SCHEDULER_PORT", "devhost", in_azure=False),
    _setting(FUNCTION_KEY, "app", "devhost", in_sample=False),  # the templates' administratorKey
    _setting(KEY_ACCESS, "app", in_sample=False, in_azure=False),
    # Set by the platform (the local host sets it when it plays the platform's sign-in).
    _setting(PLATFORM_AUTHENTICATION, "app", "devhost", in_sample=False, in_azure=False),
    _setting("SCHEDULER_IDENTITY_FOLDER", "devhost", in_sample=False, in_azure=False),
    # Worker processes per instance: the Functions host reads it, and so does the local host.
    _setting("FUNCTIONS_WORKER_PROCESS_COUNT", "host", "devhost", in_sample=False, in_azure=False),
    _setting(PYDANTIC_PLUGINS, "pydantic", in_sample=False, in_azure=False),
)

# The app uses no pydantic plugins, and looking for them reads the entry points of every
# installed distribution as the first validator is built: milliseconds of each cold start, more
# the more packages a deployment has (issue 49). Every entry point imports this module before a
# model is validated (function_app through the services, the local host's worker through the
# storage clients); an operator who wants plugins sets the variable (empty: all of them).
os.environ.setdefault(PYDANTIC_PLUGINS, "__all__")

DEFAULT_LOOKAHEAD_S = 90  # with a tick a minute, every occurrence is on the queue 30 s early
DEFAULT_AUTHORITY_HOST = "https://login.microsoftonline.com"
DEFAULT_STORAGE_SUFFIX = "core.windows.net"  # sovereign clouds: core.chinacloudapi.cn, ...
DEFAULT_SERVICEBUS_SUFFIX = "servicebus.windows.net"
# Without either setting: the Functions host's own local address.
DEFAULT_PUBLIC_BASE_URL = "http://localhost:7071"
# The Functions host's configuration, deployed beside function_app.py.
HOST_JSON = Path(__file__).resolve().parent.parent / "host.json"
DEFAULT_MAX_DEQUEUE_COUNT = 5  # the Functions host's, where host.json names none
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


class SettingError(ValueError):
    """A setting is present but unusable: the app refuses to start with it."""


@dataclass(frozen=True)
class StorageIdentity:
    """Where the app's tables and queues are, and which identity reaches them (Azure)."""

    table_service_uri: str
    queue_service_uri: str
    credential: str | None  # "managedidentity", or None for the default chain (az login, ...)
    client_id: str | None


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
    storage_identity: StorageIdentity | None = None
    identity_endpoint: str | None = None  # where the platform serves the app identity's tokens
    public_base_url: str = DEFAULT_PUBLIC_BASE_URL  # scheme and host (and path) of the API
    # The delivery at which the host gives a queue message up (host.json's maxDequeueCount).
    max_dequeue_count: int = DEFAULT_MAX_DEQUEUE_COUNT
    function_key: str | None = None  # the administrator's; None: no key opens anything
    platform_authentication: bool = False  # trust the platform's caller headers
    # Where metrics and traces go (shared.telemetry): Application Insights, else a local exporter.
    insights_connection: str | None = None
    insights_authentication: str | None = None
    telemetry_exporter: str | None = None
    storage_client: str = STORAGE_CLIENTS[0]  # one of STORAGE_CLIENTS

    @property
    def horizon(self) -> timedelta:
        """Attempts due within this go straight onto the queue (see shared.execution.dispatch)."""
        return 2 * self.lookahead

    @property
    def identity_client_id(self) -> str | None:
        """The client id of the identity the app runs as (the templates' user-assigned one, which
        it reaches its storage with); ManagedServiceIdentity jobs without a clientId use it.
        None: the platform's default, the system-assigned identity."""
        return self.storage_identity.client_id if self.storage_identity else None

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
            storage_identity=_storage_identity(environment),
            lookahead=timedelta(seconds=seconds),
            outbound_allowlist=environment.get(OUTBOUND_ALLOWLIST, ""),
            outbound_ca_file=environment.get(OUTBOUND_CA_FILE) or None,
            authority_host=environment.get(AUTHORITY_HOST) or DEFAULT_AUTHORITY_HOST,
            storage_suffix=environment.get(STORAGE_SUFFIX) or DEFAULT_STORAGE_SUFFIX,
            queue_endpoint_template=environment.get(QUEUE_ENDPOINT_TEMPLATE) or None,
            servicebus_suffix=environment.get(SERVICEBUS_SUFFIX) or DEFAULT_SERVICEBUS_SUFFIX,
            servicebus_endpoint=environment.get(SERVICEBUS_ENDPOINT) or None,
            identity_endpoint=environment.get(IDENTITY_ENDPOINT) or None,
            public_base_url=_public_base_url(environment),
            max_dequeue_count=max_dequeue_count(),
            function_key=_function_key(environment),
            platform_authentication=_is_on(environment, PLATFORM_AUTHENTICATION, default=False),
            insights_connection=environment.get(INSIGHTS_CONNECTION) or None,
            insights_authentication=environment.get(INSIGHTS_AUTHENTICATION) or None,
            telemetry_exporter=_telemetry_exporter(environment),
            storage_client=chosen_storage_client(environment),
        )


def _is_on(environment: Mapping[str, str], name: str, *, default: bool) -> bool:
    given = (environment.get(name) or "").strip().lower()
    if not given:
        return default
    if given in ("true", "on", "1"):
        return True
    if given in ("false", "off", "0"):
        return False
    raise SettingError(f"{name} must be true or false (on or off), not {given[:20]!r}")


def _function_key(environment: Mapping[str, str]) -> str | None:
    """The administrator's key, unless SCHEDULER_FUNCTION_KEY_ACCESS turns keys off."""
    key = environment.get(FUNCTION_KEY) or None
    return key if _is_on(environment, KEY_ACCESS, default=True) else None


def _telemetry_exporter(environment: Mapping[str, str]) -> str | None:
    exporter = (environment.get(TELEMETRY_EXPORTER) or "").strip().lower() or None
    if exporter is not None and exporter not in TELEMETRY_EXPORTERS:
        raise SettingError(
            f"{TELEMETRY_EXPORTER} must be one of {', '.join(TELEMETRY_EXPORTERS)}, "
            f"not {exporter!r}"
        )
    return exporter


def environment_ca_bundle(environment: Mapping[str, str] = os.environ) -> str | None:
    """The CA bundle requests, under the Azure SDKs, takes from the environment
    (REQUESTS_CA_BUNDLE, else CURL_CA_BUNDLE); the own storage client trusts the same."""
    return environment.get("REQUESTS_CA_BUNDLE") or environment.get("CURL_CA_BUNDLE") or None


def max_dequeue_count(host_json: Path = HOST_JSON) -> int:
    """host.json's `extensions.queues.maxDequeueCount`, which the Functions host (and the local
    host) reads too: the delivery at which a queue message is given up to `<queue>-poison`."""
    try:
        text = host_json.read_text()
    except FileNotFoundError:
        return DEFAULT_MAX_DEQUEUE_COUNT
    queues = json.loads(text).get("extensions", {}).get("queues", {})
    count = queues.get("maxDequeueCount", DEFAULT_MAX_DEQUEUE_COUNT)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise SettingError(f"host.json's maxDequeueCount must be a whole number above 0: {count!r}")
    return count


def _public_base_url(environment: Mapping[str, str]) -> str:
    """Where clients reach the API: the setting, else the site's host name (https, but for a
    local address, which the local hosts serve in the clear), else the local default."""
    given = environment.get(PUBLIC_BASE_URL)
    if given:
        parts = urlsplit(given)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise SettingError(
                f"{PUBLIC_BASE_URL} must be an http(s) URL without a query, such as "
                "https://scheduler.example.com"
            )
        return given.rstrip("/")
    host = environment.get(SITE_HOST_NAME)
    if not host:
        return DEFAULT_PUBLIC_BASE_URL
    local = urlsplit(f"//{host}").hostname in _LOCAL_HOSTS
    return f"{'http' if local else 'https'}://{host}"


def chosen_storage_client(environment: Mapping[str, str]) -> str:
    chosen = (environment.get(STORAGE_CLIENT) or STORAGE_CLIENTS[0]).strip().lower()
    if chosen not in STORAGE_CLIENTS:
        raise SettingError(
            f"{STORAGE_CLIENT} must be {' or '.join(repr(each) for each in STORAGE_CLIENTS)}, "
            f"not {chosen[:40]!r}"
        )
    return chosen


def _storage_identity(environment: Mapping[str, str]) -> StorageIdentity | None:
    """Identity-based storage settings, when there are any (they win over a connection string)."""
    tables, queues = environment.get(STORAGE_TABLE_URI), environment.get(STORAGE_QUEUE_URI)
    if not tables and not queues:
        return None
    if not tables or not queues:
        missing = STORAGE_QUEUE_URI if tables else STORAGE_TABLE_URI
        raise SettingError(f"{missing} is needed too: the app uses both tables and queues")
    credential = (environment.get(STORAGE_CREDENTIAL) or "").lower() or None
    if credential not in (None, "managedidentity"):
        raise SettingError(f"{STORAGE_CREDENTIAL} must be 'managedidentity' or unset")
    return StorageIdentity(tables, queues, credential, environment.get(STORAGE_CLIENT_ID) or None)
