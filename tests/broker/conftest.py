"""Fixtures of the broker tests: the assembled broker pieces on a real server, a remoting client."""

from __future__ import annotations

from typing import Iterator

import pytest

from rmq.net.client import RemotingClient
from tests.broker.mini_broker import MiniBroker


@pytest.fixture
def broker(store_dir) -> Iterator[MiniBroker]:
    b = MiniBroker(store_dir).start()
    yield b
    b.shutdown()


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    with RemotingClient() as c:
        yield c
