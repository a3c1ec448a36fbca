"""The counters and rates of GET_BROKER_RUNTIME_INFO that ``mqadmin brokerStatus`` shows, as
RocketMQ's StoreStatsService and BrokerStats keep them: messages put and handed out since the broker
started, and their rates over the last 10, 60 and 600 s (``putTps``, ``getTransferedTps``: three
numbers separated by spaces, a window left out until the broker has run that long).

Nothing is counted per message: once a second the scheduler samples the sum of the ConsumeQueues'
max offsets (every put, retries and schedules included, as RocketMQ's putMessageTimesTotal) and
the pull processor's ``GetCounts``.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from rmq.broker.stats_log import GetCounts

SAMPLE_INTERVAL = 1.0
TPS_WINDOWS = (10, 60, 600)  # seconds, as RocketMQ's getPutTps(10) getPutTps(60) getPutTps(600)


def format_runtime(seconds: float) -> str:
    """RocketMQ's StoreStatsService.getFormatRuntime."""
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {secs} seconds ]"


def human_bytes(n: int) -> str:
    """RocketMQ's MixAll.humanReadableByteCount(n, false): ``512 B``, ``1.5 KiB``, ``45.2 GiB``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{value:.1f} {'KMGTPE'[exp - 1]}iB"


class RuntimeStats:
    """Puts and gets since boot, sampled every SAMPLE_INTERVAL for the rates."""

    def __init__(self, store: Any, get_counts: GetCounts) -> None:
        self.store = store
        self.get_counts = get_counts
        self.boot_timestamp = int(time.time() * 1000)
        self._puts = 0  # never decreases: a deleted topic takes its queues out of the sum
        self._last_stored = self._stored()
        self._samples: collections.deque[tuple[float, int, int]] = collections.deque(maxlen=max(TPS_WINDOWS) + 1)
        self._lock = threading.Lock()
        self.sample()

    def _stored(self) -> int:
        return sum(max(0, cq.max_offset_in_queue) for cq in self.store.consume_queues())

    def _got(self) -> int:
        return sum(messages for messages, _size in self.get_counts.snapshot().values())

    def sample(self) -> None:
        """On the scheduler, every SAMPLE_INTERVAL."""
        stored = self._stored()
        with self._lock:
            self._puts += max(0, stored - self._last_stored)
            self._last_stored = stored
            self._samples.append((time.monotonic(), self._puts, self._got()))

    @property
    def puts(self) -> int:
        """Messages put since boot, up to now (not the last sample)."""
        stored = self._stored()
        with self._lock:
            return self._puts + max(0, stored - self._last_stored)

    def _tps(self, field: int) -> str:
        with self._lock:
            samples = list(self._samples)
        rates = []
        last = samples[-1]
        for window in TPS_WINDOWS:
            if len(samples) > window:
                before = samples[-(window + 1)]
                rates.append(str(round((last[field] - before[field]) / max(last[0] - before[0], 1e-9), 4)))
        return " ".join(rates)

    def table(self) -> dict[str, Any]:
        """The brokerStatus keys this module answers."""
        return {
            "bootTimestamp": self.boot_timestamp,
            "runtime": format_runtime(time.time() - self.boot_timestamp / 1000),
            "msgPutTotalTodayNow": self.puts,
            "msgGetTotalTodayNow": self._got(),
            "putMessageTimesTotal": self.puts,
            "putTps": self._tps(1),
            "getTransferedTps": self._tps(2),
        }
