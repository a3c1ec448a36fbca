"""Queue locks: one holder per queue and group, 60 s expiry, renewal, unlock by the holder only."""

from rmq.broker.rebalance_lock import RebalanceLockManager
from rmq.protocol.message_queue import MessageQueue

Q0, Q1, Q2 = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_a_queue_has_one_holder_per_group():
    m = RebalanceLockManager()
    assert m.try_lock_batch("G", {Q0, Q1}, "c1", now=0) == {Q0, Q1}
    assert m.try_lock_batch("G", {Q1, Q2}, "c2", now=1000) == {Q2}
    assert m.try_lock_batch("OtherGroup", {Q1}, "c2", now=1000) == {Q1}
    assert m.is_locked("G", Q1, "c1", now=1000) and not m.is_locked("G", Q1, "c2", now=1000)


def test_locks_lapse_after_60_s_unless_renewed():
    m = RebalanceLockManager()
    m.try_lock_batch("G", {Q0, Q1}, "c1", now=0)
    assert m.try_lock_batch("G", {Q0}, "c1", now=50_000) == {Q0}  # renewal
    assert m.try_lock_batch("G", {Q0, Q1}, "c2", now=60_000) == set()  # exactly 60 s: still held
    assert m.try_lock_batch("G", {Q0, Q1}, "c2", now=60_001) == {Q1}
    assert not m.is_locked("G", Q1, "c1", now=60_001)
    assert m.try_lock_batch("G", {Q0}, "c2", now=110_001) == {Q0}


def test_expiry_is_configurable():
    m = RebalanceLockManager(lock_max_live_ms=10)
    m.try_lock_batch("G", {Q0}, "c1", now=0)
    assert m.try_lock_batch("G", {Q0}, "c2", now=11) == {Q0}


def test_only_the_holder_unlocks():
    m = RebalanceLockManager()
    m.try_lock_batch("G", {Q0, Q1}, "c1", now=0)
    m.unlock_batch("G", {Q0, Q1}, "c2")
    assert m.try_lock_batch("G", {Q0}, "c2", now=1) == set()
    m.unlock_batch("G", {Q0}, "c1")
    assert m.try_lock_batch("G", {Q0}, "c2", now=2) == {Q0}
