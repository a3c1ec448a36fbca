"""Fixtures of the remoting tests: both codec implementations, a live server."""

from __future__ import annotations

from typing import Iterator

import pytest
from remoting_helpers import LOOPBACK, answer_route

from rmq.net import _codec, codec_py
from rmq.net.codes import RequestCode
from rmq.net.server import RemotingServer


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
