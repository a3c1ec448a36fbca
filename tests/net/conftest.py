"""Fixtures of the remoting tests: both codec implementations, a live server, the descriptor check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rmq.net import _codec, codec_py
from rmq.net.server import RemotingServer
from rmq.protocol.codes import RequestCode
from tests.helpers import LOOPBACK
from tests.helpers.frames import answer_route
from tests.helpers.threads import descriptors_closed


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
def no_leaked_descriptors() -> Iterator[None]:
    """Every test closes the sockets it opened (the thread check is tests/conftest.py's)."""
    with descriptors_closed():
        yield
