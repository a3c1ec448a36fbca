"""ProcessQueue bookkeeping: the commit offset under concurrent consumption, orderly take/rollback."""

from __future__ import annotations

from rmq.client.message import MessageExt
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
