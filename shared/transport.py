"""The HTTP transport of the app's Azure SDK clients (its own storage, and StorageQueue actions),
which differs from the SDK's default in two ways.

It keeps up to CALLS_AT_ONCE connections open rather than requests' 10. With more calls under
way than the pool holds, each connection beyond it is closed after one call, and the next call
opens a new one (the pipeline benchmark logged "Connection pool is full, discarding connection"
about 10 times a second at 70 executions/s, as lateness rose).

And it reads the environment once. By default requests looks up proxy settings (every
environment variable, twice) on each call: about a tenth of the CPU of a storage call here, and
more in the Functions host, whose environment is larger. The environment does not change while
the process runs, so what requests would take from it for the endpoint is read when the client
is built: its proxies (NO_PROXY still counts) and a CA bundle (REQUESTS_CA_BUNDLE,
CURL_CA_BUNDLE) unless the options name one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict
from urllib.request import getproxies

from urllib3.util.retry import Retry

from shared.domain.wire import SdkOption
from shared.settings import environment_ca_bundle

# The most calls one process has under way at once: the executor's delivery threads
# (shared/execution/worker.py says why this many). Every pool of outbound connections, storage's
# and the actions', is as large, so that none closes a connection a later call must open again.
# At 64 storage connections, two worker processes at 125-140 executions/s logged "Connection pool
# is full" up to 700 times a minute.
CALLS_AT_ONCE = 128


class EnvironmentSettings(TypedDict):
    """What requests reads from the environment for one endpoint, of what the clients use."""

    proxies: dict[str, str]
    verify: str | bool


def with_pooled_transport(endpoint: str, options: Mapping[str, SdkOption]) -> dict[str, SdkOption]:
    """A client's `options` for `endpoint`, with a transport that keeps up to CALLS_AT_ONCE
    connections open. The transport takes the client's options, as the SDK's own default
    transport does (`connection_verify`, timeouts)."""
    # requests and the SDK's transport on it are imported when the first SDK client is built,
    # so that importing the app (whose own storage client does not use them) does not pay.
    import requests  # noqa: PLC0415
    from azure.core.pipeline.transport import RequestsTransport  # noqa: PLC0415
    from requests.adapters import HTTPAdapter  # noqa: PLC0415

    environment = environment_settings(endpoint)
    if environment["verify"] is not True and "connection_verify" not in options:
        options = {**options, "connection_verify": environment["verify"]}
    session = requests.Session()
    session.trust_env = False
    # Retries are the SDK pipeline's, never urllib3's (as in the SDK's own transport).
    no_retries = Retry(total=False, redirect=False, raise_on_status=False)
    adapter = HTTPAdapter(pool_maxsize=CALLS_AT_ONCE, max_retries=no_retries)
    for scheme in ("http://", "https://"):
        session.mount(scheme, adapter)
    transport = RequestsTransport(session=session, **options)  # the transport closes it
    return {**options, "transport": transport, "proxies": environment["proxies"] or None}


def environment_settings(endpoint: str) -> EnvironmentSettings:
    """What requests would take from the environment for `endpoint`, read once: its `proxies`
    (NO_PROXY counts) and `verify` (a CA bundle named by REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE,
    else True)."""
    verify = environment_ca_bundle() or True
    return EnvironmentSettings(proxies=environment_proxies(endpoint), verify=verify)


def environment_proxies(url: str) -> dict[str, str]:
    """The proxies requests would take from the environment for `url` (NO_PROXY counts).
    requests finds them through urllib's `getproxies`: where that finds none, the usual case,
    there are none, and requests (a thirtieth of a second) is not imported to say so."""
    if not getproxies():
        return {}
    from requests.utils import get_environ_proxies  # noqa: PLC0415

    return dict(get_environ_proxies(url))
