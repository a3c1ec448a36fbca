"""Fixtures of the broker tests: an in-process broker on free loopback ports, a remoting client."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from rmq.broker.config import load_broker_config
from rmq.broker.controller import BrokerController
from rmq.cli.broker import BrokerStartup
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


def new_startup(store_dir: Path, **overrides: str) -> BrokerStartup:
    """An in-process broker and its embedded name server, as ``rmq-broker`` puts them together."""
    broker_config, rest = load_broker_config(None, broker_settings(store_dir, **overrides))
    return BrokerStartup(broker_config, MessageStoreConfig.from_properties(broker_config.store_properties(rest)))


@pytest.fixture
def start_broker(store_dir: Path) -> Iterator[Callable[..., BrokerController]]:
    """``start_broker(**settings)`` starts an in-process broker (embedded name server); every one
    is shut down at teardown."""
    started: list[BrokerStartup] = []

    def _start(**overrides: str) -> BrokerController:
        startup = new_startup(store_dir, **overrides).start()
        started.append(startup)
        assert startup.controller is not None
        return startup.controller

    yield _start
    for startup in started:
        startup.shutdown()


@pytest.fixture
def broker(start_broker) -> BrokerController:
    return start_broker()


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    with RemotingClient() as c:
        yield c
