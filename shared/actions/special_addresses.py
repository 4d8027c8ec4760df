"""Which IP addresses are not public, from a table of the project's own.

The SSRF guard (`outbound`) must judge an address the same way on every Python the app runs on.
`ipaddress`'s flags (`is_private`, `is_global`) do not: Python 3.13 counts 2002::/16 (6to4) and
64:ff9b:1::/48 (local-use NAT64) as private where 3.11 does not, so a 6to4 address carrying a
public IPv4 address was refused on one and allowed on the other. The ranges below follow IANA's
IPv4 and IPv6 Special-Purpose Address Registries (the ranges not globally reachable) plus
multicast, and nothing else decides.

Prefixes whose addresses carry an IPv4 address (6to4, NAT64, IPv4-mapped, -compatible and
-translated) are deliberately absent: they are judged by the IPv4 address they carry
(`outbound.embedded_ipv4`), as public when it is public.
"""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _ranges(*pairs: tuple[str, str]) -> tuple[tuple[Network, str], ...]:
    return tuple((ipaddress.ip_network(network), kind) for network, kind in pairs)


# Inside the ranges below, yet globally reachable per the registries: anycast services (PCP,
# TURN, AS112), benchmarking and ORCHIDv2 assignments.
_PUBLIC_EXCEPTIONS = _ranges(
    ("192.0.0.9/32", "public"), ("192.0.0.10/32", "public"),
    ("2001:1::1/128", "public"), ("2001:1::2/128", "public"), ("2001:1::3/128", "public"),
    ("2001:3::/32", "public"), ("2001:4:112::/48", "public"),
    ("2001:20::/28", "public"), ("2001:30::/28", "public"),
)  # fmt: skip

# The first range that holds an address gives its kind; the more specific ranges come first.
_NOT_PUBLIC = _ranges(
    ("0.0.0.0/32", "unspecified"),
    ("0.0.0.0/8", "reserved"),  # "this network"
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared"),  # carrier-grade NAT
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),  # the instance metadata endpoint among them
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
    ("192.0.2.0/24", "reserved"),  # documentation
    ("192.88.99.0/24", "reserved"),  # the retired 6to4 relay anycast
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved"),  # benchmarking
    ("198.51.100.0/24", "reserved"),  # documentation
    ("203.0.113.0/24", "reserved"),  # documentation
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # the limited broadcast 255.255.255.255 among them
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("100::/64", "reserved"),  # discard-only
    ("2001::/23", "reserved"),  # IETF protocol assignments, Teredo (2001::/32) among them
    ("2001:db8::/32", "reserved"),  # documentation
    ("3fff::/20", "reserved"),  # documentation
    ("5f00::/16", "reserved"),  # segment routing identifiers
    ("fc00::/7", "private"),  # unique local
    ("fe80::/10", "link-local"),
    ("fec0::/10", "private"),  # the retired site-local
    ("ff00::/8", "multicast"),
)


def not_public_kind(address: Address) -> str | None:
    """What kind of address that actions may not reach `address` is ("loopback", "private",
    "link-local", "shared", "multicast", "unspecified", "reserved"); None when it is public."""
    for network, _ in _PUBLIC_EXCEPTIONS:
        if address in network:
            return None
    for network, kind in _NOT_PUBLIC:
        if address in network:
            return kind
    return None
