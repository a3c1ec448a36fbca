"""What the tests' leak checks look at (uvloop-style tear-down): threads, open descriptors.

Every thread rmq starts is named ``rmq-...`` and joined when its owner shuts down (docs/threads.md
lists them); the check counts every thread a test started, so an unnamed one is caught too.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.helpers import wait_until


def threads_started_since(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads alive now that were not in ``before``."""
    return [t for t in threading.enumerate() if t not in before]


def wait_for_threads_to_end(before: set[threading.Thread], timeout: float) -> list[threading.Thread]:
    """Wait up to ``timeout`` s for every thread started since ``before`` to end; those still alive."""
    deadline = time.monotonic() + timeout
    while True:
        alive = threads_started_since(before)
        if not alive or time.monotonic() >= deadline:
            return alive
        alive[0].join(min(0.05, max(0.0, deadline - time.monotonic())))


def open_fds() -> set[tuple[int, str]]:
    """(fd, what it refers to) for every descriptor open in this process."""
    result = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            result.add((int(name), os.readlink(f"/proc/self/fd/{name}")))
        except OSError:  # closed between listdir and readlink (the listdir fd itself, for one)
            pass
    return result


@contextmanager
def descriptors_closed(timeout: float = 5.0) -> Iterator[None]:
    """Fails (AssertionError, naming them) when a descriptor opened within the block is still open
    ``timeout`` s after it: the tear-down check of the tests of the net and the store."""
    before = open_fds()
    yield
    try:
        wait_until(lambda: not open_fds() - before, timeout, "the test's descriptors closed")
    except AssertionError:
        raise AssertionError(f"file descriptors leaked: {sorted(open_fds() - before)[:20]}") from None
