"""Fixtures of the store tests: stores on small files, so roll-over, retention and recovery happen
quickly."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmq.store import MessageStore
from tests.helpers.store import small_store_config


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
