"""Small store files for tests that open a MessageStore: a few hundred messages span several
CommitLog and ConsumeQueue files, so roll-over, retention and recovery happen quickly."""

from __future__ import annotations

from pathlib import Path

from rmq.store import MessageStoreConfig

SMALL_FILES = dict(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=50 * 20,
    max_hash_slot_num=512,
    max_index_num=2048,
)
COMMIT_LOG_FILE_SIZE = SMALL_FILES["mapped_file_size_commit_log"]


def small_store_config(path: Path, **settings) -> MessageStoreConfig:
    """A MessageStoreConfig rooted at ``path`` with SMALL_FILES unless ``settings`` say otherwise."""
    return MessageStoreConfig(store_path_root_dir=str(path), **{**SMALL_FILES, **settings})
