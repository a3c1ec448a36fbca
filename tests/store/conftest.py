"""Fixtures for the store tests: small files so roll-over, retention and recovery happen quickly."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from rmq.store import MessageStore, MessageStoreConfig

# small enough that a few hundred messages span several files
SMALL = dict(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=50 * 20,
             max_hash_slot_num=512, max_index_num=2048)


@pytest.fixture
def open_store(store_dir: Path) -> Iterator[Callable[..., MessageStore]]:
    """``open_store(**settings)`` starts a MessageStore on ``store_dir`` (small files by default);
    every store still open is shut down at teardown."""
    opened: list[MessageStore] = []

    def _open(path: Path | None = None, **settings) -> MessageStore:
        merged = {**SMALL, **settings}
        store = MessageStore(MessageStoreConfig(store_path_root_dir=str(path or store_dir), **merged))
        store.start()
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.shutdown()
