"""Appends across file ends, batches, bad input, lookups by offset and by time."""

from __future__ import annotations

import itertools
import struct
import time

import pytest

from rmq.protocol.message import encode_properties
from rmq.protocol.record import decode_record
from rmq.store import GetMessageStatus, PutMessageStatus
from tests.helpers import wait_until
from tests.helpers.store import COMMIT_LOG_FILE_SIZE

FILE = COMMIT_LOG_FILE_SIZE


def test_roll_over_writes_an_eof_marker_and_continues_in_the_next_file(open_store):
    store = open_store()
    results = [store.put("TopicA", b"%05d" % i + b"x" * 995, tags="t") for i in range(200)]
    files = store.commit_log.mapped_files
    assert len(files) >= 3
    assert [f.file_from_offset for f in files] == [i * FILE for i in range(len(files))]
    assert all(f.path.endswith(f"{f.file_from_offset:020d}") for f in files)
    for before, after in itertools.pairwise(results):
        if after.wrote_offset // FILE != before.wrote_offset // FILE:
            # the gap to the file end holds [remaining][0xCBD43194]
            end = before.wrote_offset + before.wrote_bytes
            mf = store.commit_log.find_file(before.wrote_offset)
            raw = bytes(mf.read(end % FILE, FILE - end % FILE))
            assert struct.unpack(">iI", raw[:8]) == (FILE - end % FILE, 0xCBD43194)
            assert after.wrote_offset % FILE == 0
    got = store.get_message("g", "TopicA", 0, 0, 1000, 1 << 30)
    offsets = []
    next_offset = 0
    while True:
        got = store.get_message("g", "TopicA", 0, next_offset, 32)
        if got.status is not GetMessageStatus.FOUND:
            break
        offsets += got.queue_offsets
        for view, qo in zip(got.messages, got.queue_offsets, strict=True):
            assert decode_record(view).body.startswith(b"%05d" % qo)
        next_offset = got.next_begin_offset
    assert offsets == list(range(200))
    assert got.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and got.next_begin_offset == 200


def test_batch_is_contiguous_with_consecutive_queue_offsets(open_store):
    store = open_store()
    store.put("TopicA", b"single", queue_id=1)
    batch = [(b"body-%d" % i, {"KEYS": f"k{i}"}, i) for i in range(10)]
    r = store.put_messages("TopicA", 1, batch)
    assert r.status is PutMessageStatus.PUT_OK and r.msg_num == 10 and r.queue_offset == 1
    assert len(r.msg_id.split(",")) == 10 and r.msg_ids[0] == r.msg_id.split(",")[0]
    offsets = r.wrote_offsets
    got = store.get_message("g", "TopicA", 1, 1, 32)
    assert got.queue_offsets == list(range(1, 11))
    for i, view in enumerate(got.messages):
        m = decode_record(view)
        assert (m.body, m.flag, m.queue_offset, m.physical_offset) == (b"body-%d" % i, i, i + 1, offsets[i])
        if i:
            assert offsets[i] == offsets[i - 1] + len(got.messages[i - 1])


def test_batch_crossing_a_file_end_moves_whole_to_the_next_file(open_store):
    store = open_store()
    while store.commit_log.get_max_offset() % FILE < FILE - 3000:
        store.put("TopicA", b"x" * 500)
    r = store.put_messages("TopicA", 0, [(b"y" * 1000, b"", 0)] * 4)
    assert r.wrote_offset % FILE == 0


def test_record_fields_are_passed_by_name_only(open_store):
    # the broker's four put callers named sys_flag, born_timestamp, flag, ... by position, in an order
    # nothing checked; now a field out of place is a TypeError and nothing is written
    store = open_store()
    with pytest.raises(TypeError):
        store.put_message("TopicA", 0, b"x", b"", 0, 1700000000123)
    with pytest.raises(TypeError):
        store.put_messages("TopicA", 0, [(b"x", b"", 0)], 0, 1700000000123)
    assert store.commit_log.get_max_offset() == 0
    r = store.put_message("TopicA", 0, b"x", b"", flag=7, reconsume_times=2, born_timestamp=1700000000123)
    stored = decode_record(bytes(store.look_message_by_offset(r.wrote_offset)))
    assert (stored.flag, stored.reconsume_times, stored.born_timestamp) == (7, 2, 1700000000123)


@pytest.mark.parametrize("topic", ["", "bad topic", "x" * 128, "t!"])
def test_illegal_topic_is_refused_and_nothing_written(open_store, topic):
    store = open_store()
    assert store.put_message(topic, 0, b"x").status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_messages(topic, 0, [(b"x", b"", 0)]).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.commit_log.get_max_offset() == 0 and store.consume_queues() == []


def test_oversized_message_and_properties_are_refused(open_store):
    store = open_store(max_message_size=4096)
    store.put("TopicA", b"ok")
    end = store.commit_log.get_max_offset()
    assert store.put_message("TopicA", 0, b"x" * 4096).status is PutMessageStatus.MESSAGE_ILLEGAL
    big_props = encode_properties({"K": "v" * 32767})
    assert store.put_message("TopicA", 0, b"x", big_props).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_messages("TopicA", 0, [(b"x" * 2000, b"", 0)] * 3).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_message("TopicA", -1, b"x").status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.commit_log.get_max_offset() == end
    assert store.get_max_offset_in_queue("TopicA", 0) == 1


def test_message_larger_than_a_file_is_illegal(open_store):
    store = open_store(mapped_file_size_commit_log=4096)
    assert store.put_message("TopicA", 0, b"x" * 4096).status is PutMessageStatus.MESSAGE_ILLEGAL


def test_put_after_shutdown_is_service_not_available(open_store):
    store = open_store()
    store.shutdown()
    assert store.put_message("TopicA", 0, b"x").status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_look_message_by_offset(open_store):
    store = open_store()
    r = store.put("TopicA", b"hello")
    assert bytes(store.look_message_by_offset(r.wrote_offset))[-7:] != b""
    assert store.look_message_by_offset(r.wrote_offset + 1) is None
    assert store.look_message_by_offset(10**9) is None


def test_offset_by_time_and_store_timestamps(open_store):
    store = open_store()
    stamps = []
    for i in range(6):
        stamps.append(store.put("TopicA", b"%d" % i).store_timestamp)
        time.sleep(0.003)
    assert store.get_offset_in_queue_by_time("TopicA", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("TopicA", 0, stamps[3]) == stamps.index(stamps[3])
    assert store.get_offset_in_queue_by_time("TopicA", 0, stamps[-1] + 1) == 6
    assert store.get_message_store_timestamp("TopicA", 0, 2) == stamps[2]
    assert store.get_earliest_message_time("TopicA", 0) == stamps[0]
    assert store.get_earliest_message_time() == stamps[0]


def mapped_resident_bytes(path: str) -> int:
    """Bytes of ``path``'s mapping in this process whose page tables are populated (smaps' Rss)."""
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(" " + path):
            rss = next(entry for entry in lines[i + 1 :] if entry.startswith("Rss:"))
            return int(rss.split()[1]) * 1024
    raise AssertionError(f"{path} is not mapped")


def test_the_pages_ahead_of_the_writer_are_populated_by_the_prefault_thread(open_store):
    # the writer (a broker's event loop) populating each next MiB itself stalled every connection
    # ~1 ms per MiB of CommitLog, ~10 ms on a busy host: the store's rmq-store-prefault thread
    # keeps 4 MiB ahead instead
    chunk = 1 << 20
    store = open_store(mapped_file_size_commit_log=16 * chunk)
    while store.commit_log.get_max_offset() < chunk + chunk // 2:  # the writer half way into chunk 1
        assert store.put("TopicA", b"x" * (64 * 1024)).status is PutMessageStatus.PUT_OK
    path = store.commit_log.mapped_files[-1].path
    # chunks 0 and 1 (the writer's), then 4 more: 6 MiB (populated by the writer itself: 3 at most)
    wait_until(lambda: mapped_resident_bytes(path) >= 6 * chunk, 5, "the 4 MiB ahead of the writer populated")


def test_the_next_file_is_made_ahead_of_the_writer_and_renamed_in_at_the_roll_over(open_store, store_dir):
    # made in the writer's own roll-over, a 1 GiB file cost the broker's event loop 3-6 ms here
    # (fallocate, mmap, a first write reading 8 MiB around it): every connection stalled
    chunk = 1 << 20
    store = open_store(mapped_file_size_commit_log=4 * chunk)
    while store.commit_log.get_max_offset() < 2 * chunk + chunk // 2:  # past the middle of file 0
        assert store.put("TopicA", b"x" * (64 * 1024)).status is PutMessageStatus.PUT_OK
    ahead = store_dir / "commitlog" / f"{4 * chunk:020d}.ahead"
    wait_until(ahead.exists, 5, "the next CommitLog file made ahead")
    wait_until(lambda: mapped_resident_bytes(str(ahead)) >= 4 * chunk, 5, "its first chunks populated")
    results = [store.put("TopicA", b"%05d" % i + b"y" * (64 * 1024)) for i in range(40)]
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    files = store.commit_log.mapped_files
    assert [f.file_from_offset for f in files] == [0, 4 * chunk]
    assert files[1].path == str(store_dir / "commitlog" / f"{4 * chunk:020d}") and not ahead.exists()
    last = results[-1]
    assert last.wrote_offset > 4 * chunk
    assert decode_record(bytes(store.look_message_by_offset(last.wrote_offset))).body[:5] == b"00039"


def test_a_file_made_ahead_and_left_by_a_crash_is_removed_at_start(open_store, store_dir):
    commit_log = store_dir / "commitlog"
    store = open_store()
    assert store.put("TopicA", b"x" * 100).status is PutMessageStatus.PUT_OK
    store.shutdown()
    stray = commit_log / f"{COMMIT_LOG_FILE_SIZE:020d}.ahead"
    stray.write_bytes(b"\0" * COMMIT_LOG_FILE_SIZE)  # as a SIGKILL before the roll-over leaves it
    store = open_store()
    assert not stray.exists()
    assert [f.file_from_offset for f in store.commit_log.mapped_files] == [0]
    assert store.get_message("g", "TopicA", 0, 0, 32).status is GetMessageStatus.FOUND
