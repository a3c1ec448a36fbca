"""The event loop every rmq process does its network I/O on: one thread, ``select.epoll``, timers.

Not asyncio: a handler is a plain function called on the loop thread, and the only ways in from
other threads are ``call_soon_threadsafe`` (which wakes the loop through an eventfd registered in
epoll) and ``stop``. Output written during one iteration is flushed once at its end, so a burst of
answers to one read costs one send. Its timers are ``rmq._service``'s timer model; the threads that
run loops, and what each may touch, are in docs/threads.md.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable

from rmq._service import PeriodicHandle, TimerHandle, TimerQueue, run_callbacks

__all__ = ["EventLoop", "PeriodicHandle", "TimerHandle"]

log = logging.getLogger(__name__)

# The longest epoll wait, so that a stop() that lost its wake-up is still noticed.
_MAX_POLL_SECONDS = 1.0


class EventLoop:
    """epoll + timers + a thread-safe call queue, run by ``run_forever`` or ``start`` (own thread)."""

    def __init__(self, name: str = "rmq-net"):
        self.name = name
        self._epoll = select.epoll()
        self._handlers: dict[int, Callable[[int], object]] = {}
        self._timers = TimerQueue()
        self._ready: deque = deque()
        self._dirty: list = []  # objects with a _flush() to call at the end of this iteration
        self._last: deque = deque()  # calls after those flushes (call_last)
        # descriptors ready in this iteration (readers share the pass: rmq.net.channel.SHARED_RECV_SIZE)
        self.events_ready = 0
        self._wakeup_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._wakeup_pending = False
        self._epoll.register(self._wakeup_fd, select.EPOLLIN)
        self._handlers[self._wakeup_fd] = self._on_wakeup
        self._thread: threading.Thread | None = None
        self._thread_id: int | None = None
        self._stopping = False
        self._close_when_stopped = False
        self._closed = False

    # -- registration of file descriptors (loop thread, or before the loop runs) ----------------

    def add_handler(self, fd: int, events: int, handler: Callable[[int], object]) -> None:
        """Call ``handler(events)`` whenever ``fd`` is ready for ``events`` (level-triggered)."""
        self._epoll.register(fd, events)
        self._handlers[fd] = handler

    def update_handler(self, fd: int, events: int) -> None:
        self._epoll.modify(fd, events)

    def remove_handler(self, fd: int) -> None:
        if self._handlers.pop(fd, None) is not None:
            try:
                self._epoll.unregister(fd)
            except (OSError, ValueError):
                pass  # already closed: the kernel dropped it from the epoll set

    # -- calls --------------------------------------------------------------------------------

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self._thread_id

    def call_soon(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` on the next iteration. Loop thread only."""
        self._ready.append((fn, args))

    def call_soon_threadsafe(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` on the loop thread soon; callable from any thread."""
        if self._closed:
            raise RuntimeError(f"event loop {self.name} is closed")
        self._ready.append((fn, args))
        # The loop clears the flag before it drains the queue, so a caller that still sees it set
        # appended before that drain. One eventfd write per wake-up, not one per call.
        if not self._wakeup_pending:
            self._wakeup_pending = True
            try:
                os.eventfd_write(self._wakeup_fd, 1)
            except OSError:
                pass  # closed: the loop is gone and nothing will run

    def run_and_wait(self, fn: Callable[[], None], timeout: float = 5.0) -> None:
        """Run ``fn()`` on the loop thread and wait for it; directly if the loop is not running."""
        if self.in_loop_thread() or (self._thread is None and self._thread_id is None):
            fn()
            return
        done = threading.Event()

        def run() -> None:
            try:
                fn()
            finally:
                done.set()

        self.call_soon_threadsafe(run)
        done.wait(timeout)

    def call_later(self, delay: float, fn: Callable, *args) -> TimerHandle:
        """Run ``fn(*args)`` on the loop thread after ``delay`` seconds (callable from any thread)."""
        return self.call_at(time.monotonic() + delay, fn, *args)

    def call_at(self, when: float, fn: Callable, *args) -> TimerHandle:
        """Run ``fn(*args)`` on the loop thread at ``when`` (``time.monotonic`` clock; any thread)."""
        handle = TimerHandle(when, fn, args, self)
        self._call_in_loop(self._timers.push, handle)
        return handle

    def _call_in_loop(self, fn: Callable, *args) -> None:
        """``fn(*args)`` now if this is the loop thread or the loop is not running, else soon on it."""
        if self._thread_id is None or self._thread_id == threading.get_ident():
            fn(*args)
        else:
            self.call_soon_threadsafe(fn, *args)

    def schedule_periodic(self, interval: float, fn: Callable, initial_delay: float | None = None) -> PeriodicHandle:
        """Run ``fn()`` every ``interval`` seconds, first after ``initial_delay`` (default: interval)."""
        return PeriodicHandle(self, interval, fn, interval if initial_delay is None else initial_delay)

    def mark_dirty(self, obj) -> None:  # loop thread only
        """Have ``obj._flush()`` called once at the end of this iteration (batched writes)."""
        self._dirty.append(obj)

    def call_last(self, fn: Callable[[], object]) -> None:  # loop thread only
        """Call ``fn()`` at the end of this iteration, after every ``_flush()``; what it leaves to
        flush is flushed in the same iteration."""
        self._last.append((fn, ()))

    def nothing_ready(self) -> bool:  # loop thread only
        """No descriptor ready, no call queued, no timer due: a call made now delays nobody
        (until a descriptor turns ready meanwhile)."""
        if self._ready or self._dirty:
            return False
        due = self._timers.next_due()
        if due is not None and due <= time.monotonic():
            return False
        return not self._epoll.poll(0)

    def _timer_cancelled(self) -> None:  # a TimerHandle's cancel(), from any thread
        if not self._closed:
            self._call_in_loop(self._timers.cancelled_one)

    def _on_wakeup(self, events: int) -> None:
        try:
            os.eventfd_read(self._wakeup_fd)
        except BlockingIOError:
            pass
        self._wakeup_pending = False

    # -- running ------------------------------------------------------------------------------

    def run_forever(self) -> None:
        """Run the loop in the calling thread until ``stop()``."""
        if self._closed:
            raise RuntimeError("event loop is closed")
        self._thread_id = threading.get_ident()
        self._stopping = False
        try:
            while not self._stopping:
                self._run_once()
        finally:
            self._thread_id = None
            if self._close_when_stopped:
                self.close()

    def start(self) -> threading.Thread:
        """Run the loop in a daemon thread of its own (joined by ``stop``)."""
        started = threading.Event()

        def run() -> None:
            self.call_soon(started.set)
            self.run_forever()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        started.wait()
        return self._thread

    def stop(self, join: bool = True) -> None:
        """Ask the loop to stop after the current iteration; join its thread if ``start`` made one."""
        self.call_soon_threadsafe(self._set_stopping)
        thread = self._thread
        if join and thread is not None and thread is not threading.current_thread():
            thread.join()
            self._thread = None

    def shutdown(self) -> None:
        """Stop (joining the thread of ``start`` unless called on it) and release the descriptors:
        at once if the loop is not running, else as ``run_forever`` returns."""
        if self._thread_id is None and self._thread is None:
            self.close()
            return
        self._close_when_stopped = True
        self.stop()

    def _set_stopping(self) -> None:
        self._stopping = True

    def close(self) -> None:
        """Release the epoll and eventfd descriptors (the loop must have stopped)."""
        if not self._closed:
            self._closed = True
            self._epoll.close()
            os.close(self._wakeup_fd)

    def _run_once(self) -> None:
        timers = self._timers
        if self._ready or self._dirty or self._last:
            timeout = 0.0
        else:
            due = timers.next_due()
            timeout = _MAX_POLL_SECONDS if due is None else min(max(due - time.monotonic(), 0.0), _MAX_POLL_SECONDS)
        try:
            events = self._epoll.poll(timeout)
        except InterruptedError:
            events = []
        self.events_ready = len(events)
        handlers = self._handlers
        for fd, mask in events:
            handler = handlers.get(fd)
            if handler is not None:
                try:
                    handler(mask)
                except Exception:
                    log.exception("event handler for fd %d failed", fd)
        if timers:
            timers.pop_due(time.monotonic(), self._ready)
        if self._ready:
            run_callbacks(self._ready, self.name)
        if self._dirty:
            self._flush_dirty()
        if self._last:
            run_callbacks(self._last, self.name)
            if self._dirty:
                self._flush_dirty()

    def _flush_dirty(self) -> None:
        dirty, self._dirty = self._dirty, []
        for obj in dirty:
            try:
                obj._flush()
            except Exception:
                log.exception("flush of %r failed", obj)
