"""Who is on the other end: the client address of a request, behind the reverse proxies the operator trusts.

``[a2a] trusted_proxies`` lists addresses and CIDR networks (``["127.0.0.1", "10.0.0.0/8"]``; none by default).
Only when the direct TCP peer is one of them is ``X-Forwarded-For`` read at all; then the client is the right-most
address of that header (every ``X-Forwarded-For`` line joined in order) that is not itself a trusted proxy — each
proxy appends the address it received the request from, so everything left of the first untrusted address was
written by someone we do not trust and is ignored (the ``X-Forwarded-For`` convention; RFC 7239 §5.2 describes the
same chain for ``Forwarded``, which is not read). When every address is a trusted proxy the left-most one is the
client. A peer that is not trusted gets its header ignored, so no caller chooses its own address.

The address is what the failed-credential limiter counts bad credentials by, and the peer the implicit loopback
operator is recognised by (:mod:`.principals`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_proxy(value: str) -> Network:
    """One ``trusted_proxies`` entry as a network (an address is its /32 or /128). Raises ``ValueError`` for what is
    neither an address nor a network, and for a network with host bits set (``10.0.0.1/8``: say ``10.0.0.0/8``)."""
    try:
        return ipaddress.ip_network(value.strip(), strict=True)
    except ValueError as err:
        if "has host bits set" in str(err):
            network = ipaddress.ip_network(value.strip(), strict=False)
            raise ValueError(f"{value!r} has host bits set: the network is {network}") from None
        raise ValueError(f"{value!r} is neither an IP address nor a CIDR network") from None


def parse_address(value: str) -> Address | None:
    """An address as it appears in ``X-Forwarded-For`` or a peer: ``1.2.3.4``, ``1.2.3.4:5678``, ``::1``,
    ``[::1]:80`` (an IPv4-mapped IPv6 address is its IPv4 address); ``None`` for anything else (``unknown``,
    an RFC 7239 obfuscated name, garbage)."""
    text = value.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address: Address | None, proxies: Sequence[Network]) -> bool:
    return address is not None and any(address.version == n.version and address in n for n in proxies)


def client_address(peer: str, forwarded_for: Iterable[str], proxies: Sequence[Network]) -> str:
    """The client address of a request whose direct peer is ``peer`` and whose ``X-Forwarded-For`` header lines are
    ``forwarded_for`` (in order), given the trusted ``proxies`` (see the module docstring). Returns ``peer`` itself
    when it is not a trusted proxy or no header came; else the address found, written canonically
    (``::FFFF:1.2.3.4`` → ``1.2.3.4``), or an entry that is no address as written (at most 64 characters) — only a
    trusted proxy can have put it there."""
    if not proxies or not _trusted(parse_address(peer), proxies):
        return peer
    entries = [e.strip() for line in forwarded_for for e in line.split(",") if e.strip()]
    if not entries:
        return peer
    for entry in reversed(entries):
        address = parse_address(entry)
        if not _trusted(address, proxies):
            return str(address) if address is not None else entry[:64]
    first = parse_address(entries[0])
    return str(first) if first is not None else entries[0][:64]


__all__ = ["client_address", "parse_address", "parse_proxy"]
