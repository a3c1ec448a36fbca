"""The push consumer's listener threads: ``ThreadPoolExecutor``'s shape without a Future per task.

A push consumer hands every chunk of ``consume_message_batch_max_size`` messages to the pool
(RocketMQ's ConsumeMessageConcurrentlyService submits one ConsumeRequest per chunk), so with the
default chunk of one the pool's cost is paid per message: ``ThreadPoolExecutor.submit`` made a
Future (its Condition), a work item and took a Python-level Semaphore each time, and the worker
notified the Future nobody waited on (measured: most of a PushConsumer's CPU per message). Here a
task is a tuple in a ``queue.SimpleQueue`` (C), and an exception is logged where the executor would
have stored it in the Future.

Waking a thread is the expensive part of a hand-off (the futex, then the GIL passed between the
loop thread and the woken one), so a task does not wake one while an awake thread will take it
next: a thread is woken (or started, up to ``max_threads``, ``<name>_<n>``, docs/threads.md) when
none is awake or when more than one task waits behind the busy ones; an awake thread runs tasks
until none is left, then sleeps. A fast listener thus runs on one or two threads, a slow one on
all of them.
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

__all__ = ["ConsumePool"]

Task = tuple[Callable[..., object], tuple[Any, ...]]


class ConsumePool:
    """Run ``fn(*args)`` on up to ``max_threads`` threads, in the order submitted."""

    def __init__(self, max_threads: int, name: str):
        self._tasks: collections.deque[Task] = collections.deque()
        self._max_threads = max(1, max_threads)
        self._name = name
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # the tasks' queue, the counts, the threads' list
        self._wake: queue.SimpleQueue[bool] = queue.SimpleQueue()  # a token per sleeping thread woken
        self._awake = 0  # threads running tasks or about to
        self._asleep = 0  # threads waiting for a token
        self._closed = False

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Queue ``fn(*args)``; RuntimeError once shut down."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"consume pool {self._name} is shut down")
            tasks = self._tasks
            tasks.append((fn, args))
            if self._awake and len(tasks) <= 1:
                return  # an awake thread takes it when its task ends
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

    def _work(self) -> None:
        lock, tasks, wake = self._lock, self._tasks, self._wake.get
        while True:
            with lock:
                if self._closed:
                    return
                if tasks:
                    fn, args = tasks.popleft()
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

    def shutdown(self, timeout: float) -> None:
        """Drop the tasks not started, let the running ones end, join every thread within ``timeout``
        seconds in all (a listener still running then is left to finish on its own)."""
        with self._lock:
            self._closed = True
            self._tasks.clear()
            threads = list(self._threads)
            asleep, self._asleep = self._asleep, 0
        for _ in range(asleep):
            self._wake.put(False)
        deadline = time.monotonic() + timeout
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
