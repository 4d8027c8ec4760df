"""Where HTTP actions may connect: the SSRF guard, and the pooled clients that enforce it.

A job's URL is a client's input, and this service runs inside someone's network with a managed
identity: by default an action may not reach loopback, link-local (the instance metadata
endpoint at 169.254.169.254 among them), private, shared, reserved or unspecified addresses (a
table of the project's own, `special_addresses`, the same on every Python). The check
happens where the socket is opened, on the very address connected to, so a name that resolves
to a refused address (or resolves differently a moment later) and every redirect hop are
covered. `SCHEDULER_OUTBOUND_ALLOWLIST` opens chosen hosts and CIDR ranges (local development,
tests).

An IPv6 address can carry an IPv4 address that a translator or tunnel on the way delivers to:
`[64:ff9b::a9fe:a9fe]` reaches 169.254.169.254 on a network with NAT64. So every IPv4 address
embedded in an IPv6 one (`embedded_ipv4`) is checked as that IPv4 address would be, under the
same allow-list: the IPv6 address is refused when it, or any IPv4 address in it, is refused.
"""

from __future__ import annotations

import http.cookiejar
import ipaddress
import socket
import ssl
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import httpcore
import httpx

from shared.actions import ACTION_TIMEOUT_S
from shared.actions.special_addresses import Address, Network, not_public_kind
from shared.domain.redaction import is_secret_header, origin
from shared.transport import CALLS_AT_ONCE

MOST_REDIRECTS = 5
# Prefixes whose addresses carry an IPv4 address in their last 32 bits (RFC 6052, RFC 8215; the
# local-use prefix as the /96 that deployments use), and the SIIT form of RFC 2765.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_USE_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")


class OutboundRefused(httpcore.ConnectError):
    """The target's address is one that actions may not reach."""


@dataclass(frozen=True)
class OutboundPolicy:
    """Which addresses an action may connect to: public ones, and whatever the allow-list opens."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def from_setting(cls, setting: str) -> OutboundPolicy:
        """Read `SCHEDULER_OUTBOUND_ALLOWLIST`: host names and CIDR ranges, comma-separated."""
        hosts, networks = set(), []
        for item in (part.strip() for part in setting.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def refusal(self, host: str, address: Address) -> str | None:
        """Why connecting to `address` (found for `host`) is refused; None when allowed."""
        if host.lower().rstrip(".") in self.hosts:
            return None
        # An IPv4-mapped address is an IPv4 address written for an IPv6 socket: only the IPv4
        # address is reached. Any other address is reached as itself, and perhaps, through a
        # translator or tunnel on the way, at the IPv4 addresses it carries.
        mapped = isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None
        if not mapped:
            kind = self._refused_kind(address)
            if kind is not None:
                return (
                    f"the target {host} resolves to {address}, a {kind} address, which actions "
                    f"may not reach {_HOW_TO_ALLOW}"
                )
        for form, inside in embedded_ipv4(address):
            kind = self._refused_kind(inside)
            if kind is not None:
                return (
                    f"the target {host} resolves to {address}, which carries {inside} ({form}), "
                    f"a {kind} address, which actions may not reach {_HOW_TO_ALLOW}"
                )
        return None

    def _refused_kind(self, address: Address) -> str | None:
        if any(address in network for network in self.networks):
            return None
        return not_public_kind(address)


_HOW_TO_ALLOW = "(SCHEDULER_OUTBOUND_ALLOWLIST can allow it)"


class EmbeddedIPv4(NamedTuple):
    form: str  # how the IPv6 address carries it: "6to4", "NAT64", "Teredo client", ...
    address: ipaddress.IPv4Address


def embedded_ipv4(address: Address) -> list[EmbeddedIPv4]:
    """Every IPv4 address an IPv6 address carries, which a translator or tunnel may deliver to.

    IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`, but not `::` or `::1`),
    IPv4-translated (`::ffff:0:a.b.c.d`), 6to4 (2002::/16), NAT64 (64:ff9b::/96 and the local-use
    64:ff9b:1::/48) and Teredo (2001::/32: its server, and its client, which the address holds
    obfuscated). An IPv4 address carries none.
    """
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    last_32_bits = ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    found = []
    if address.ipv4_mapped is not None:
        found.append(EmbeddedIPv4("IPv4-mapped", address.ipv4_mapped))
    if address in _IPV4_COMPATIBLE and int(address) > 1:
        found.append(EmbeddedIPv4("IPv4-compatible", last_32_bits))
    if address in _IPV4_TRANSLATED:
        found.append(EmbeddedIPv4("IPv4-translated", last_32_bits))
    if address.sixtofour is not None:
        found.append(EmbeddedIPv4("6to4", address.sixtofour))
    if address in _NAT64:
        found.append(EmbeddedIPv4("NAT64", last_32_bits))
    if address in _LOCAL_USE_NAT64:
        found.append(EmbeddedIPv4("local-use NAT64", last_32_bits))
    if address.teredo is not None:
        server, client = address.teredo
        found += [EmbeddedIPv4("Teredo server", server), EmbeddedIPv4("Teredo client", client)]
    return found


class _GuardedBackend(httpcore.SyncBackend):
    """Opens sockets only to addresses the policy allows: the check and the connect are one."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as error:  # UnicodeError: a label the idna codec refuses
            raise httpcore.ConnectError(f"cannot resolve {host}: {error}") from None
        refusals: list[str] = []
        failure: httpcore.ConnectError | None = None
        for *_, address in found:
            ip = address[0]
            if not isinstance(ip, str):  # (int, bytes): an IPv6 answer to a Python without IPv6
                continue
            refusal = self._policy.refusal(host, ipaddress.ip_address(ip))
            if refusal is not None:
                refusals.append(refusal)
                continue
            try:  # to the checked address itself: no second lookup that could answer otherwise
                return super().connect_tcp(ip, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as error:
                failure = error
        if failure is not None:
            raise failure
        raise OutboundRefused(refusals[0] if refusals else f"no address found for {host}")


class _GuardedTransport(httpx.HTTPTransport):
    def __init__(self, policy: OutboundPolicy, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context)
        # The pool httpx built, rebuilt around the guarded backend (httpx takes no backend).
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            # As many as the executor's calls at once, all kept open between calls: httpx keeps
            # 20, so under load every call past the 20th opened a new connection, and a burst
            # of handshakes overflowed the pipeline benchmark target's listen queue.
            max_connections=CALLS_AT_ONCE,
            max_keepalive_connections=CALLS_AT_ONCE,
            keepalive_expiry=5.0,
            network_backend=_GuardedBackend(policy),
        )


class _ActionClient(httpx.Client):
    """httpx's client, but a redirect to another origin carries none of the request's
    credential headers (`redaction.is_secret_header`: `X-Api-Key`, `Ocp-Apim-Subscription-Key`,
    ...), where httpx drops only `Authorization`. As httpx does for that one, an upgrade from
    http to https on the same host keeps them: they went to that host in the clear already."""

    def _redirect_headers(
        self, request: httpx.Request, url: httpx.URL, method: str
    ) -> httpx.Headers:
        headers = super()._redirect_headers(request, url, method)
        if origin(str(url)) != origin(str(request.url)) and not _https_upgrade(request.url, url):
            for name in [name for name in headers if is_secret_header(name)]:
                del headers[name]
        return headers


def _https_upgrade(before: httpx.URL, after: httpx.URL) -> bool:
    return origin(str(before)) == ("http", after.host, 80) and origin(str(after)) == (
        "https",
        after.host,
        443,
    )


def guarded_client(policy: OutboundPolicy, ssl_context: ssl.SSLContext) -> httpx.Client:
    """A pooled client whose every connection, redirects included, passes the policy, and whose
    redirects to another origin carry no credential header."""
    return _ActionClient(
        transport=_GuardedTransport(policy, ssl_context),
        # The client is shared by every job: a cookie one job's target sets would go along on
        # other jobs' calls to that host. A job sends the cookies its own headers name, no more.
        cookies=http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
        timeout=httpx.Timeout(ACTION_TIMEOUT_S),
        follow_redirects=True,
        max_redirects=MOST_REDIRECTS,
        trust_env=False,
    )


def tls_context(extra_ca_file: str | None) -> ssl.SSLContext:
    """A TLS context for actions: the system's roots, plus a development CA if one is set; as
    strict as `ssl.create_default_context()` on this Python, the roots loaded at the first
    handshake (`_RootsAtFirstHandshake`)."""
    context = _RootsAtFirstHandshake(ssl.PROTOCOL_TLS_CLIENT)  # certificate and host name checked
    context.verify_flags |= _STRICTER_VERIFY_FLAGS
    if extra_ca_file:
        context.load_verify_locations(cafile=extra_ca_file)
    return context


# What `ssl.create_default_context()` adds to a client context's checks since Python 3.13.
_STRICTER_VERIFY_FLAGS = (
    ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
    if sys.version_info >= (3, 13)
    else ssl.VerifyFlags(0)
)
_ROOTS_LOADING = threading.Lock()


class _RootsAtFirstHandshake(ssl.SSLContext):
    """Loads the system's roots just before its first handshake, not when it is built: parsing
    them is some 17 ms of CPU, which a cold start's first delivery paid even when the action
    called an http:// target, and an instance whose actions never use TLS never needs."""

    _roots_loaded = False

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._load_roots()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self._load_roots()
        return super().wrap_bio(*args, **kwargs)

    def _load_roots(self) -> None:
        if self._roots_loaded:
            return
        with _ROOTS_LOADING:  # two first calls at once load them once
            if not self._roots_loaded:
                self.load_default_certs()
                self._roots_loaded = True
