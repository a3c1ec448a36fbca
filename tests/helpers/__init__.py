"""What many tests need and no test module owns. Tests and conftests import from here, never from
other test modules or conftests (tests/test_tree.py checks it).

    tests.helpers            loopback ports and bounded waits (this module)
    tests.helpers.golden     golden bytes built from SPEC.md with nothing from rmq
    tests.helpers.requests   requests a RocketMQ client sends, built by hand; stored records of a pull
    tests.helpers.frames     raw remoting frames and a blocking socket that reads them
    tests.helpers.store      small store files, for tests that open a MessageStore
    tests.helpers.broker     an in-process broker: start it, put into its store, read its queues
    tests.helpers.processes  real rmq-namesrv / rmq-broker processes, and a Cluster of both
    tests.helpers.acl        a broker process with aclEnable, its plain_acl.yml rewritten under it
    tests.helpers.failover   two broker processes swapping roles by SIGKILL, promotion and rejoin
    tests.helpers.threads    what the leak checks look at: rmq threads, open descriptors
    tests.helpers.compat     third-party RocketMQ clients: installs, families, a runner of their scripts
    tests.helpers.twins      which twin of a codec (compiled or pure Python) a module picks
    tests.helpers.perf_logs  perf logs made for tests: hand-made cells, the synthetic spark/samples
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

LOOPBACK = "127.0.0.1"

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], T], timeout: float, what: str | Callable[[], str], interval: float = 0.01) -> T:
    """Poll ``predicate`` until it returns something true, and return that; fail naming ``what``
    (what should have happened; a callable is asked only then) once ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what() if callable(what) else what}: not within {timeout:g} s")
        time.sleep(interval)


def wait_for_port(port: int, timeout: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    """Until something accepts on 127.0.0.1:port; fails when ``proc`` exits first."""

    def accepting() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_until(accepting, timeout, f"something listening on {LOOPBACK}:{port}", interval=0.02)
