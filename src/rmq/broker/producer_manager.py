"""Online producers by group (RocketMQ's ProducerManager).

The broker needs them to ask a producer group about a transaction it left open
(CHECK_TRANSACTION_STATE), through any live connection of the group, and to list a group's
producers for an admin (GET_PRODUCER_CONNECTION_LIST).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any

from rmq._clock import now_ms
from rmq.broker.client_channel import (
    CHANNEL_EXPIRED_MS,
    ChannelScan,
    ClientChannelInfo,
    remove_clients,
)

log = logging.getLogger("rmq.broker")


class ProducerManager:
    """producer group -> {clientId: ClientChannelInfo}. Thread-safe."""

    def __init__(self, channel_expired_ms: int = CHANNEL_EXPIRED_MS):
        self.channel_expired_ms = channel_expired_ms
        self._lock = threading.RLock()
        self._groups: dict[str, dict[str, ClientChannelInfo]] = {}
        self._round_robin = itertools.count()

    def register_producer(self, group: str, info: ClientChannelInfo, now: int | None = None) -> None:
        now = now_ms() if now is None else now
        with self._lock:
            clients = self._groups.setdefault(group, {})
            old = clients.get(info.client_id)
            if old is not None and old.channel is info.channel:
                old.last_update_ms = now
                return
            info.last_update_ms = now
            clients[info.client_id] = info
            if old is None:
                log.info("producer %s joined group %s", info.client_id, group)

    def unregister_producer(self, group: str, client_id: str) -> bool:
        with self._lock:
            clients = self._groups.get(group)
            if clients is None or clients.pop(client_id, None) is None:
                return False
            if not clients:
                del self._groups[group]
            return True

    def on_channel_closed(self, channel: Any) -> set[str]:
        """Forget every producer on a closed connection; returns the groups it belonged to."""
        return {group for group, _ in self._remove_where(lambda info: info.channel is channel)}

    def scan_not_active_channels(self, now: int | None = None) -> list[Any]:
        """Drop producers silent for longer than the expiry; returns their channels (to close)."""
        now = now_ms() if now is None else now
        scan = ChannelScan()
        for group, info in self._remove_where(lambda info: info.expired(now, self.channel_expired_ms)):
            log.warning(
                "producer %s of group %s silent for %d ms: removed", info.client_id, group, now - info.last_update_ms
            )
            scan.add_channel(info.channel)
        return scan.expired_channels

    def _remove_where(self, predicate: Callable[[ClientChannelInfo], bool]) -> list[tuple[str, ClientChannelInfo]]:
        with self._lock:
            removed = remove_clients(self._groups.items(), predicate)
            for group in {group for group, _ in removed}:
                if not self._groups[group]:
                    del self._groups[group]
        return removed

    def client_ids(self, group: str) -> list[str]:
        with self._lock:
            return sorted(self._groups.get(group, {}))

    def find_channel(self, client_id: str) -> Any | None:
        with self._lock:
            for clients in self._groups.values():
                info = clients.get(client_id)
                if info is not None:
                    return info.channel
        return None

    def get_available_channel(self, group: str) -> Any | None:
        """A connection of the group, rotating over its producers; None when none is online."""
        with self._lock:
            clients = list(self._groups.get(group, {}).values())
        if not clients:
            return None
        return clients[next(self._round_robin) % len(clients)].channel

    def connections(self, group: str) -> list[ClientChannelInfo]:
        """The group's online producers (GET_PRODUCER_CONNECTION_LIST), by client id."""
        with self._lock:
            return [info for _, info in sorted(self._groups.get(group, {}).items())]

    def groups(self) -> list[str]:
        with self._lock:
            return sorted(self._groups)
