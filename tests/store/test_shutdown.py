"""Shutdown gives back every descriptor and mapping the store opened, at once (not when the garbage
collector gets round to it); a store used after it raises StoreError instead of reading unmapped
memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmq.errors import StoreError
from rmq.store import GetMessageStatus, MessageStore, PutMessageStatus
from tests.helpers.store import small_store_config
from tests.helpers.threads import open_fds


def filled_store(store_dir: Path, **settings) -> MessageStore:
    """A started store holding several CommitLog files, twelve ConsumeQueues and an index."""
    store = MessageStore(small_store_config(store_dir, **settings)).start()
    for i in range(300):
        assert store.put(f"Topic{i % 3}", bytes([i % 251]) * 500, i % 4, keys=f"k{i}").ok
    assert len(store.commit_log.mapped_files) >= 3 and len(store.consume_queues()) == 12
    assert store.index_service.files
    return store


@pytest.mark.parametrize("flush_disk_type", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_shutdown_closes_every_descriptor_the_store_opened(store_dir, flush_disk_type):
    before = open_fds()
    store = filled_store(store_dir, flush_disk_type=flush_disk_type)
    store.shutdown()
    # the store is still referenced: nothing here was left to the garbage collector
    assert open_fds() - before == set()
    store.shutdown()  # a second shutdown does nothing


def test_a_record_read_before_shutdown_stays_readable_until_its_reader_lets_go(store_dir):
    before = open_fds()
    store = filled_store(store_dir)
    got = store.get_message("g", "Topic0", 0, 0, 1)
    assert got.status is GetMessageStatus.FOUND
    record, copy = got.messages[0], bytes(got.messages[0])
    store.shutdown()
    # a pull answer being written when the broker stops: its file stays mapped meanwhile
    assert bytes(record) == copy
    assert {target for _, target in open_fds() - before} == {str(store_dir / "commitlog" / "00000000000000000000")}
    del got, record
    assert open_fds() - before == set()


def test_a_store_used_after_shutdown_says_so(store_dir):
    store = filled_store(store_dir)
    first_file = store.commit_log.mapped_files[0]
    store.shutdown()
    assert store.put("Topic0", b"late").status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    for use in (
        lambda: store.get_message("g", "Topic0", 0, 0, 1),
        lambda: store.look_message_by_offset(0),
        lambda: store.append_replica(store.get_max_phy_offset(), b"x"),
        lambda: store.checkpoint.physic_msg_timestamp,
        lambda: first_file.read(0, 4),
    ):
        with pytest.raises(StoreError, match="shut down"):
            use()
    with pytest.raises(StoreError, match="new MessageStore"):
        store.start()
    # opened again as a new store, it holds every message
    with MessageStore(small_store_config(store_dir)) as again:
        assert sum(q.max_offset_in_queue for q in again.consume_queues()) == 300
