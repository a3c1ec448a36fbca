"""Fixtures of the controller tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.controllers import Broker


@pytest.fixture
def brokers() -> Iterator[list[Broker]]:
    """Three brokers written by hand (rmq.protocol.controller's requests over a client of their own),
    closed at teardown."""
    made = [Broker() for _ in range(3)]
    try:
        yield made
    finally:
        for broker in made:
            broker.close()
