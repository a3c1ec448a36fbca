"""Fixtures of the broker tests: in-process brokers (embedded name server) on free loopback ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmq.broker.controller import BrokerController
from tests.helpers.broker import InProcessBrokers


@pytest.fixture
def start_broker(store_dir: Path) -> Iterator[Callable[..., BrokerController]]:
    """``start_broker(**settings)`` starts an in-process broker (embedded name server); every one
    is shut down at teardown."""
    brokers = InProcessBrokers(store_dir)
    yield brokers.start
    brokers.shutdown_all()


@pytest.fixture
def broker(start_broker) -> BrokerController:
    return start_broker()
