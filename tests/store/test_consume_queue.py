"""ConsumeQueue reads through the store: statuses and next offsets, tag filters, byte limits, delayed
messages' tags codes, views that outlive the store; queue files that take disk only where written."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

from rmq.protocol.message import SCHEDULE_TOPIC, java_string_hash
from rmq.protocol.record import decode_record
from rmq.store import GetMessageStatus, TagFilter
from tests.helpers.store import body_heads


def test_get_statuses(open_store):
    store = open_store()
    assert store.get_message("g", "Nope", 0, 0, 32).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    for i in range(5):
        store.put("TopicA", b"%d" % i)
    got = store.get_message("g", "TopicA", 0, 0, 3)
    assert got.status is GetMessageStatus.FOUND and got.queue_offsets == [0, 1, 2]
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (3, 0, 5)
    assert got.buffer_total_size == sum(len(m) for m in got.messages)
    assert store.get_message("g", "TopicA", 0, 5, 3).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    badly = store.get_message("g", "TopicA", 0, 9, 3)
    assert badly.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and badly.next_begin_offset == 0


def test_byte_limit_returns_at_least_one_message(open_store):
    store = open_store()
    for _ in range(4):
        store.put("TopicA", b"x" * 1000)
    got = store.get_message("g", "TopicA", 0, 0, 32, max_total_bytes=2500)
    assert len(got.messages) == 2 and got.next_begin_offset == 2
    got = store.get_message("g", "TopicA", 0, 0, 32, max_total_bytes=10)
    assert len(got.messages) == 1


def test_tag_filter_by_code_and_exact_tag(open_store):
    store = open_store()
    tags = ["a", "b", "a", "c", "b"]
    for i, tag in enumerate(tags):
        store.put("TopicA", b"%d" % i, tags=tag)
    store.put("TopicA", b"none")
    got = store.get_message("g", "TopicA", 0, 0, 32, tag_filter=TagFilter.of_tags(["a", "c"]))
    assert got.queue_offsets == [0, 2, 3] and got.next_begin_offset == 6
    got = store.get_message("g", "TopicA", 0, 0, 32, tag_filter=TagFilter({java_string_hash("b")}))
    assert got.queue_offsets == [1, 4]
    got = store.get_message("g", "TopicA", 0, 0, 32, tag_filter=TagFilter.of_tags(["zzz"]))
    assert got.status is GetMessageStatus.NO_MATCHED_MESSAGE and got.next_begin_offset == 6


def test_exact_tags_reject_a_hash_collision(open_store):
    store = open_store()
    # "Aa" and "BB" share a Java String.hashCode
    assert java_string_hash("Aa") == java_string_hash("BB")
    store.put("TopicA", b"1", tags="Aa")
    store.put("TopicA", b"2", tags="BB")
    assert store.get_message("g", "TopicA", 0, 0, 32, tag_filter=TagFilter.of_tags(["BB"])).queue_offsets == [1]
    loose = TagFilter.of_tags(["BB"], exact=False)
    assert store.get_message("g", "TopicA", 0, 0, 32, tag_filter=loose).queue_offsets == [0, 1]


def test_schedule_topic_tags_code_is_the_deliver_time(open_store):
    store = open_store(message_delay_level="1s 5s 10s")
    r = store.put(SCHEDULE_TOPIC, b"later", queue_id=1, properties={"DELAY": "2", "TAGS": "x"})
    assert store.find_consume_queue(SCHEDULE_TOPIC, 1).get_entry(0)[2] == r.store_timestamp + 5000
    r = store.put(SCHEDULE_TOPIC, b"later", queue_id=2, properties={"DELAY": "9"})
    assert store.find_consume_queue(SCHEDULE_TOPIC, 2).get_entry(0)[2] == r.store_timestamp + 10000


def test_views_stay_valid_after_the_store_is_gone(open_store):
    store = open_store()
    store.put("TopicA", b"keep me")
    view = store.get_message("g", "TopicA", 0, 0, 1).messages[0]
    store.shutdown()
    for mf in store.commit_log.mapped_files:
        mf.destroy()
    del store
    assert decode_record(view).body == b"keep me"


def test_a_properties_filter_sees_only_the_properties_it_names_as_decode_properties_reads_them(open_store):
    store = open_store()
    raw = [
        b"a\x011\x02b\x01x\x02",
        b"a\x011\x02a\x012\x02",  # a repeated key: the last one, as Java's HashMap keeps it
        b"noseparator\x02a\x01v\x01w\x02",  # an item without \x01 is skipped; a value keeps a \x01
        b"b\x01only\x02",
        b"a\x01caf\xc3\xa9\x02",  # UTF-8
    ]
    for i, props in enumerate(raw):
        store.put_message("TopicA", 0, b"%d" % i, props)
    seen = []

    def accepts(found: dict) -> bool:
        seen.append(found)
        return "a" in found

    got = store.get_message("g", "TopicA", 0, 0, 32, tag_filter=TagFilter.of_properties(accepts, ["a"]))
    assert seen == [{"a": "1"}, {"a": "2"}, {"a": "v\x01w"}, {}, {"a": "café"}]
    assert got.queue_offsets == [0, 1, 2, 4] and got.next_begin_offset == 5


def test_a_queue_file_allocated_whole_gives_back_its_unwritten_pages_when_loaded(store_dir, open_store):
    # files written before ConsumeQueue files were sparse were fallocated whole (6 MB by default)
    size = 10_000 * 20
    store = open_store(mapped_file_size_consume_queue=size)
    for i in range(3):
        store.put("TopicA", b"m%04d" % i)
    queue_file = Path(store.find_consume_queue("TopicA", 0).mapped_file_queue.mapped_files[0].path)
    assert queue_file.stat().st_blocks * 512 <= 4096  # sparse: one page
    store.shutdown()
    with open(queue_file, "r+b") as f:
        os.posix_fallocate(f.fileno(), 0, size)
    assert queue_file.stat().st_blocks * 512 >= size
    store = open_store(mapped_file_size_consume_queue=size)
    assert queue_file.stat().st_blocks * 512 <= 4096
    assert store.put("TopicA", b"m0003").queue_offset == 3
    assert body_heads(store) == [b"m0000", b"m0001", b"m0002", b"m0003"]


def page_cache_pages(path: Path) -> int:
    """Pages of the file at ``path`` in the page cache (mincore over a mapping of it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        at = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert at != ctypes.c_void_p(-1).value, os.strerror(ctypes.get_errno())
        try:
            pages = (ctypes.c_ubyte * ((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE))()
            assert libc.mincore(at, size, pages) == 0, os.strerror(ctypes.get_errno())
            return sum(page & 1 for page in pages)
        finally:
            libc.munmap(at, size)
    finally:
        os.close(fd)


def test_a_new_queue_file_is_not_read_around_by_its_first_write(open_store, store_dir):
    # the writer is the broker's event loop: a first write that read the new 6 MB file around it
    # (read_ahead_kb, 8 MiB here) zeroed all of it into the page cache, ~2.3 ms per queue's roll-over
    store = open_store(mapped_file_size_consume_queue=300_000 * 20)
    store.put("TopicA", b"x")
    queue_file = store_dir / "consumequeue" / "TopicA" / "0" / f"{0:020d}"
    assert page_cache_pages(queue_file) <= 16
