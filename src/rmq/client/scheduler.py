"""The client's timer thread: periodic jobs that may block on the network (route refresh, heartbeats,
rebalance, offset persistence), kept off the remoting loop, whose thread must never wait.

    scheduler = Scheduler("rmq-client-timer")
    scheduler.schedule_periodic(30.0, refresh_routes, initial_delay=0.01)
    scheduler.start() ... scheduler.shutdown()

Jobs run one at a time on the one thread, in due order; one that raises is logged and runs again
at its next time. ``run_soon(job)`` brings a periodic job forward (a rebalance on
NOTIFY_CONSUMER_IDS_CHANGED).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

from rmq.store.services import ServiceThread

log = logging.getLogger("rmq.client")


class Scheduler(ServiceThread):
    def __init__(self, name: str):
        super().__init__(name)
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._intervals: dict[Callable[[], None], float] = {}
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def schedule_periodic(self, interval: float, job: Callable[[], None], initial_delay: float | None = None) -> None:
        self._intervals[job] = interval
        self._push(time.monotonic() + (interval if initial_delay is None else initial_delay), job)

    def cancel(self, job: Callable[[], None]) -> None:
        """Stop a periodic job (a one already due may still run once)."""
        self._intervals.pop(job, None)

    def run_soon(self, job: Callable[[], None]) -> None:
        """Run ``job`` as soon as the thread is free (a periodic job keeps its period afterwards)."""
        self._push(time.monotonic(), job, one_shot=job in self._intervals)

    def _push(self, when: float, job: Callable[[], None], one_shot: bool = False) -> None:
        entry = job if not one_shot else _OneShot(job)
        with self._lock:
            heapq.heappush(self._heap, (when, next(self._seq), entry))
        self.wakeup()

    def run_once(self) -> None:
        with self._lock:
            due = self._heap[0][0] if self._heap else None
        now = time.monotonic()
        if due is None or due > now:
            self.wait_for_running(1.0 if due is None else min(due - now, 1.0))
            return
        with self._lock:
            _, _, entry = heapq.heappop(self._heap)
        job = entry.job if isinstance(entry, _OneShot) else entry
        if not isinstance(entry, _OneShot):
            interval = self._intervals.get(job)
            if interval is None:  # cancelled
                return
            self._push(now + interval, job)
        try:
            job()
        except Exception:
            log.exception("scheduled job %s failed", getattr(job, "__qualname__", job))


class _OneShot:
    __slots__ = ("job",)

    def __init__(self, job: Callable[[], None]):
        self.job = job
