"""Fixtures of the remoting tests: both codec implementations, a live server."""

from __future__ import annotations

import os
import threading
import time
from typing import Iterator

import pytest
from remoting_helpers import LOOPBACK, answer_route

from rmq.net import _codec, codec_py
from rmq.net.server import RemotingServer
from rmq.protocol.codes import RequestCode


@pytest.fixture(params=[codec_py, _codec], ids=["pure", "compiled"])
def codec(request):
    """Each codec test runs against the pure-Python and the compiled implementation."""
    return request.param


@pytest.fixture
def server() -> Iterator[RemotingServer]:
    srv = RemotingServer(LOOPBACK, 0)
    srv.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, answer_route)
    srv.start()
    yield srv
    srv.shutdown()


@pytest.fixture(autouse=True)
def no_leaked_loops_or_descriptors() -> Iterator[None]:
    """Every test stops the loop threads and closes the sockets it opened (uvloop-style tear-down)."""
    threads = set(threading.enumerate())
    fds = _open_fds()
    yield
    deadline = time.monotonic() + 2.0
    while True:
        leaked = [t.name for t in threading.enumerate() if t not in threads and t.name.startswith("rmq-")]
        new_fds = _open_fds() - fds
        if (not leaked and not new_fds) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"event loop threads still running: {leaked}"
    assert not new_fds, f"file descriptors leaked: {sorted(new_fds)}"


def _open_fds() -> set[tuple[int, str]]:
    """(fd, what it refers to) for every descriptor open in this process."""
    result = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            result.add((int(name), os.readlink(f"/proc/self/fd/{name}")))
        except OSError:  # closed between listdir and readlink (the listdir fd itself, for one)
            pass
    return result
