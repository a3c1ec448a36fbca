"""Small store files for tests that open a MessageStore: a few hundred messages span several
CommitLog and ConsumeQueue files, so roll-over, retention and recovery happen quickly."""

from __future__ import annotations

from pathlib import Path

from rmq.protocol.record import decode_record
from rmq.store import GetMessageStatus, MessageStore, MessageStoreConfig

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


def body_heads(store: MessageStore, queue_id: int = 0, topic: str = "TopicA") -> list[bytes]:
    """The first 5 bytes of the body of every message in one queue, in queue order (test bodies
    start with a 5-byte name such as ``m0042``)."""
    heads: list[bytes] = []
    offset = 0
    while True:
        got = store.get_message("g", topic, queue_id, offset, 32)
        if got.status is not GetMessageStatus.FOUND:
            return heads
        heads += [decode_record(m).body[:5] for m in got.messages]
        offset = got.next_begin_offset
