"""The messages of one queue between pull and commit (RocketMQ's ProcessQueue).

Pulls of a queue come one after another with increasing offsets, so an insertion-ordered dict is
the sorted map RocketMQ uses: its first key is the lowest offset not yet consumed, which is the
offset safe to commit while consumption runs concurrently. Flow control reads the count, the
bytes and the span (highest - lowest cached offset).

Orderly consumption takes messages out in order (``take``), then commits them or puts them back
(``rollback``) to consume the same ones again.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmq.client.message import MessageExt

# A broker lock older than this is treated as lost until renewed (RocketMQ: 30 s of its 60 s).
LOCK_EXPIRED_SECONDS = 30.0


class ProcessQueue:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._msgs: dict[int, MessageExt] = {}
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.bytes = 0
        self.max_offset = -1
        self.dropped = False
        # orderly consumption
        self.locked = False
        self.last_lock_time = 0.0
        self.consuming = False  # a consume request of this queue is queued or running
        self.consume_lock = threading.Lock()  # held while a batch of the queue is consumed
        self.last_pull_time = time.monotonic()
        self.last_consume_time = time.monotonic()  # of the last messages consumed (running info)

    @property
    def count(self) -> int:
        return len(self._msgs)

    @property
    def span(self) -> int:
        with self._lock:
            if not self._msgs:
                return 0
            return self.max_offset - next(iter(self._msgs))

    def put(self, msgs: list[MessageExt]) -> bool:
        """Cache pulled messages; True when an orderly consume request should be submitted for them
        (none is pending)."""
        with self._lock:
            for msg in msgs:
                if msg.queue_offset not in self._msgs:
                    self._msgs[msg.queue_offset] = msg
                    self.bytes += len(msg.body)
            if msgs:
                self.max_offset = max(self.max_offset, msgs[-1].queue_offset)
            dispatch = bool(self._msgs) and not self.consuming
            if dispatch:
                self.consuming = True
            return dispatch

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget consumed messages; the offset to commit (-1: nothing was cached)."""
        with self._lock:
            if not self._msgs:
                return -1
            for msg in msgs:
                if self._msgs.pop(msg.queue_offset, None) is not None:
                    self.bytes -= len(msg.body)
            self.last_consume_time = time.monotonic()
            return next(iter(self._msgs)) if self._msgs else self.max_offset + 1

    # -- orderly --------------------------------------------------------------------------------

    def take(self, n: int) -> list[MessageExt]:
        """The next ``n`` messages in order, moved aside until commit or rollback. An empty list
        ends the consume request (``consuming`` is cleared under the same lock as ``put`` sets it)."""
        with self._lock:
            taken = []
            for offset in list(self._msgs)[:n]:
                msg = self._msgs.pop(offset)
                self._consuming[offset] = msg
                taken.append(msg)
            if not taken:
                self.consuming = False
            return taken

    def commit(self) -> int:
        """Done with the taken messages; the offset to commit (-1: none were taken)."""
        with self._lock:
            if not self._consuming:
                return -1
            offset = max(self._consuming) + 1
            self.bytes -= sum(len(m.body) for m in self._consuming.values())
            self._consuming.clear()
            self.last_consume_time = time.monotonic()
            return offset

    def rollback(self) -> None:
        """Put the taken messages back in front, to be consumed again."""
        with self._lock:
            merged = {**self._consuming, **self._msgs}
            self._msgs = dict(sorted(merged.items()))
            self._consuming.clear()

    def info(self, commit_offset: int) -> dict[str, Any]:
        """RocketMQ's ProcessQueueInfo of this queue (GET_CONSUMER_RUNNING_INFO's mqTable), its
        times as wall-clock ms."""

        def wall_ms(monotonic: float) -> int:
            return int((time.time() - (time.monotonic() - monotonic)) * 1000) if monotonic else 0

        with self._lock:
            cached, taken = list(self._msgs), list(self._consuming)
            size = self.bytes
        return {
            "commitOffset": commit_offset,
            "cachedMsgMinOffset": cached[0] if cached else 0,
            "cachedMsgMaxOffset": cached[-1] if cached else 0,
            "cachedMsgCount": len(cached),
            "cachedMsgSizeInMiB": size // (1024 * 1024),
            # orderly: the messages taken for the listener and not yet committed
            "transactionMsgMinOffset": min(taken) if taken else 0,
            "transactionMsgMaxOffset": max(taken) if taken else 0,
            "transactionMsgCount": len(taken),
            "locked": self.locked,
            "tryUnlockTimes": 0,
            "lastLockTimestamp": wall_ms(self.last_lock_time),
            "droped": self.dropped,
            "lastPullTimestamp": wall_ms(self.last_pull_time),
            "lastConsumeTimestamp": wall_ms(self.last_consume_time),
        }

    def lock_expired(self) -> bool:
        return time.monotonic() - self.last_lock_time > LOCK_EXPIRED_SECONDS

    def clear(self) -> None:
        with self._lock:
            self._msgs.clear()
            self._consuming.clear()
            self.bytes = 0
