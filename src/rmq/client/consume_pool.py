"""The push consumer's listener threads: ``ThreadPoolExecutor``'s shape without a Future per task.

A push consumer hands every chunk of ``consume_message_batch_max_size`` messages to the pool
(RocketMQ's ConsumeMessageConcurrentlyService submits one ConsumeRequest per chunk), so with the
default chunk of one the pool's cost is paid per message: ``ThreadPoolExecutor.submit`` made a
Future (its Condition), a work item and took a Python-level Semaphore each time, and the worker
notified the Future nobody waited on (measured: most of a PushConsumer's CPU per message). Here a
task is a tuple in a ``queue.SimpleQueue`` (C), and an exception is logged where the executor would
have stored it in the Future.

Threads (``<name>_<n>``, docs/threads.md) start on demand up to ``max_threads``: one for the first
task, another whenever tasks wait behind the busy ones.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("rmq.client")

__all__ = ["ConsumePool"]


class ConsumePool:
    """Run ``fn(*args)`` on up to ``max_threads`` threads, in the order submitted."""

    def __init__(self, max_threads: int, name: str):
        self._tasks: queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._max_threads = max(1, max_threads)
        self._name = name
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Queue ``fn(*args)``; RuntimeError once shut down."""
        if self._closed:
            raise RuntimeError(f"consume pool {self._name} is shut down")
        tasks = self._tasks
        tasks.put((fn, args))
        threads = self._threads
        if len(threads) < self._max_threads and (not threads or tasks.qsize() > 1):
            self._start_thread()

    def _start_thread(self) -> None:
        with self._lock:
            if self._closed or len(self._threads) >= self._max_threads:
                return
            thread = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
            self._threads.append(thread)
            # started under the lock: a shutdown meanwhile would otherwise join a thread not yet started
            thread.start()

    def _work(self) -> None:
        get = self._tasks.get
        while True:
            task = get()
            if task is None or self._closed:
                return
            fn, args = task
            try:
                fn(*args)
            except BaseException:
                log.exception("consume task %r failed", fn)

    def shutdown(self, timeout: float) -> None:
        """Drop the tasks not started, let the running ones end, join every thread within ``timeout``
        seconds in all (a listener still running then is left to finish on its own)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        tasks = self._tasks
        while True:
            try:
                tasks.get_nowait()
            except queue.Empty:
                break
        for _ in threads:
            tasks.put(None)
        deadline = time.monotonic() + timeout
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
