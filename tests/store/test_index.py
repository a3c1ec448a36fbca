"""The IndexFile (rmq.store._index): exact bytes, collisions, roll-over, queries, recovery, retention; and
queries by key through the store."""

from __future__ import annotations

import os
import shutil
import struct
import threading
from pathlib import Path

import pytest

import rmq.store.index
from rmq.errors import StoreError
from rmq.protocol.message import java_string_hash
from rmq.protocol.record import decode_record
from rmq.store._index import (
    LAYOUT,
    IndexFile,
    IndexService,
    index_file_size,
    index_key_hash,
    java_hash,
)

SLOTS = 4
ENTRIES = 16  # entry 0 is unused: 15 keys per file
PER_FILE = ENTRIES - 1
T0 = 1_700_000_000_000  # a whole second, so second-granular timeDiffs read back exactly
FOREVER = (0, 2**62)


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    return tmp_path / "index"


@pytest.fixture
def service(index_dir: Path):
    svc = IndexService(str(index_dir), SLOTS, ENTRIES)
    svc.load(True)
    yield svc
    svc.shutdown()


def reopen(index_dir: Path, last_exit_ok: bool = True, checkpoint_ms: int = 0) -> IndexService:
    svc = IndexService(str(index_dir), SLOTS, ENTRIES)
    svc.load(last_exit_ok, checkpoint_ms)
    return svc


def fill(svc: IndexService, n: int, keys: int = 5) -> dict[str, list[int]]:
    """Message i (offset 1000 + 100 i, stored at T0 + i s) has key k<i % keys>; returns the
    expected query result of each key, newest first."""
    expected: dict[str, list[int]] = {}
    for i in range(n):
        key, offset = f"k{i % keys}", 1000 + 100 * i
        svc.build_index_py(b"TopicA", b"", key.encode(), offset, T0 + 1000 * i)
        expected.setdefault(key, []).insert(0, offset)
    return expected


# --- the format ---------------------------------------------------------------------------------


def test_python_layout_mirrors_the_pxd():
    index = rmq.store.index
    assert {name: getattr(index, name) for name in LAYOUT} == LAYOUT
    assert index_file_size(index.DEFAULT_MAX_HASH_SLOT_NUM, index.DEFAULT_MAX_INDEX_NUM) == 420_000_040


def test_golden_bytes_header_slots_and_chained_entries(service, index_dir):
    # docs/store-format.md#indexfile, built here with struct only
    h1 = abs(java_string_hash("TopicA#k1"))
    h2 = abs(java_string_hash("TopicA#order-7"))
    assert h1 % SLOTS != h2 % SLOTS
    service.put_key("TopicA", "k1", 1000, T0 + 123)
    service.put_key("TopicA", "order-7", 2000, T0 + 5_623)
    service.put_key("TopicA", "k1", 3000, T0 + 13_122)

    header = struct.pack(">qqqqii", T0 + 123, T0 + 13_122, 1000, 3000, 2, 4)
    slots = [0] * SLOTS
    slots[h1 % SLOTS] = 3
    slots[h2 % SLOTS] = 2
    entries = (
        bytes(20)  # entry 0 is never used
        + struct.pack(">iqii", h1, 1000, 0, 0)
        + struct.pack(">iqii", h2, 2000, 5, 0)
        + struct.pack(">iqii", h1, 3000, 12, 1)  # prevIndex: the older k1 entry of its slot
    )
    expected = header + struct.pack(f">{SLOTS}i", *slots) + entries
    expected += bytes(40 + SLOTS * 4 + ENTRIES * 20 - len(expected))

    [path] = service.files
    assert Path(path).read_bytes() == expected  # MAP_SHARED: read() sees the puts without a flush
    assert service.query("TopicA", "k1", 10, *FOREVER) == [3000, 1000]


def test_files_are_named_by_creation_time_and_fully_allocated(service):
    fill(service, 3 * PER_FILE)
    names = [os.path.basename(p) for p in service.files]
    assert len(names) == 3 and names == sorted(names) and len(set(names)) == 3
    assert all(len(n) == 17 and n.isdigit() for n in names)
    for path in service.files:
        st = os.stat(path)
        assert st.st_size == index_file_size(SLOTS, ENTRIES)
        assert st.st_blocks * 512 >= st.st_size  # fallocated: no SIGBUS on a full disk


# --- the hash -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "a", "TagA", "TopicTest#KEY-1", "\u4e2d\u6587", "\U0001f600", "é#ü"])
def test_compiled_java_hash_matches_the_reference(text):
    assert java_hash(text) == java_string_hash(text)


def test_index_key_hash_is_abs_of_the_joined_key():
    assert index_key_hash("TopicA", "order-7") == abs(java_string_hash("TopicA#order-7"))
    assert index_key_hash("TopicA", "k") != index_key_hash("TopicB", "k")
    # String.hashCode of this one is Integer.MIN_VALUE; Math.abs leaves it negative: RocketMQ uses 0
    min_key = "\u0f72\u201a\u2006\u2013\u2004"
    assert java_string_hash("T#" + min_key) == -(2**31)
    assert index_key_hash("T", min_key) == 0


def test_min_value_hash_key_round_trips(service):
    min_key = "\u0f72\u201a\u2006\u2013\u2004"
    service.put_key("T", min_key, 42, T0)
    assert service.query("T", min_key, 10, *FOREVER) == [42]


# --- put and query ------------------------------------------------------------------------------


def test_collisions_and_roll_over_keep_every_key_apart(service):
    expected = fill(service, 4 * PER_FILE + 7)  # 5 keys in 4 slots, 5 files
    assert len(service.files) == 5
    for key, offsets in expected.items():
        assert service.query("TopicA", key, 1000, *FOREVER) == offsets
    assert service.query("TopicA", "absent", 1000, *FOREVER) == []
    assert service.max_phy_offset == 1000 + 100 * (4 * PER_FILE + 6)


def test_query_honours_max_num_newest_first(service):
    expected = fill(service, 3 * PER_FILE)
    assert service.query("TopicA", "k2", 4, *FOREVER) == expected["k2"][:4]
    assert service.query("TopicA", "k2", 0, *FOREVER) == []


def test_query_honours_the_time_range(service):
    fill(service, 3 * PER_FILE)  # message i stored at T0 + i s
    begin, end = T0 + 12_000, T0 + 31_000
    want = [1000 + 100 * i for i in range(31, 11, -1) if i % 5 == 3]
    assert service.query("TopicA", "k3", 100, begin, end) == want
    assert service.query("TopicA", "k3", 100, end, begin) == []
    assert service.query("TopicA", "k3", 100, T0 + 10**9, T0 + 2 * 10**9) == []


def test_same_key_text_in_two_topics(service):
    service.put_key("TopicA", "order-1", 100, T0)
    service.put_key("TopicB", "order-1", 200, T0)
    assert service.query("TopicA", "order-1", 10, *FOREVER) == [100]
    assert service.query("TopicB", "order-1", 10, *FOREVER) == [200]


def test_hash_collisions_are_left_to_the_callers_recheck(service):
    # "Aa" and "BB" have the same String.hashCode, so do "T#Aa" and "T#BB"
    assert index_key_hash("T", "Aa") == index_key_hash("T", "BB")
    service.put_key("T", "Aa", 100, T0)
    service.put_key("T", "BB", 200, T0)
    assert service.query("T", "Aa", 10, *FOREVER) == [200, 100]


def test_build_index_indexes_uniq_key_and_each_keys_token(service):
    service.build_index_py(b"TopicA", b"7F0000010001", b"  k1 k2  k3 ", 500, T0)
    service.build_index_py(b"TopicA", b"", b"k2", 600, T0)
    service.build_index_py(b"TopicA", b"", b"", 700, T0)  # nothing to index
    for key, offsets in {"7F0000010001": [500], "k1": [500], "k2": [600, 500], "k3": [500]}.items():
        assert service.query("TopicA", key, 10, *FOREVER) == offsets
    assert service.query("TopicA", "", 10, *FOREVER) == []
    assert service.query("TopicA", "k1 k2", 10, *FOREVER) == []


def test_build_index_skips_what_the_index_already_holds(service):
    service.build_index_py(b"TopicA", b"", b"k", 500, T0)
    service.build_index_py(b"TopicA", b"", b"k", 400, T0)  # below: re-dispatch
    service.build_index_py(b"TopicA", b"", b"k", 500, T0)  # the newest message again
    service.build_index_py(b"TopicA", b"", b"k", 600, T0)
    assert service.query("TopicA", "k", 10, *FOREVER) == [600, 500]


def test_flush_returns_the_end_timestamp_it_made_durable(service):
    assert service.flush() == 0
    fill(service, PER_FILE + 3)
    assert service.flush() == T0 + 1000 * (PER_FILE + 2)
    assert service.flush() == T0 + 1000 * (PER_FILE + 2)  # nothing new: still covered


def test_flush_runs_beside_puts(service):
    stop = threading.Event()

    def flush_loop():
        while not stop.is_set():
            service.flush()

    flusher = threading.Thread(target=flush_loop)
    flusher.start()
    try:
        expected = fill(service, 20 * PER_FILE)
    finally:
        stop.set()
        flusher.join()
    assert service.query("TopicA", "k4", 1000, *FOREVER) == expected["k4"]


# --- load, recovery, retention ------------------------------------------------------------------


def test_load_after_shutdown_finds_everything(service, index_dir):
    expected = fill(service, 3 * PER_FILE + 2)
    files, max_offset = service.files, service.max_phy_offset
    service.shutdown()
    svc = reopen(index_dir)
    try:
        assert svc.files == files and svc.max_phy_offset == max_offset
        for key, offsets in expected.items():
            assert svc.query("TopicA", key, 1000, *FOREVER) == offsets
        svc.build_index_py(b"TopicA", b"", b"k0", max_offset + 100, T0 + 10**6)
        assert svc.query("TopicA", "k0", 1, *FOREVER) == [max_offset + 100]
    finally:
        svc.shutdown()


def test_load_after_a_crash_drops_files_past_the_checkpoint_and_redispatch_rebuilds(service, index_dir):
    n = 4 * PER_FILE
    expected = fill(service, n)
    checkpoint = T0 + 1000 * (2 * PER_FILE - 1)  # the end of the second file
    service.shutdown()
    svc = reopen(index_dir, last_exit_ok=False, checkpoint_ms=checkpoint)
    try:
        assert len(svc.files) == 2
        assert svc.max_phy_offset == 1000 + 100 * (2 * PER_FILE - 1)
        assert svc.query("TopicA", "k1", 1000, *FOREVER) == [o for o in expected["k1"] if o <= svc.max_phy_offset]
        assert fill(svc, n) == expected  # re-dispatch of everything: no-op up to max_phy_offset
        for key, offsets in expected.items():
            assert svc.query("TopicA", key, 1000, *FOREVER) == offsets
    finally:
        svc.shutdown()


def test_garbage_in_the_index_directory_does_not_stop_load(service, index_dir, caplog):
    fill(service, PER_FILE + 2)
    good = service.files
    service.shutdown()
    size = index_file_size(SLOTS, ENTRIES)
    (index_dir / "20000101000000000").write_bytes(b"junk")  # wrong size
    (index_dir / "20000101000000001").write_bytes(b"\xff" * size)  # right size, nonsense header
    torn = Path(good[0]).read_bytes()[: size // 2]
    (index_dir / "20000101000000002").write_bytes(torn)  # truncated copy of a real file
    (index_dir / "20000101000000003").write_bytes(bytes(size))  # made, never written
    (index_dir / "notes.txt").write_text("not an index file")
    (index_dir / "20000101000000004").mkdir()
    svc = reopen(index_dir)
    try:
        assert svc.files == good
        assert svc.query("TopicA", "k1", 100, *FOREVER)
    finally:
        svc.shutdown()
    kept = [os.path.basename(p) for p in good] + ["20000101000000004", "notes.txt"]
    assert sorted(os.listdir(index_dir)) == sorted(kept)
    assert "notes.txt" in caplog.text and "20000101000000001" in caplog.text


def test_a_loop_in_a_damaged_chain_ends_the_walk(service):
    service.put_key("T", "k", 100, T0)
    service.put_key("T", "k", 200, T0)
    [path] = service.files
    entry2 = 40 + SLOTS * 4 + 2 * 20
    with open(path, "r+b") as f:  # entry 1 -> entry 2 -> entry 1 ...
        f.seek(entry2 - 20 + 16)
        f.write(struct.pack(">i", 2))
    assert service.query("T", "k", 100, *FOREVER) == [200, 100]


def test_delete_expired_files_never_deletes_the_newest(service):
    fill(service, 4 * PER_FILE)
    first_end = 1000 + 100 * (PER_FILE - 1)
    assert service.delete_expired_files(first_end) == 0  # first file ends at, not below, it
    assert service.delete_expired_files(first_end + 1) == 1
    newest = service.files[-1]
    assert service.delete_expired_files(2**62) == 2
    assert service.files == [newest] and os.listdir(os.path.dirname(newest)) == [os.path.basename(newest)]
    newest_first = range(4 * PER_FILE - 1, 3 * PER_FILE - 1, -1)
    assert service.query("TopicA", "k0", 100, *FOREVER) == [1000 + 100 * i for i in newest_first if i % 5 == 0]


@pytest.mark.parametrize("slots, entries", [(0, 16), (4, 1)])
def test_a_geometry_that_cannot_hold_a_key_is_refused(tmp_path, slots, entries):
    with pytest.raises(StoreError, match="at least 1 hash slot and 2 entries"):
        IndexService(str(tmp_path), slots, entries)


def test_index_file_exposes_its_header(service):
    fill(service, 3)
    f = IndexFile(service.files[0], SLOTS, ENTRIES)
    assert (f.index_count, f.begin_phy_offset, f.end_phy_offset) == (4, 1000, 1200)
    assert (f.begin_timestamp, f.end_timestamp) == (T0, T0 + 2000)
    assert not f.is_full


# --- through the store -------------------------------------------------------------------------


def test_query_message_by_key_and_uniq_key(open_store):
    store = open_store()
    r = store.put("TopicA", b"k", keys=["order-1", "user-9"], properties={"UNIQ_KEY": "AC11000100002A9F0001"})
    store.put("TopicA", b"other", keys="order-2")
    store.put("TopicB", b"same key, other topic", keys="order-1")
    for key in ("order-1", "user-9", "AC11000100002A9F0001"):
        found = store.query_message("TopicA", key, 10, 0, 2**62)
        assert [decode_record(m).physical_offset for m in found.messages] == [r.wrote_offset], key
    assert store.query_message("TopicA", "order-", 10, 0, 2**62).messages == []


def test_crash_recovery_rebuilds_the_index(open_store, store_dir):
    store = open_store()
    r = store.put("TopicA", b"k", keys="lost-key")
    store.shutdown()
    shutil.rmtree(store_dir / "index")
    (store_dir / "checkpoint").unlink()
    (store_dir / "abort").touch()
    store = open_store()
    found = store.query_message("TopicA", "lost-key", 10, 0, 2**62)
    assert [decode_record(m).physical_offset for m in found.messages] == [r.wrote_offset]
