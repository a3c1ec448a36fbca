"""The store's long-running parts, all of one shape: start / shutdown / wakeup / wait_for_running.

Each runs ``run_once`` on its own thread until shut down; ``shutdown`` wakes the thread and joins
it, and every wait is bounded, so no thread outlives its store.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmq.store.message_store import MessageStore

log = logging.getLogger("rmq.store")


class ServiceThread:
    """A named loop on its own thread."""

    #: seconds between rounds when nobody wakes the service
    interval: float = 1.0

    def __init__(self, name: str) -> None:
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
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
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


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH: every put waiting for the disk joins the next flush round; one msync serves them.

    The rounds run inside the compiled core (``StoreCore.run_group_commit``) without the GIL: the
    put path wakes them through a C condition variable, and each round ends with a count on the
    core's eventfd for whoever completes the waiting puts (``CommitCompletionService``, or the
    broker's event loop). Puts that do not wait are flushed within ``interval``.
    """

    interval = 0.01

    def __init__(self, store: "MessageStore") -> None:
        super().__init__("GroupCommitService")
        self.store = store

    def start(self) -> None:
        self.store.start_group_commit()
        super().start()

    def wakeup(self) -> None:
        if self._stopped:  # only stopping wakes it: puts wake the rounds themselves
            self.store.stop_group_commit()

    def run_once(self) -> None:
        self.store.run_group_commit(self.interval)

    def on_shutdown(self) -> None:
        # flush what is left and complete every waiting put: none waits for a round that never comes
        self.store.finish_group_commit()
        self.store.checkpoint_physic()


class CommitCompletionService(ServiceThread):
    """Completes SYNC_FLUSH puts after each flush round, calling their callbacks on this thread
    (the broker does it on its event loop instead: ``MessageStore.hand_over_commit_completion``).
    Wakes at least every ``interval`` so deadlines pass even while a msync hangs."""

    interval = 0.1

    def __init__(self, store: "MessageStore") -> None:
        super().__init__("CommitCompletionService")
        self.store = store

    def wakeup(self) -> None:
        os.eventfd_write(self.store.commit_event_fd, 1)

    def run_once(self) -> None:
        select.select([self.store.commit_event_fd], [], [], self.interval)
        self.store.complete_commits()


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: flush every flushIntervalCommitLog ms when enough pages are dirty, and
    everything at least every flushCommitLogThoroughInterval ms."""

    def __init__(self, store: "MessageStore") -> None:
        super().__init__("FlushRealTimeService")
        self.store = store
        self.interval = store.config.flush_interval_commit_log / 1000
        self._last_thorough = time.monotonic()

    def run_once(self) -> None:
        self.wait_for_running(self.interval)
        least_pages = self.store.config.flush_commit_log_least_pages
        now = time.monotonic()
        if now - self._last_thorough >= self.store.config.flush_commit_log_thorough_interval / 1000:
            self._last_thorough = now
            least_pages = 0
        self.store.checkpoint_physic(least_pages)

    def on_shutdown(self) -> None:
        self.store.checkpoint_physic(0)


class FlushConsumeQueueService(ServiceThread):
    """Flush ConsumeQueues and the index on their own timer, then the checkpoint."""

    def __init__(self, store: "MessageStore") -> None:
        super().__init__("FlushConsumeQueueService")
        self.store = store
        self.interval = store.config.flush_interval_consume_queue / 1000

    def run_once(self) -> None:
        self.wait_for_running(self.interval)
        self.store.flush_logics()

    def on_shutdown(self) -> None:
        self.store.flush_logics()


class CleanCommitLogService(ServiceThread):
    """Retention: delete expired files at deleteWhen o'clock or when the disk fills up."""

    def __init__(self, store: "MessageStore") -> None:
        super().__init__("CleanCommitLogService")
        self.store = store
        self.interval = store.config.clean_resource_interval / 1000

    def run_once(self) -> None:
        self.wait_for_running(self.interval)
        self.store.clean_expired_files()
