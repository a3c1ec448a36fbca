"""Fixtures of the gRPC endpoint's tests: in-process brokers with their endpoint (enableGrpc=true)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmq.cli.broker import BrokerStartup
from rmq.protocol.grpc.v2.service_pb2_grpc import MessagingServiceStub
from tests.helpers.broker import new_startup
from tests.helpers.grpc import messaging_stub


@pytest.fixture
def start_grpc_broker(store_dir: Path) -> Iterator[Callable[..., BrokerStartup]]:
    """``start_grpc_broker(**settings)``: a broker and its gRPC endpoint, stopped at teardown."""
    started: list[BrokerStartup] = []

    def start(**settings: str) -> BrokerStartup:
        startup = new_startup(store_dir / str(len(started)), enableGrpc="true", **settings).start()
        started.append(startup)
        return startup

    yield start
    for startup in reversed(started):
        startup.shutdown()


@pytest.fixture
def grpc_broker(start_grpc_broker) -> BrokerStartup:
    return start_grpc_broker()


@pytest.fixture
def stub(grpc_broker: BrokerStartup) -> Iterator[MessagingServiceStub]:
    assert grpc_broker.proxy is not None
    with messaging_stub(grpc_broker.proxy.port) as stub:
        yield stub
