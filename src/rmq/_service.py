"""The one shape of rmq's long-running parts, and its one timer model (docs/threads.md lists them all).

Services: every thread rmq starts for itself is a ``ServiceThread`` (RocketMQ's ServiceThread):
named ``rmq-...``, started by ``start``, looping ``run_once`` until ``shutdown`` wakes and joins
it; ``wakeup`` cuts a ``wait_for_running`` short. Every wait is bounded, so no thread outlives the
component that owns it.

Timers: a ``TimerQueue`` (a heap of ``TimerHandle``s on the ``time.monotonic`` clock, cancellable,
compacted when mostly cancelled) with one API, ``call_at / call_later / schedule_periodic /
run_soon``, driven in one of two places:

    rmq.net.loop.EventLoop   on the event loop thread: work that never blocks (request timeouts,
                             idle scans, the name server's broker expiry)
    Scheduler (below)        on a thread of its own: periodic work that may block on the network
                             or the disk (registration, heartbeats, rebalance, offset persistence)
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("rmq")

# Rebuild a timer heap when more than this share of it is cancelled timers (most request timeouts
# are cancelled by their answer long before they are due).
_CANCELLED_SHARE_TO_COMPACT = 0.5
_MIN_CANCELLED_TO_COMPACT = 256
# The longest a Scheduler sleeps without looking at its heap (a lost wake-up costs at most this).
_MAX_SCHEDULER_WAIT = 1.0


class TimerOwner(Protocol):
    """What drives a TimerQueue: told of cancellations (from any thread), able to re-arm."""

    def _timer_cancelled(self) -> None: ...

    def call_later(self, delay: float, fn: Callable[..., object], *args: Any) -> TimerHandle: ...


class TimerHandle:
    """A callback due at ``when`` (``time.monotonic``); ``cancel()`` drops it, from any thread."""

    __slots__ = ("when", "_callback", "_args", "cancelled", "_owner")

    def __init__(self, when: float, callback: Callable[..., object], args: tuple, owner: TimerOwner | None):
        self.when = when
        self._callback = callback
        self._args = args
        self.cancelled = False
        self._owner = owner

    def __lt__(self, other: TimerHandle) -> bool:
        return self.when < other.when

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            owner = self._owner
            if owner is not None:  # None once it has run: no longer in the heap
                owner._timer_cancelled()


class PeriodicHandle:
    """A callback repeated every ``interval`` seconds until ``cancel()``."""

    __slots__ = ("_owner", "interval", "_callback", "_timer", "cancelled")

    def __init__(self, owner: TimerOwner, interval: float, callback: Callable[[], object], initial_delay: float):
        self._owner = owner
        self.interval = interval
        self._callback = callback
        self.cancelled = False
        self._timer = owner.call_later(initial_delay, self._run)

    def _run(self) -> None:
        if self.cancelled:
            return
        # Re-arm first: a callback that raises is logged by its driver and still runs next time.
        self._timer = self._owner.call_later(self.interval, self._run)
        self._callback()

    def cancel(self) -> None:
        self.cancelled = True
        self._timer.cancel()


class TimerQueue:
    """Timer handles in due order. Not thread-safe: its owner serialises every call."""

    __slots__ = ("_heap", "_cancelled")

    def __init__(self) -> None:
        self._heap: list[TimerHandle] = []
        self._cancelled = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, handle: TimerHandle) -> None:
        heapq.heappush(self._heap, handle)

    def next_due(self) -> float | None:
        """When the first timer is due (it may be a cancelled one), None when there is none."""
        return self._heap[0].when if self._heap else None

    def pop_due(self, now: float, ready: deque) -> None:
        """Append ``(callback, args)`` of every live timer due by ``now`` to ``ready``."""
        heap = self._heap
        while heap and heap[0].when <= now:
            handle = heapq.heappop(heap)
            if handle.cancelled:
                self._cancelled -= 1
                continue
            handle._owner = None
            ready.append((handle._callback, handle._args))

    def cancelled_one(self) -> None:
        """Count a cancellation; compact the heap once cancelled timers are most of it."""
        self._cancelled += 1
        if (
            self._cancelled > _MIN_CANCELLED_TO_COMPACT
            and self._cancelled > len(self._heap) * _CANCELLED_SHARE_TO_COMPACT
        ):
            self._heap = [t for t in self._heap if not t.cancelled]
            heapq.heapify(self._heap)
            self._cancelled = 0


def run_callbacks(ready: deque, what: str) -> None:
    """Run the ``(fn, args)`` queued in ``ready`` now; one that raises is logged and the rest run."""
    for _ in range(len(ready)):
        fn, args = ready.popleft()
        try:
            fn(*args)
        except Exception:
            log.exception("%s: %s failed", what, getattr(fn, "__qualname__", fn))


class ServiceThread:
    """A named loop on its own thread: ``start / shutdown / wakeup / wait_for_running``.

    Subclasses implement ``run_once`` (one round, which normally ends in ``wait_for_running``)
    and may implement ``on_shutdown`` (last work, on the service thread, after the loop ends).
    """

    #: seconds between rounds when nobody wakes the service
    interval: float = 1.0

    def __init__(self, name: str) -> None:
        if not name.startswith("rmq-"):
            raise ValueError(
                f"service thread name {name!r} must start with 'rmq-' (the tests' leak check looks for it)"
            )
        self.name = name
        self._stopped = False
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop the loop, run ``on_shutdown`` on the service thread, and join it."""
        self._stopped = True
        self.wakeup()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.error("%s did not stop within %.0f s", self.name, timeout)
        self._thread = None

    @property
    def is_stopped(self) -> bool:
        return self._stopped

    def wakeup(self) -> None:
        self._wakeup.set()

    def wait_for_running(self, interval: float) -> None:
        """Sleep until woken or ``interval`` seconds pass."""
        self._wakeup.wait(interval)
        self._wakeup.clear()

    def _run(self) -> None:
        while not self._stopped:
            try:
                self.run_once()
            except Exception:
                log.exception("%s round failed", self.name)
                time.sleep(0.1)
        try:
            self.on_shutdown()
        except Exception:
            log.exception("%s shutdown work failed", self.name)

    def run_once(self) -> None:
        raise NotImplementedError

    def on_shutdown(self) -> None:
        """Last work on the service thread after the loop ends (a final flush)."""


class Scheduler(ServiceThread):
    """Timers run one at a time, in due order, on one thread of their own: for periodic work that
    may block (the event loop must never wait). Callable from any thread.

        scheduler = Scheduler("rmq-client-timer")
        routes = scheduler.schedule_periodic(30.0, refresh_routes, initial_delay=0)
        scheduler.start() ...; scheduler.run_soon(rebalance); routes.cancel(); scheduler.shutdown()

    A job that raises is logged; a periodic one runs again at its next time.
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._timers = TimerQueue()
        self._lock = threading.Lock()
        self._ready: deque = deque()

    def call_at(self, when: float, fn: Callable[..., object], *args: Any) -> TimerHandle:
        handle = TimerHandle(when, fn, args, self)
        with self._lock:
            self._timers.push(handle)
        self.wakeup()
        return handle

    def call_later(self, delay: float, fn: Callable[..., object], *args: Any) -> TimerHandle:
        return self.call_at(time.monotonic() + delay, fn, *args)

    def run_soon(self, fn: Callable[..., object], *args: Any) -> TimerHandle:
        """Run ``fn(*args)`` once, as soon as the thread is free."""
        return self.call_at(time.monotonic(), fn, *args)

    def schedule_periodic(
        self, interval: float, fn: Callable[[], object], initial_delay: float | None = None
    ) -> PeriodicHandle:
        """Run ``fn()`` every ``interval`` seconds, first after ``initial_delay`` (default: interval)."""
        return PeriodicHandle(self, interval, fn, interval if initial_delay is None else initial_delay)

    def _timer_cancelled(self) -> None:
        with self._lock:
            self._timers.cancelled_one()

    def run_once(self) -> None:
        with self._lock:
            due = self._timers.next_due()
            now = time.monotonic()
            if due is not None and due <= now:
                self._timers.pop_due(now, self._ready)
        if self._ready:
            run_callbacks(self._ready, self.name)
            return
        self.wait_for_running(_MAX_SCHEDULER_WAIT if due is None else min(due - now, _MAX_SCHEDULER_WAIT))
