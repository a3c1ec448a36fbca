"""The store's long-running parts, each a ``rmq._service.ServiceThread`` (start / shutdown /
wakeup / wait_for_running) named ``rmq-store-...``; docs/threads.md says what each may touch.

Each runs ``run_once`` on its own thread until shut down; ``shutdown`` wakes the thread and joins
it, and every wait is bounded, so no thread outlives its store.
"""

from __future__ import annotations

import os
import select
import time
from typing import TYPE_CHECKING, Protocol

from rmq._service import ServiceThread

if TYPE_CHECKING:
    from rmq.store._commit_log import CommitLog
    from rmq.store.config import MessageStoreConfig


class ServicedStore(Protocol):
    """What the store's threads call on the message store (a MessageStore; typed here because
    rmq.store.message_store imports this module)."""

    @property
    def config(self) -> MessageStoreConfig: ...
    @property
    def commit_log(self) -> CommitLog: ...
    def start_group_commit(self) -> None: ...
    def run_group_commit(self, interval: float) -> None: ...
    def stop_group_commit(self) -> None: ...
    def finish_group_commit(self) -> int: ...
    @property
    def commit_event_fd(self) -> int: ...
    def complete_commits(self) -> int: ...
    def checkpoint_physic(self, least_pages: int = 0) -> None: ...
    def flush_logics(self) -> None: ...
    def clean_expired_files(self) -> int: ...
    def check_disk_space(self) -> object: ...


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH: every put waiting for the disk joins the next flush round; one msync serves them.

    The rounds run inside the compiled core (``StoreCore.run_group_commit``) without the GIL: the
    put path wakes them through a C condition variable, and each round ends with a count on the
    core's eventfd for whoever completes the waiting puts (``CommitCompletionService``, or the
    broker's event loop). Puts that do not wait are flushed within ``interval``.
    """

    interval = 0.01

    def __init__(self, store: ServicedStore) -> None:
        super().__init__("rmq-store-group-commit")
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

    def __init__(self, store: ServicedStore) -> None:
        super().__init__("rmq-store-commit-completion")
        self.store = store
        # poll, not select: select() refuses a descriptor numbered 1024 or more, which a broker
        # with many connections (or a process holding many stores) hands out
        self._poll: select.poll | None = None

    def wakeup(self) -> None:
        os.eventfd_write(self.store.commit_event_fd, 1)

    def run_once(self) -> None:
        if self._poll is None:
            self._poll = select.poll()
            self._poll.register(self.store.commit_event_fd, select.POLLIN)
        self._poll.poll(self.interval * 1000)
        self.store.complete_commits()


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: flush every flushIntervalCommitLog ms when enough pages are dirty, and
    everything at least every flushCommitLogThoroughInterval ms."""

    def __init__(self, store: ServicedStore) -> None:
        super().__init__("rmq-store-flush")
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


class PrefaultService(ServiceThread):
    """Keeps the CommitLog's page tables populated ``chunks_ahead`` chunks (PREFAULT_CHUNK, 1 MiB)
    past the writer, woken whenever the writer enters a chunk or a new file: populating a chunk of
    a fallocated file zeroes it page by page (~1 ms per MiB here, up to ~10 ms on a busy host), a
    stall of every connection when the writer, the broker's event loop, does it itself. Past the
    middle of a file it also makes the next one, its first chunks populated, as RocketMQ's
    AllocateMappedFileService does (``CommitLog.prefault_ahead``)."""

    interval = 1.0
    chunks_ahead = 4

    def __init__(self, store: ServicedStore) -> None:
        super().__init__("rmq-store-prefault")
        self.store = store

    def start(self) -> None:
        super().start()
        self.store.commit_log.set_prefault_waker(self.wakeup)

    def shutdown(self, timeout: float = 30.0) -> None:
        self.store.commit_log.set_prefault_waker(None)  # the writer populates again, as without it
        super().shutdown(timeout)
        self.store.commit_log.drop_made_ahead()  # and makes its next file itself

    def run_once(self) -> None:
        self.wait_for_running(self.interval)
        if not self._stopped:
            self.store.commit_log.prefault_ahead(self.chunks_ahead)


class FlushConsumeQueueService(ServiceThread):
    """Flush ConsumeQueues and the index on their own timer, then the checkpoint."""

    def __init__(self, store: ServicedStore) -> None:
        super().__init__("rmq-store-flush-logics")
        self.store = store
        self.interval = store.config.flush_interval_consume_queue / 1000

    def run_once(self) -> None:
        self.wait_for_running(self.interval)
        self.store.flush_logics()

    def on_shutdown(self) -> None:
        self.store.flush_logics()


class CleanCommitLogService(ServiceThread):
    """Retention: delete expired files at deleteWhen o'clock or when the disk fills up; then mark
    the store full or not (``MessageStore.check_disk_space``; a broker also does every second)."""

    def __init__(self, store: ServicedStore) -> None:
        super().__init__("rmq-store-clean")
        self.store = store
        self.interval = store.config.clean_resource_interval / 1000

    def run_once(self) -> None:
        self.wait_for_running(self.interval)
        self.store.clean_expired_files()
        self.store.check_disk_space()
