"""The push consumer's listener threads: ``ThreadPoolExecutor``'s shape without a Future per task.

A push consumer hands every pull's messages to the pool (RocketMQ's ConsumeMessageConcurrentlyService
submits one ConsumeRequest per chunk of ``consume_message_batch_max_size``; rmq.client.push_consumer
says why one task per pull here), and ``ThreadPoolExecutor.submit`` made a Future (its Condition), a
work item and took a Python-level Semaphore each time, and the worker notified the Future nobody
waited on (measured: most of a PushConsumer's CPU per message). Here a task is a tuple in a deque
under the pool's lock, and an exception is logged where the executor would have stored it in the
Future.

Waking a thread is the expensive part of a hand-off (the futex, then the GIL passed between the
loop thread and the woken one), so a task does not wake one while an awake thread will take it
next: a thread is woken (or started, up to ``max_threads``, ``<name>_<n>``, docs/threads.md) when
none is awake or when more than one task waits behind the busy ones; an awake thread runs tasks
until none is left, then sleeps. A fast listener thus runs on one or two threads, a slow one on
all of them.

The awake thread counted on may be stuck in a slow listener, though, and RocketMQ's executor (20
core threads) would have run the task at once on another. So a task that skipped the wake arms a
watchdog (``<name>_watch``, started at the first such task): while tasks come, it looks every
``WATCH_INTERVAL`` whether a thread took one since its last look, and when none did while some
wait, it wakes or starts a thread for them. A fast listener's threads take tasks on every look, so
its steady state costs the watchdog's timed wait, never a wake per task; an idle pool disarms it.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("rmq.client")

__all__ = ["WATCH_INTERVAL", "ConsumePool"]

Task = tuple[Callable[..., object], tuple[Any, ...]]

# How long a task may wait behind busy threads before the watchdog wakes or starts one: a task
# queued while the watchdog is already looking waits up to twice this (one look may just have seen
# a task taken). Short next to a listener a user calls slow, long next to a fast listener's task
# (a pull of 32 messages at a few us each), so a fast listener's threads never look stuck to it;
# its 100 looks/s while tasks come cost about half a percent of a core.
WATCH_INTERVAL = 0.01


class ConsumePool:
    """Run ``fn(*args)`` on up to ``max_threads`` threads, in the order submitted."""

    def __init__(self, max_threads: int, name: str):
        self._tasks: collections.deque[Task] = collections.deque()
        self._max_threads = max(1, max_threads)
        self._name = name
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # the tasks' queue, the counts, the threads' list, the watchdog's state
        self._wake: queue.SimpleQueue[bool] = queue.SimpleQueue()  # a token per sleeping thread woken
        self._awake = 0  # threads running tasks or about to
        self._asleep = 0  # threads waiting for a token
        self._taken = 0  # tasks the threads have taken: the watchdog's measure of progress
        self._watcher: threading.Thread | None = None
        self._watching = False  # the watchdog looks every WATCH_INTERVAL (else it waits to be armed)
        self._arm: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: look; False: shut down
        self._closed = False

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Queue ``fn(*args)``; RuntimeError once shut down."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"consume pool {self._name} is shut down")
            tasks = self._tasks
            tasks.append((fn, args))
            if self._awake and len(tasks) <= 1:
                # an awake thread takes it when its task ends, unless that task is stuck: the watchdog sees to it
                if not self._watching:
                    self._arm_watchdog()
                return
            self._add_thread()

    def _add_thread(self) -> None:
        """Wake a sleeping thread, else start one if the limit allows (under the lock)."""
        if self._asleep:
            self._asleep -= 1
            self._awake += 1
            self._wake.put(True)
        elif len(self._threads) < self._max_threads:
            self._awake += 1
            thread = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
            self._threads.append(thread)
            # started under the lock: a shutdown meanwhile would otherwise join a thread not yet started
            thread.start()

    def _arm_watchdog(self) -> None:
        """Have the watchdog look every WATCH_INTERVAL from now (under the lock)."""
        self._watching = True
        self._arm.put(True)
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name=f"{self._name}_watch", daemon=True)
            self._watcher.start()  # under the lock, as _add_thread's

    def _work(self) -> None:
        lock, tasks, wake = self._lock, self._tasks, self._wake.get
        while True:
            with lock:
                if self._closed:
                    return
                if tasks:
                    fn, args = tasks.popleft()
                    self._taken += 1
                else:
                    self._awake -= 1
                    self._asleep += 1
                    fn = None
            if fn is None:
                if not wake():  # False: shut down
                    return
                continue
            try:
                fn(*args)
            except BaseException:
                log.exception("consume task %r failed", fn)

    def _watch(self) -> None:
        lock, tasks, arm = self._lock, self._tasks, self._arm.get
        while arm():  # False: shut down
            taken = self._taken
            while True:
                try:
                    if not arm(timeout=WATCH_INTERVAL):
                        return
                except queue.Empty:
                    pass
                with lock:
                    if self._closed:
                        return
                    if self._taken == taken:  # no task taken for a whole interval
                        if not tasks:
                            self._watching = False  # idle: the next task that skips a wake arms it again
                            break
                        self._add_thread()
                    taken = self._taken

    def shutdown(self, timeout: float) -> None:
        """Drop the tasks not started, let the running ones end, join every thread within ``timeout``
        seconds in all (a listener still running then is left to finish on its own)."""
        with self._lock:
            self._closed = True
            self._tasks.clear()
            threads = list(self._threads)
            asleep, self._asleep = self._asleep, 0
            if self._watcher is not None:
                threads.append(self._watcher)
                self._arm.put(False)
        for _ in range(asleep):
            self._wake.put(False)
        deadline = time.monotonic() + timeout
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
