"""Remote address patterns of plain_acl.yml (``globalWhiteRemoteAddresses``, an account's
``whiteRemoteAddress``), the forms RocketMQ 4.x's RemoteAddressStrategyFactory accepts:

    (empty)                       matches nothing
    *   *.*.*.*   *:*:*:*:*:*:*:*  matches every address
    192.168.1.1   ::1              one address
    192.168.1.1,10.0.0.2           a list of addresses
    192.168.1.{1,2,3}              the listed last parts of one prefix (IPv6: ``2001:db8::{1,2}``)
    192.168.0.*   192.168.*.1-100  ranges: each dot-separated part a number, ``*`` or ``low-high``
    2001:db8::*   2001:db8::1-ff   IPv6 ranges, per colon-separated group (hex)

One difference, on the safe side: 4.x checks only the first part that is a range (it lets
``192.168.*.1-100`` match 192.168.5.200); here every part must match.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

_MATCH_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


class AddressPatternError(ValueError):
    """A pattern none of the forms above reads; the message names it."""


def _exact(text: str) -> str:
    """The canonical form of one IP address (IPv6 compressed, lower case)."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise AddressPatternError(f"{text.strip()!r} is not an IP address") from None


def _part_range(part: str, maximum: int, base: int, pattern: str) -> tuple[int, int]:
    part = part.strip()
    try:
        if part == "*":
            return 0, maximum
        low, sep, high = part.partition("-")
        start = int(low, base)
        end = int(high, base) if sep else start
    except ValueError:
        raise AddressPatternError(f"{pattern!r}: {part!r} is not a number, '*' or 'low-high'") from None
    if not 0 <= start <= end <= maximum:
        raise AddressPatternError(
            f"{pattern!r}: {part!r} is not a range within 0-{maximum:{'x' if base == 16 else 'd'}}"
        )
    return start, end


def _ipv6_parts(text: str) -> list[str]:
    """The 8 groups of an IPv6 pattern, ``::`` expanded to zero groups."""
    head, sep, tail = text.partition("::")
    left = head.split(":") if head else []
    right = tail.split(":") if tail else []
    if sep:
        missing = 8 - len(left) - len(right)
        if missing < 1:
            raise AddressPatternError(f"{text!r} has too many groups for an IPv6 address")
        return left + ["0"] * missing + right
    if len(left) != 8:
        raise AddressPatternError(f"{text!r} does not have the 8 groups of an IPv6 address")
    return left


def _range_matcher(pattern: str) -> Callable[[str], bool]:
    if ":" in pattern:
        ranges = [_part_range(p, 0xFFFF, 16, pattern) for p in _ipv6_parts(pattern)]

        def parts_of(address: str) -> list[int] | None:
            try:
                ip = ipaddress.ip_address(address)
            except ValueError:
                return None
            if ip.version != 6:
                return None
            packed = ip.packed
            return [packed[i] << 8 | packed[i + 1] for i in range(0, 16, 2)]
    else:
        parts = pattern.split(".")
        if len(parts) != 4:
            raise AddressPatternError(f"{pattern!r} does not have the 4 parts of an IPv4 address")
        ranges = [_part_range(p, 255, 10, pattern) for p in parts]

        def parts_of(address: str) -> list[int] | None:
            try:
                ip = ipaddress.ip_address(address)
            except ValueError:
                return None
            return list(ip.packed) if ip.version == 4 else None

    def match(address: str) -> bool:
        values = parts_of(address)
        return values is not None and all(lo <= v <= hi for v, (lo, hi) in zip(values, ranges, strict=True))

    return match


class AddressPattern:
    """One pattern of plain_acl.yml; ``match("10.0.0.1")`` for a client's address (no port)."""

    def __init__(self, pattern: str | None):
        self.pattern = (pattern or "").strip()
        self._match = self._compile(self.pattern)

    def __repr__(self) -> str:
        return f"AddressPattern({self.pattern!r})"

    def match(self, address: str) -> bool:
        return self._match(address)

    @staticmethod
    def _compile(pattern: str) -> Callable[[str], bool]:
        if not pattern:
            return lambda address: False
        if pattern in _MATCH_ALL:
            return lambda address: True
        if pattern.endswith("}"):
            prefix, sep, listed = pattern[:-1].partition("{")
            if not sep or not prefix.endswith((".", ":")):
                raise AddressPatternError(
                    f"{pattern!r}: a list in braces must be the last part, e.g. 192.168.1.{{1,2}}"
                )
            return _one_of({_exact(prefix + item) for item in listed.split(",")})
        if "," in pattern:
            return _one_of({_exact(item) for item in pattern.split(",")})
        if "*" in pattern or "-" in pattern:
            return _range_matcher(pattern)
        exact = _exact(pattern)
        return lambda address: _canonical(address) == exact


def _canonical(address: str) -> str | None:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None


def _one_of(addresses: set[str]) -> Callable[[str], bool]:
    return lambda address: _canonical(address) in addresses


def host_of(remote_address: str) -> str:
    """The host of ``ip:port`` (a channel's remote address), as PlainAccessValidator takes it."""
    host, sep, _port = remote_address.rpartition(":")
    return host.strip("[]") if sep else remote_address
