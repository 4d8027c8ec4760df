"""The SSRF guard on IPv6 addresses that carry an IPv4 address (docs/behaviour.md#http-calls).

A translator or tunnel on the way (NAT64, 6to4, Teredo, ...) delivers such an address to the IPv4
address inside it, so the guard judges that IPv4 address too, under the same allow-list. None of
these addresses is routable here: the tests watch the guard refuse before any connection is tried.
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from typing import Any

import httpcore
import httpx
import pytest

from shared.actions.http import HttpActions
from shared.actions.oauth import TokenCache
from shared.actions.outbound import EmbeddedIPv4, OutboundPolicy, embedded_ipv4
from shared.domain.attempts import Attempt
from shared.domain.ids import CollectionId, JobId
from tests.actions import typed

JOB = JobId(CollectionId("sub", "group", "jc"), "job")
ATTEMPT = Attempt(datetime(2026, 11, 22, 10, 0, tzinfo=UTC))
# Teredo holds its client's address with every bit flipped: 127.0.0.1 is 80ff:fffe.
TEREDO_LOOPBACK_CLIENT = "2001:0:4136:e378:8000:63bf:80ff:fffe"


def carried(*pairs: tuple[str, str]) -> list[EmbeddedIPv4]:
    return [EmbeddedIPv4(form, ipaddress.IPv4Address(address)) for form, address in pairs]


EMBEDDED = [
    ("ipv4-carries-nothing", "127.0.0.1", []),
    ("global-ipv6", "2001:4860:4860::8888", []),
    ("unspecified-is-not-ipv4-compatible", "::", []),
    ("loopback-is-not-ipv4-compatible", "::1", []),
    ("ipv4-mapped", "::ffff:127.0.0.1", carried(("IPv4-mapped", "127.0.0.1"))),
    ("ipv4-compatible", "::127.0.0.1", carried(("IPv4-compatible", "127.0.0.1"))),
    ("ipv4-compatible-low", "::2", carried(("IPv4-compatible", "0.0.0.2"))),
    ("ipv4-translated", "::ffff:0:a9fe:a9fe", carried(("IPv4-translated", "169.254.169.254"))),
    ("6to4", "2002:7f00:1::", carried(("6to4", "127.0.0.1"))),
    ("6to4-with-subnet-and-host", "2002:a9fe:a9fe:1::5", carried(("6to4", "169.254.169.254"))),
    ("nat64", "64:ff9b::7f00:1", carried(("NAT64", "127.0.0.1"))),
    ("nat64-metadata", "64:ff9b::a9fe:a9fe", carried(("NAT64", "169.254.169.254"))),
    ("nat64-local-use", "64:ff9b:1::a00:1", carried(("local-use NAT64", "10.0.0.1"))),
    ("nat64-local-use-subnet", "64:ff9b:1:abcd::c0a8:1", carried(("local-use NAT64", "192.168.0.1"))),
    ("beside-the-nat64-prefixes", "64:ff9b:2::7f00:1", []),
    ("teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
     carried(("Teredo server", "65.54.227.120"), ("Teredo client", "192.0.2.45"))),
    ("teredo-loopback-client", TEREDO_LOOPBACK_CLIENT,
     carried(("Teredo server", "65.54.227.120"), ("Teredo client", "127.0.0.1"))),
]  # fmt: skip


@pytest.mark.parametrize(("address", "expected"), [case[1:] for case in EMBEDDED], ids=[case[0] for case in EMBEDDED])
def test_every_ipv4_address_an_ipv6_address_carries_is_found(address: str, expected: list[EmbeddedIPv4]) -> None:
    assert embedded_ipv4(ipaddress.ip_address(address)) == expected


# --- the policy -------------------------------------------------------------------------------

REFUSED = [
    ("ipv4-compatible-loopback", "::127.0.0.1", "", "carries 127.0.0.1 (IPv4-compatible), a loopback address"),
    ("ipv4-translated-metadata", "::ffff:0:a9fe:a9fe", "", "carries 169.254.169.254 (IPv4-translated), a link-local address"),
    ("6to4-loopback", "2002:7f00:1::", "", "carries 127.0.0.1 (6to4), a loopback address"),
    ("nat64-loopback", "64:ff9b::7f00:1", "", "carries 127.0.0.1 (NAT64), a loopback address"),
    ("nat64-metadata", "64:ff9b::a9fe:a9fe", "", "carries 169.254.169.254 (NAT64), a link-local address"),
    ("nat64-local-use-private", "64:ff9b:1::a00:1", "", "carries 10.0.0.1 (local-use NAT64), a private address"),
    # Teredo itself is refused already; opened by the allow-list, its client is still judged.
    ("teredo-client-loopback", TEREDO_LOOPBACK_CLIENT, "2001::/32", "carries 127.0.0.1 (Teredo client), a loopback address"),
]  # fmt: skip


@pytest.mark.parametrize(("address", "allowlist", "reason"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_an_ipv6_address_is_refused_when_the_ipv4_address_it_carries_is(address: str, allowlist: str, reason: str) -> None:
    parsed = ipaddress.ip_address(address)
    refusal = OutboundPolicy.from_setting(allowlist).refusal("target.example", parsed)
    assert refusal == (
        f"the target target.example resolves to {parsed}, which {reason}, which actions may not reach "
        "(SCHEDULER_OUTBOUND_ALLOWLIST can allow it)"
    )


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:808:808::1", "::ffff:0:808:808", "2001:4860:4860::8888"],
                         ids=["nat64-public", "6to4-public", "ipv4-translated-public", "plain-global"])  # fmt: skip
def test_an_ipv6_address_carrying_a_public_ipv4_address_is_allowed(address: str) -> None:
    assert OutboundPolicy().refusal("target.example", ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("address", ["::ffff:127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::"],
                         ids=["ipv4-mapped", "ipv4-compatible", "nat64", "6to4"])  # fmt: skip
def test_the_allow_list_opens_a_carried_ipv4_address_as_it_opens_the_address_itself(address: str) -> None:
    """Decision: one policy for both. Allowing 127.0.0.0/8 allows it however it is written."""
    assert OutboundPolicy().refusal("target.example", ipaddress.ip_address(address)) is not None
    assert OutboundPolicy.from_setting("127.0.0.0/8").refusal("target.example", ipaddress.ip_address(address)) is None


def test_an_allow_listed_host_name_is_allowed_whatever_it_resolves_to() -> None:
    policy = OutboundPolicy.from_setting("nat64.internal")
    assert policy.refusal("nat64.internal", ipaddress.ip_address("64:ff9b::7f00:1")) is None


# --- the guarded client -----------------------------------------------------------------------


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every address a socket is opened to, behind the guard; none is actually opened."""
    tried: list[str] = []

    def connect_tcp(self: httpcore.SyncBackend, host: str, port: int, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        tried.append(host)
        raise httpcore.ConnectError(f"connection to {host} attempted")

    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", connect_tcp)
    return tried


def perform(policy: OutboundPolicy, uri: str) -> tuple[bool, str]:
    tokens = TokenCache("https://login.invalid", httpx.Client(), lambda: datetime.now(UTC))
    action = {"type": "Http", "request": {"uri": uri, "method": "GET"}}
    return HttpActions(policy, None, tokens).perform(typed(action), JOB, ATTEMPT)


GUARDED = [
    ("ipv4-compatible", "http://[::127.0.0.1]:8080/", "", "::7f00:1, which carries 127.0.0.1 (IPv4-compatible), a loopback address"),
    ("6to4", "http://[2002:7f00:1::]/", "", "2002:7f00:1::, which carries 127.0.0.1 (6to4), a loopback address"),
    ("nat64", "http://[64:ff9b::7f00:1]/", "", "64:ff9b::7f00:1, which carries 127.0.0.1 (NAT64), a loopback address"),
    ("nat64-metadata", "http://[64:ff9b::a9fe:a9fe]/metadata/identity/oauth2/token", "",
     "64:ff9b::a9fe:a9fe, which carries 169.254.169.254 (NAT64), a link-local address"),
    ("nat64-local-use", "http://[64:ff9b:1::7f00:1]/", "", "64:ff9b:1::7f00:1, which carries 127.0.0.1 (local-use NAT64), a loopback address"),
    ("teredo-client", f"http://[{TEREDO_LOOPBACK_CLIENT}]/", "2001::/32",
     f"{TEREDO_LOOPBACK_CLIENT}, which carries 127.0.0.1 (Teredo client), a loopback address"),
]  # fmt: skip


@pytest.mark.parametrize(("uri", "allowlist", "reason"), [case[1:] for case in GUARDED], ids=[case[0] for case in GUARDED])
def test_the_guard_refuses_before_any_connection_is_tried(connections: list[str], uri: str, allowlist: str, reason: str) -> None:
    succeeded, message = perform(OutboundPolicy.from_setting(allowlist), uri)
    assert not succeeded
    assert f"resolves to {reason}, which actions may not reach" in message
    assert connections == []


def test_the_guard_lets_an_allowed_address_through_to_its_connection(connections: list[str]) -> None:
    """The counterpart of the test above: the watch on connections does see one when it is made."""
    succeeded, message = perform(OutboundPolicy(), "http://[64:ff9b::808:808]/")
    assert not succeeded
    assert connections == ["64:ff9b::808:808"]
    assert "connection to 64:ff9b::808:808 attempted" in message


@pytest.mark.parametrize("host", ["a..example", "x" * 64 + ".example"], ids=["empty-label", "label-of-64"])
def test_a_host_name_the_resolver_cannot_encode_fails_the_attempt_with_a_message(connections: list[str], host: str) -> None:
    succeeded, message = perform(OutboundPolicy(), f"http://{host}/")
    assert not succeeded
    assert message.startswith(f"Http Action - Request to host '{host}' failed: cannot resolve {host}")
    assert connections == []


# --- one judgement on every Python ------------------------------------------------------------

# Addresses on which the versions of `ipaddress` disagree (3.13 counts 6to4 and local-use NAT64 as
# private, 3.11 calls 3fff::/20 and the retired site-local range global), and the guard's own
# answer for each, on every Python: the kind of address refused, or None for allowed.
JUDGED = [
    ("6to4-carrying-a-public-address", "2002:808:808::1", None),
    ("local-use-nat64-carrying-a-public-address", "64:ff9b:1::808:808", None),
    ("ipv6-documentation-3fff", "3fff::1", "reserved"),
    ("site-local", "fec0::1", "private"),
    ("segment-routing", "5f00::1", "reserved"),
    ("ietf-assignment", "192.0.0.8", "reserved"),
    ("pcp-anycast-is-public", "192.0.0.9", None),
    ("orchid-v2-is-public", "2001:20::1", None),
    ("teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"),
    ("shared", "100.64.0.1", "shared"),
    ("limited-broadcast", "255.255.255.255", "reserved"),
    ("this-network", "0.1.2.3", "reserved"),
    ("multicast-v6", "ff02::1", "multicast"),
    ("public-v4", "8.8.8.8", None),
]  # fmt: skip


@pytest.mark.parametrize(("address", "kind"), [case[1:] for case in JUDGED], ids=[case[0] for case in JUDGED])
def test_the_guard_judges_an_address_by_its_own_table_whatever_the_python(address: str, kind: str | None) -> None:
    refusal = OutboundPolicy().refusal("target.example", ipaddress.ip_address(address))
    if kind is None:
        assert refusal is None
    else:
        assert refusal is not None and f", a {kind} address," in refusal
