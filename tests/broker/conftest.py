"""Fixtures of the broker tests: an in-process broker on free loopback ports, a remoting client."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from rmq.broker.config import load_broker_config
from rmq.broker.controller import BrokerController
from rmq.net import RemotingClient
from rmq.store import MessageStoreConfig
from tests.conftest import free_port

# Small files: tests write little, and sparse 1 GiB files are still work for the file system.
SMALL_FILES = {"mappedFileSizeCommitLog": str(4 * 1024 * 1024), "mappedFileSizeConsumeQueue": str(20 * 3000),
               "maxHashSlotNum": "1024", "maxIndexNum": "4096"}


def broker_settings(store_dir: Path, **overrides: str) -> dict[str, str]:
    """``--set`` style settings of a test broker: loopback only, free ports, small files."""
    settings = {"brokerIP1": "127.0.0.1", "listenPort": str(free_port()), "namesrvListenPort": str(free_port()),
                "storePathRootDir": str(store_dir), **SMALL_FILES}
    settings.update({k: str(v) for k, v in overrides.items()})
    return settings


def new_controller(store_dir: Path, **overrides: str) -> BrokerController:
    broker_config, rest = load_broker_config(None, broker_settings(store_dir, **overrides))
    return BrokerController(broker_config, MessageStoreConfig.from_properties(broker_config.store_properties(rest)))


@pytest.fixture
def start_broker(store_dir: Path) -> Iterator[Callable[..., BrokerController]]:
    """``start_broker(**settings)`` starts an in-process broker (embedded name server); every one
    is shut down at teardown."""
    started: list[BrokerController] = []

    def _start(**overrides: str) -> BrokerController:
        controller = new_controller(store_dir, **overrides).start()
        started.append(controller)
        return controller

    yield _start
    for controller in started:
        controller.shutdown()


@pytest.fixture
def broker(start_broker) -> BrokerController:
    return start_broker()


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    with RemotingClient() as c:
        yield c
