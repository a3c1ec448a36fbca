"""The figures VIEW_BROKER_STATS_DATA answers (RocketMQ's BrokerStatsManager, as ``mqadmin statsAll``
reads them): per topic the messages put (TOPIC_PUT_NUMS, keyed by the topic), per consumer group and
topic the messages and bytes pulls handed out (GROUP_GET_NUMS / GROUP_GET_SIZE, keyed
``topic@group``), each as a sum and a rate over the last minute, hour and day.

As the runtime stats, nothing is counted per message: a topic's puts are its ConsumeQueues' growth,
a group's gets the pull processor's ``GetCounts``. Those are cumulative, so a window's sum is the
value now minus the value at the oldest sample inside the window (the first sample is taken at
start: what a queue held before the broker started is not counted). Samples are kept every
SAMPLE_INTERVAL for the minute, every 10 minutes for the hour and every hour for the day, as
RocketMQ's StatsItem samples them. RocketMQ's ``avgpt`` (the average time an item took) has no
counterpart here and is answered 0.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

from rmq.broker.stats_log import GetCounts
from rmq.protocol.running_info import GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS, group_stats_key

SAMPLE_INTERVAL = 10.0
# (field of BrokerStatsData, seconds it covers, seconds between its samples)
WINDOWS = (("statsMinute", 60.0, SAMPLE_INTERVAL), ("statsHour", 3600.0, 600.0), ("statsDay", 86400.0, 3600.0))
STATS_NAMES = (TOPIC_PUT_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE)

Counters = dict[tuple[str, str], int]


class BrokerStats:
    """Cumulative counters sampled into a minute, an hour and a day of history."""

    def __init__(self, store: Any, get_counts: GetCounts, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.get_counts = get_counts
        self.clock = clock
        self._lock = threading.Lock()
        # per window, (time, counters) oldest first: enough samples that the oldest is a window old
        self._samples = [
            collections.deque[tuple[float, Counters]](maxlen=int(span // every) + 2) for _, span, every in WINDOWS
        ]
        self.sample()

    def counters(self) -> Counters:
        """Every counter now, keyed (stats name, stats key)."""
        out: Counters = {}
        for cq in self.store.consume_queues():
            key = (TOPIC_PUT_NUMS, cq.topic)
            out[key] = out.get(key, 0) + max(0, cq.max_offset_in_queue)
        for (group, topic), (messages, size) in self.get_counts.snapshot().items():
            out[(GROUP_GET_NUMS, group_stats_key(topic, group))] = messages
            out[(GROUP_GET_SIZE, group_stats_key(topic, group))] = size
        return out

    def sample(self) -> None:
        """On the scheduler, every SAMPLE_INTERVAL."""
        now, counters = self.clock(), self.counters()
        with self._lock:
            for samples, (_, _, every) in zip(self._samples, WINDOWS, strict=True):
                if not samples or now - samples[-1][0] >= every - 0.5:
                    samples.append((now, counters))

    def view(self, stats_name: str, stats_key: str) -> dict[str, dict[str, float | int]] | None:
        """BrokerStatsData of one counter; None when the broker never saw it."""
        now, counters = self.clock(), self.counters()
        key = (stats_name, stats_key)
        with self._lock:
            histories = [list(samples) for samples in self._samples]
        if key not in counters and not any(key in c for history in histories for _, c in history):
            return None
        value = counters.get(key, 0)
        data: dict[str, dict[str, float | int]] = {}
        for (field, span, _), history in zip(WINDOWS, histories, strict=True):
            inside = [(t, c) for t, c in history if now - t <= span] or history[-1:]
            since, base = inside[0]
            total = max(0, value - base.get(key, 0))
            data[field] = {"sum": total, "tps": round(total / max(now - since, 1e-3), 2), "avgpt": 0.0}
        return data
