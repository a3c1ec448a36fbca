"""One client connection as the broker's client registries see it (RocketMQ's ClientChannelInfo).

Channels are the net layer's connection objects, opaque here: compared by identity, never used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from rmq._clock import now_ms

# A client heartbeats every 30 s; one silent for this long is gone (RocketMQ's CHANNEL_EXPIRED_TIMEOUT).
CHANNEL_EXPIRED_MS = 120_000


@dataclasses.dataclass(eq=False)
class ClientChannelInfo:
    channel: Any
    client_id: str
    # the request header's language ("JAVA", "CPP", ...) and version ordinal
    language: str = ""
    version: int = 0
    last_update_ms: int = dataclasses.field(default_factory=now_ms)

    def expired(self, now: int, timeout_ms: int) -> bool:
        return now - self.last_update_ms > timeout_ms


@dataclasses.dataclass
class ChannelScan:
    """What a scan for silent clients removed: the consumer groups whose membership changed (tell
    their remaining consumers) and the channels to close."""

    changed_groups: set[str] = dataclasses.field(default_factory=set)
    expired_channels: list[Any] = dataclasses.field(default_factory=list)

    def add_channel(self, channel: Any) -> None:
        if all(c is not channel for c in self.expired_channels):
            self.expired_channels.append(channel)


def remove_clients(
    tables: Iterable[tuple[str, dict[str, ClientChannelInfo]]],
    predicate: Callable[[ClientChannelInfo], bool],
) -> list[tuple[str, ClientChannelInfo]]:
    """Remove from each group's ``{clientId: info}`` the clients ``predicate`` selects; returns the
    removed ``(group, info)`` pairs. Emptied groups are left for the caller to drop."""
    removed = []
    for group, clients in tables:
        for client_id, info in list(clients.items()):
            if predicate(info):
                del clients[client_id]
                removed.append((group, info))
    return removed
