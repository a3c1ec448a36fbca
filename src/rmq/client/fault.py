"""Latency fault tolerance: steer sends away from brokers that were slow or failed (docs/clients.md#producers).

After each send the producer reports the broker's latency; a latency at or above a threshold makes
the broker unavailable for the matching duration (a failed send counts as an isolating 30 s
latency). Queue selection skips unavailable brokers while any other will do, and otherwise picks
one of the better half of the faulty ones. Thresholds follow RocketMQ's MQFaultStrategy, except
that rmq sets 3 s (Java: 30 s) for the 550 ms step (docs/clients.md#producers).

Beyond RocketMQ, a send still waiting counts too: a broker with a send outstanding for longer than
the first threshold that sets a broker aside (550 ms) is passed over by the next sends. A broker
that hangs (stopped, or its host gone without closing the connection) answers nothing until the
send times out (3 s); without this every send chosen for it meanwhile would wait and fail too.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# (latency threshold ms, not-available duration ms), largest threshold last.
LATENCY_STEPS: tuple[tuple[int, int], ...] = (
    (50, 0),
    (100, 0),
    (550, 3_000),
    (1_000, 60_000),
    (2_000, 120_000),
    (3_000, 180_000),
    (15_000, 600_000),
)
# The latency a failed send is recorded with: it isolates the broker (RocketMQ's isolation flag).
ISOLATION_LATENCY_MS = 30_000


def not_available_duration_ms(latency_ms: float, steps: Sequence[tuple[int, int]] = LATENCY_STEPS) -> int:
    for threshold, duration in reversed(steps):
        if latency_ms >= threshold:
            return duration
    return 0


@dataclass
class FaultItem:
    name: str
    latency_ms: float
    available_at: float  # monotonic seconds

    def is_available(self, now: float) -> bool:
        return now >= self.available_at


class LatencyFaultTolerance:
    """Broker name -> FaultItem; thread-safe."""

    def __init__(self, steps: Sequence[tuple[int, int]] = LATENCY_STEPS, clock: Callable[[], float] = time.monotonic):
        self.steps = tuple(steps)
        self._clock = clock
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()
        self._worst_index = itertools.count()
        # broker name -> {token: monotonic start} of sends under way, oldest first
        self._outstanding: dict[str, dict[int, float]] = {}
        self._tokens = itertools.count()
        self._stall_ms = next((threshold for threshold, duration in self.steps if duration > 0), None)

    def update(self, broker_name: str, latency_ms: float, isolation: bool = False) -> None:
        """Record a send's latency (``isolation``: it failed)."""
        item = self._item(broker_name, latency_ms, isolation)
        with self._lock:
            self._items[broker_name] = item

    def send_done(self, broker_name: str, token: int, latency_ms: float, isolation: bool = False) -> None:
        """``send_ended`` and ``update`` under one hold of the lock (once per answer)."""
        item = self._item(broker_name, latency_ms, isolation)
        with self._lock:
            self._items[broker_name] = item
            sends = self._outstanding.get(broker_name)
            if sends is not None:
                sends.pop(token, None)
                if not sends:
                    del self._outstanding[broker_name]

    def _item(self, broker_name: str, latency_ms: float, isolation: bool) -> FaultItem:
        if isolation:
            latency_ms = max(latency_ms, ISOLATION_LATENCY_MS)
        duration = 0
        # (below the first threshold that sets a broker aside, every step's duration is 0)
        if self._stall_ms is not None and latency_ms >= self._stall_ms:
            duration = not_available_duration_ms(latency_ms, self.steps)
        return FaultItem(broker_name, latency_ms, self._clock() + duration / 1000)

    def send_started(self, broker_name: str) -> int:
        """A send to ``broker_name`` is under way; the token to hand ``send_ended``."""
        with self._lock:
            token = next(self._tokens)
            self._outstanding.setdefault(broker_name, {})[token] = self._clock()
        return token

    def send_ended(self, broker_name: str, token: int) -> None:
        with self._lock:
            sends = self._outstanding.get(broker_name)
            if sends is not None:
                sends.pop(token, None)
                if not sends:
                    del self._outstanding[broker_name]

    def is_available(self, broker_name: str) -> bool:
        now = self._clock()
        item = self._items.get(broker_name)
        if item is not None and not item.is_available(now):
            return False
        return not self._stalled(broker_name, now)

    def _stalled(self, broker_name: str, now: float) -> bool:
        """Whether a send to ``broker_name`` has waited longer than a latency that sets it aside."""
        if self._stall_ms is None or broker_name not in self._outstanding:
            return False
        with self._lock:
            sends = self._outstanding.get(broker_name)
            oldest = next(iter(sends.values())) if sends else now
        return (now - oldest) * 1000 >= self._stall_ms

    def remove(self, broker_name: str) -> None:
        with self._lock:
            self._items.pop(broker_name, None)

    def pick_one_at_least(self) -> str | None:
        """A faulty broker to try when none is available: one of the better half, in turn."""
        now = self._clock()
        with self._lock:
            items = sorted(self._items.values(), key=lambda i: (not i.is_available(now), i.latency_ms, i.available_at))
        if not items:
            return None
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[next(self._worst_index) % half].name
