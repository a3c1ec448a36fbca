"""Fixtures of the store tests: stores on small files, so roll-over, retention and recovery happen
quickly; the descriptor check."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmq.store import MessageStore
from tests.helpers.store import small_store_config
from tests.helpers.threads import descriptors_closed


@pytest.fixture(autouse=True)
def no_leaked_descriptors() -> Iterator[None]:
    """Every test's stores give back the descriptors they opened when they shut down (the
    thread check is tests/conftest.py's)."""
    with descriptors_closed():
        yield


@pytest.fixture
def open_store(store_dir: Path) -> Iterator[Callable[..., MessageStore]]:
    """``open_store(path=store_dir, **settings)`` starts a MessageStore (small files unless the settings
    say otherwise); every store still open is shut down at teardown."""
    opened: list[MessageStore] = []

    def _open(path: Path | None = None, **settings) -> MessageStore:
        store = MessageStore(small_store_config(path or store_dir, **settings))
        store.start()
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.shutdown()
