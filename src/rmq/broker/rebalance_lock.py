"""Queue locks for orderly consumption (RocketMQ's RebalanceLockManager): LOCK_BATCH_MQ (41) and
UNLOCK_BATCH_MQ (42), docs/protocol.md#clients-and-groups.

Within a consumer group a queue is held by at most one clientId. A lock lapses when its holder has
not renewed it for ``lock_max_live_ms`` (60 s; orderly consumers renew every 20 s), and then any
client of the group may take it. Bodies:

    request  {"consumerGroup", "clientId", "mqSet": [{"topic", "brokerName", "queueId"}]}
    response {"lockOKMQSet": [{"topic", "brokerName", "queueId"}]}
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable

from rmq._clock import now_ms
from rmq.protocol.message_queue import MessageQueue

log = logging.getLogger("rmq.broker")

REBALANCE_LOCK_MAX_LIVE_MS = 60_000


@dataclasses.dataclass
class LockEntry:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    """group -> {MessageQueue: LockEntry}. Thread-safe."""

    def __init__(self, lock_max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_MS):
        self.lock_max_live_ms = lock_max_live_ms
        self._lock = threading.Lock()
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _expired(self, entry: LockEntry, now: int) -> bool:
        return now - entry.last_update_ms > self.lock_max_live_ms

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str, now: int | None = None
    ) -> set[MessageQueue]:
        """Lock (or renew) each queue for ``client_id``; returns the ones it now holds. A queue held
        by another client whose lock has not lapsed is left out."""
        now = now_ms() if now is None else now
        locked = set()
        with self._lock:
            queues = self._table.setdefault(group, {})
            for mq in mqs:
                entry = queues.get(mq)
                if entry is None or entry.client_id == client_id or self._expired(entry, now):
                    if entry is not None and entry.client_id != client_id:
                        log.info("lock of %s in group %s lapsed from %s to %s", mq, group, entry.client_id, client_id)
                    queues[mq] = LockEntry(client_id, now)
                    locked.add(mq)
            if not queues:
                del self._table[group]
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the queues ``client_id`` holds; locks of other clients stay."""
        with self._lock:
            queues = self._table.get(group)
            if queues is None:
                return
            for mq in mqs:
                entry = queues.get(mq)
                if entry is not None and entry.client_id == client_id:
                    del queues[mq]
                elif entry is not None:
                    log.warning(
                        "%s asked to unlock %s in group %s, held by %s: ignored", client_id, mq, group, entry.client_id
                    )
            if not queues:
                del self._table[group]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now: int | None = None) -> bool:
        """True when ``client_id`` holds a live lock on ``mq``."""
        now = now_ms() if now is None else now
        with self._lock:
            entry = self._table.get(group, {}).get(mq)
            return entry is not None and entry.client_id == client_id and not self._expired(entry, now)
