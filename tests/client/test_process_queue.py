"""ProcessQueue bookkeeping: the commit offset under concurrent consumption, orderly take/rollback,
and the local offset file of broadcasting consumers."""

from __future__ import annotations

import json

from rmq.client import MessageQueue
from rmq.client.message import MessageExt
from rmq.client.offset_store import LocalFileOffsetStore
from rmq.client.process_queue import ProcessQueue


def msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt("T", b"x" * 10, queue_offset=o) for o in offsets]


def test_commit_offset_is_the_lowest_message_still_in_flight():
    pq = ProcessQueue()
    batch = msgs(10, 11, 12, 13)
    pq.put(batch)
    assert (pq.count, pq.bytes, pq.span) == (4, 40, 3)
    assert pq.remove([batch[1], batch[3]]) == 10  # 10 still running: commit must not pass it
    assert pq.remove([batch[0]]) == 12
    assert pq.remove([batch[2]]) == 14  # all done: the next offset
    assert pq.remove([batch[2]]) == -1  # nothing cached: nothing to commit
    assert pq.bytes == 0


def test_orderly_take_commit_and_rollback():
    pq = ProcessQueue()
    assert pq.put(msgs(0, 1, 2)) is True  # first put asks for a consume request
    assert pq.put(msgs(3)) is False  # one is already pending
    assert [m.queue_offset for m in pq.take(2)] == [0, 1]
    pq.rollback()
    assert [m.queue_offset for m in pq.take(2)] == [0, 1]  # the same ones, in order
    assert pq.commit() == 2
    assert [m.queue_offset for m in pq.take(5)] == [2, 3]
    assert pq.commit() == 4
    assert pq.take(1) == [] and pq.consuming is False
    assert pq.put(msgs(4)) is True


def test_local_offsets_survive_a_restart(tmp_path):
    mq = MessageQueue("T", "broker-a", 3)
    store = LocalFileOffsetStore("g", tmp_path, "127.0.0.1@x")
    assert store.read_store(mq) == -1
    store.update(mq, 42)
    store.update(mq, 40, increase_only=True)
    store.persist([mq])
    path = tmp_path / "127.0.0.1@x" / "g" / "offsets.json"
    assert json.loads(path.read_text()) == {"offsetTable": {"T@broker-a@3": 42}}
    assert LocalFileOffsetStore("g", tmp_path, "127.0.0.1@x").read_store(mq) == 42
    path.write_text("{not json")
    assert LocalFileOffsetStore("g", tmp_path, "127.0.0.1@x").read_store(mq) == -1
