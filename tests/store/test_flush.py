"""SYNC_FLUSH completions from the group commit, ASYNC_FLUSH on its timer, the checkpoint."""

from __future__ import annotations

import threading
import time

from rmq.store import PutMessageStatus


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def test_sync_flush_completes_from_the_flush_thread_once_durable(open_store):
    store = open_store(flush_disk_type="SYNC_FLUSH")
    completed = []
    lock = threading.Lock()

    def on_durable(result):
        with lock:
            completed.append((result, threading.get_ident(), store.commit_log.get_flushed_where()))

    results = [store.put_message("TopicA", i % 2, b"x" * 300, b"", callback=on_durable) for i in range(300)]
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert wait_until(lambda: len(completed) == 300)
    for result, thread_id, flushed in completed:
        assert thread_id != threading.get_ident()
        assert result.status is PutMessageStatus.PUT_OK and not result.pending
        assert flushed >= result.next_offset == result.wrote_offset + result.wrote_bytes


def test_sync_flush_past_the_deadline_is_flush_disk_timeout(open_store):
    store = open_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=0)
    done = threading.Event()
    r = store.put_message("TopicA", 0, b"x", b"", callback=lambda _: done.set())
    assert done.wait(5)
    assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and r.ok
    # stored all the same
    assert store.get_message("g", "TopicA", 0, 0, 1).message_count == 1


def test_blocking_put_waits_for_the_group_commit(open_store):
    store = open_store(flush_disk_type="SYNC_FLUSH")
    r = store.put("TopicA", b"x" * 100)
    assert r.status is PutMessageStatus.PUT_OK and not r.pending
    assert store.commit_log.get_flushed_where() >= r.next_offset


def test_shutdown_completes_pending_sync_puts(open_store):
    store = open_store(flush_disk_type="SYNC_FLUSH")
    completed = []
    for _ in range(50):
        store.put_message("TopicA", 0, b"x", b"", callback=completed.append)
    store.shutdown()
    assert len(completed) == 50 and all(r.status is PutMessageStatus.PUT_OK for r in completed)


def test_async_flush_happens_on_its_timer(open_store):
    store = open_store(flush_interval_commit_log=20, flush_commit_log_least_pages=4,
                       flush_commit_log_thorough_interval=400, flush_interval_consume_queue=20)
    r = store.put("TopicA", b"x" * 100)
    assert r.status is PutMessageStatus.PUT_OK and not r.pending
    # under 4 dirty pages: only the thorough flush writes it
    time.sleep(0.1)
    assert store.commit_log.get_flushed_where() < r.next_offset
    assert wait_until(lambda: store.commit_log.get_flushed_where() >= r.next_offset)
    for _ in range(30):
        r = store.put("TopicA", b"x" * 1000)
    assert wait_until(lambda: store.commit_log.get_flushed_where() >= r.next_offset - 4096, 0.3)
    assert wait_until(lambda: store.checkpoint.physic_msg_timestamp == r.store_timestamp)
    assert wait_until(lambda: store.checkpoint.logics_msg_timestamp == r.store_timestamp)
