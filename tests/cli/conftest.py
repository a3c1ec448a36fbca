from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.broker.controller import BrokerController
from tests.helpers.broker import InProcessBrokers


@pytest.fixture
def embedded(store_dir: Path) -> Iterator[tuple[BrokerController, str]]:
    """(broker, name server address): an in-process broker and the name server it embeds."""
    brokers = InProcessBrokers(store_dir)
    try:
        broker = brokers.start()
        yield broker, brokers.started[0].namesrv.address
    finally:
        brokers.shutdown_all()
