"""SYNC_FLUSH completions from the group commit, ASYNC_FLUSH on its timer, the checkpoint."""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time

from rmq.store import MessageStore, PutMessageStatus
from tests.helpers import wait_until
from tests.helpers.store import small_store_config


def test_sync_flush_completes_from_the_flush_thread_once_durable(open_store):
    store = open_store(flush_disk_type="SYNC_FLUSH")
    completed = []
    lock = threading.Lock()

    def on_durable(result):
        with lock:
            completed.append((result, threading.get_ident(), store.commit_log.get_flushed_where()))

    results = [store.put_message("TopicA", i % 2, b"x" * 300, b"", callback=on_durable) for i in range(300)]
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    wait_until(lambda: len(completed) == 300, 20, "300 puts completed")
    for result, thread_id, flushed in completed:
        assert thread_id != threading.get_ident()
        assert result.status is PutMessageStatus.PUT_OK and not result.pending
        assert flushed >= result.next_offset == result.wrote_offset + result.wrote_bytes


def test_sync_flush_completes_when_the_store_s_descriptors_are_numbered_past_1024(open_store):
    """select() refuses a descriptor numbered 1024 or more: a process with many connections or
    files open (a broker; a test session) must still complete its SYNC_FLUSH puts."""
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        store = open_store(flush_disk_type="SYNC_FLUSH")
        assert store.commit_event_fd >= 1024
        done = threading.Event()
        result = store.put_message("TopicA", 0, b"x", b"", callback=lambda _: done.set())
        assert result.status is PutMessageStatus.PUT_OK
        assert not result.pending or done.wait(5), "the put never completed"
    finally:
        for fd in filler:
            os.close(fd)


def test_the_flush_round_that_made_a_put_durable_is_timed_stage_by_stage(open_store):
    # what perf/trace_sync_send.py reads: when the idle flush thread was asked, ran, and msync returned
    store = open_store(flush_disk_type="SYNC_FLUSH")
    before = time.monotonic()
    store.put("TopicA", b"x" * 100)
    asked, started, synced = store.group_commit.round_times
    assert before <= started <= synced <= time.monotonic()
    # 0 if the put found the flush thread between two waits (it then needed no asking)
    assert asked == 0 or before <= asked <= started


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


def test_sync_flush_puts_that_do_not_wait_are_durable_within_the_interval(open_store):
    store = open_store(flush_disk_type="SYNC_FLUSH")
    results = [store.put_message("TopicA", 0, b"x" * 500, b"") for _ in range(20)]
    assert not any(r.pending for r in results)
    wait_until(lambda: store.commit_log.get_flushed_where() >= results[-1].next_offset, 10, "the puts flushed")
    wait_until(
        lambda: store.checkpoint.physic_msg_timestamp == results[-1].store_timestamp,
        10,
        "the checkpoint's CommitLog time at the last put",
    )


def test_sync_flush_spanning_many_files_in_one_round(open_store, store_dir):
    # 64 KiB files: ~600 KiB written faster than a round makes the flush cross a dozen roll-overs
    store = open_store(flush_disk_type="SYNC_FLUSH")
    stored = [store.put_message("TopicA", 0, b"%05d" % i + b"y" * 1019, b"") for i in range(600)]
    completed = []
    last = store.put_message("TopicA", 0, b"last", b"", callback=completed.append)
    assert len(store.commit_log.mapped_files) > 8
    wait_until(lambda: completed == [last], 20, "the last put completed")
    assert last.status is PutMessageStatus.PUT_OK
    assert store.commit_log.get_flushed_where() >= last.next_offset
    store.shutdown()
    reopened = open_store()
    got = reopened.get_message("g", "TopicA", 0, 0, 32, max_total_bytes=1 << 20)
    assert got.message_count == 32 and reopened.get_max_offset_in_queue("TopicA", 0) == len(stored) + 1


@contextlib.contextmanager
def handed_over_store(store_dir, kick_rounds=False):
    """A SYNC_FLUSH store whose completions (and, with ``kick_rounds``, rounds) the test drives."""
    store = MessageStore(small_store_config(store_dir, flush_disk_type="SYNC_FLUSH"))
    store.hand_over_commit_completion()
    if kick_rounds:
        store.kick_rounds_myself()
    store.start()
    try:
        yield store
    finally:
        store.shutdown()


def test_handed_over_completions_run_on_the_owners_thread(store_dir):
    with handed_over_store(store_dir) as store:
        completed = []
        r = store.put_message(
            "TopicA", 0, b"x" * 100, b"", callback=lambda result: completed.append(threading.get_ident())
        )
        # the round ends with a count on the eventfd; nobody else completes the put: it is still
        # pending after its round, and the owner's call completes it, on the owner's thread
        assert select.select([store.commit_event_fd], [], [], 5)[0]
        assert completed == [] and r.pending
        assert store.complete_commits() == 1
        assert completed == [threading.get_ident()] and r.status is PutMessageStatus.PUT_OK


def test_kicked_rounds_cover_a_whole_batch_of_waiting_puts(store_dir):
    with handed_over_store(store_dir, kick_rounds=True) as store:
        completed = []
        results = [store.put_message("TopicA", 0, b"x" * 1000, b"", callback=completed.append) for _ in range(16)]
        rounds = store.group_commit_flushes
        store.kick_group_commit()

        def completing() -> bool:
            select.select([store.commit_event_fd], [], [], 0.5)
            store.complete_commits()
            return len(completed) == 16

        wait_until(completing, 10, "the 16 puts completed", interval=0)
        assert completed == results and all(r.status is PutMessageStatus.PUT_OK for r in results)
        # one round for the waiting batch (a second only if a 10 ms timer round was under way)
        assert store.group_commit_flushes - rounds <= 2


def test_async_flush_happens_on_its_timer(open_store, store_dir):
    timers = dict(flush_interval_commit_log=20, flush_commit_log_least_pages=4, flush_interval_consume_queue=20)
    started = time.monotonic()
    store = open_store(store_dir / "thorough", flush_commit_log_thorough_interval=400, **timers)
    r = store.put("TopicA", b"x" * 100)
    assert r.status is PutMessageStatus.PUT_OK and not r.pending
    # under 4 dirty pages: only the thorough flush writes it, 400 ms after the service started
    wait_until(lambda: store.commit_log.get_flushed_where() >= r.next_offset, 10, "the thorough flush")
    assert time.monotonic() - started >= 0.4
    # 4 dirty pages or more: the 20 ms round writes them (there is no thorough round here)
    store = open_store(store_dir / "pages", flush_commit_log_thorough_interval=10**9, **timers)
    for _ in range(30):
        r = store.put("TopicA", b"x" * 1000)
    wait_until(lambda: store.commit_log.get_flushed_where() >= r.next_offset - 4096, 10, "the 4-page flush")
    wait_until(
        lambda: store.checkpoint.physic_msg_timestamp == r.store_timestamp,
        10,
        "the checkpoint's CommitLog time at the last put",
    )
    wait_until(
        lambda: store.checkpoint.logics_msg_timestamp == r.store_timestamp,
        10,
        "the checkpoint's ConsumeQueue time at the last put",
    )
