"""Fixtures shared by every test: temporary store directories, real processes, a cluster of them,
a remoting client, and the thread leak check. What they are built from lives in ``tests.helpers``."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmq.net import RemotingClient
from rmq.perf.procs import Processes
from tests.helpers.processes import Cluster
from tests.helpers.threads import wait_for_threads_to_end
from tests.helpers.transaction import start_tx_cluster

# How long a test's threads get to end after its fixtures are torn down (shutdowns join their
# threads, so this is only slack for a loaded machine).
THREAD_END_TIMEOUT = 10.0


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Every thread a test starts (rmq's are named ``rmq-...``) has ended once its fixtures are torn
    down. Autouse, so it is set up before the test's other function-scoped fixtures and checks after
    their tear-down; threads of module- or session-scoped fixtures predate it and are not counted."""
    before = set(threading.enumerate())
    yield
    alive = wait_for_threads_to_end(before, THREAD_END_TIMEOUT)
    assert not alive, f"threads still running {THREAD_END_TIMEOUT:g} s after tear-down: {sorted(t.name for t in alive)}"


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen]]:
    """Start ``python ARGS`` processes; every one is terminated (then killed) at teardown."""
    processes = Processes()
    yield processes.spawn
    processes.stop_all()


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    """A started RemotingClient, shut down at teardown."""
    with RemotingClient() as c:
        yield c


@pytest.fixture
def tx_cluster(spawn, tmp_path: Path) -> Iterator[Cluster]:
    """A ``cluster`` whose broker checks open transactions every 0.5 s (tests.helpers.transaction)."""
    c = start_tx_cluster(spawn, tmp_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def cluster(spawn, tmp_path: Path) -> Iterator[Cluster]:
    """An ``rmq-namesrv`` and an ``rmq-broker`` process (small files, delay levels of 1-2 s)."""
    yield from _cluster(spawn, tmp_path)


@pytest.fixture
def filtering_cluster(spawn, tmp_path: Path) -> Iterator[Cluster]:
    """The ``cluster`` fixture's processes, the broker with enablePropertyFilter=true (SQL92)."""
    yield from _cluster(spawn, tmp_path, enablePropertyFilter="true")


def _cluster(spawn, tmp_path: Path, **settings: str) -> Iterator[Cluster]:
    store = tmp_path / "broker-store"
    store.mkdir()
    c = Cluster(spawn, store)
    c.settings.update(settings)
    try:
        yield c.start()
    finally:
        c.close()
