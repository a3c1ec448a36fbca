"""A full disk, on a tiny tmpfs mounted for each test: every file the store and the broker create or
rewrite (CommitLog, ConsumeQueue and index files, the checkpoint, config JSON, the timer log) fails
cleanly with ENOSPC, never a SIGBUS, a torn record or a message stored without its queue entry;
writes resume once space returns. Above diskSpaceWarningLevelRatio the store refuses puts itself."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq._files import write_file_atomically
from rmq.broker.timer.wheel import UNIT_SIZE, TimerLog
from rmq.protocol.record import decode_record
from rmq.store import GetMessageStatus, PutMessageStatus
from rmq.store._store import StoreCheckpoint
from tests.helpers.disk import fill, tiny_tmpfs, used_ratio
from tests.helpers.store import body_heads

PAGE = 4096
# the largest step by which a ConsumeQueue file is allocated ahead of its writer (rmq.store._mapped_file)
STEP_MAX = 64 * 1024
# Small files: 64 KiB CommitLog files, 100-entry ConsumeQueue files, index files of 15 entries.
TINY_FILES = dict(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=100 * 20,
    max_hash_slot_num=64,
    max_index_num=16,
)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    with tiny_tmpfs(tmp_path / "tiny", "512k") as mount_point:
        yield mount_point


def test_disk_full_refuses_then_resumes(tiny_fs, open_store):
    # tiny_fs first: it is unmounted after the store is shut down
    filler = tiny_fs / "filler"
    filler.write_bytes(b"\1" * 200 * 1024)
    store = open_store(tiny_fs / "store", **TINY_FILES)
    stored = []
    status = None
    for i in range(1000):
        r = store.put("TopicA", b"%04d" % i + b"z" * 2000, keys=f"k{i}")
        status = r.status
        if status is not PutMessageStatus.PUT_OK:
            break
        stored.append(r)
    assert status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
    end = store.commit_log.get_max_offset()
    # refused again, nothing written, everything stored still readable
    assert store.put("TopicA", b"y" * 2000).status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
    assert store.commit_log.get_max_offset() == end
    bodies, offset = [], 0
    while (got := store.get_message("g", "TopicA", 0, offset, 32)).status is GetMessageStatus.FOUND:
        bodies += [decode_record(m).body[:4] for m in got.messages]
        offset = got.next_begin_offset
    assert bodies == [b"%04d" % i for i in range(len(stored))]
    # space returns: writes resume where they stopped
    filler.unlink()
    r = store.put("TopicA", b"resumed")
    assert r.status is PutMessageStatus.PUT_OK and r.queue_offset == len(stored)
    store.shutdown()
    store = open_store(tiny_fs / "store", **TINY_FILES)
    assert store.last_exit_ok and store.get_max_offset_in_queue("TopicA", 0) == len(stored) + 1


def test_a_consume_queue_file_that_cannot_be_made_refuses_the_message(tiny_fs, open_store):
    store = open_store(tiny_fs / "store", **TINY_FILES)
    assert store.put("TopicA", b"m0000").status is PutMessageStatus.PUT_OK
    fill(tiny_fs / "filler")
    end = store.commit_log.get_max_offset()
    # the CommitLog file has room, a new queue's first file does not: nothing is written
    assert store.put("TopicB", b"b0000").status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
    assert store.commit_log.get_max_offset() == end
    assert store.find_consume_queue("TopicB", 0) is None or store.get_max_offset_in_queue("TopicB", 0) == 0
    (tiny_fs / "filler").unlink()
    r = store.put("TopicB", b"b0001")
    assert r.status is PutMessageStatus.PUT_OK and r.queue_offset == 0
    assert body_heads(store, topic="TopicB") == [b"b0001"]


def test_consume_queue_files_take_disk_a_page_at_a_time_and_a_full_disk_refuses_the_next_page(tiny_fs, open_store):
    # 1,000-entry (20,000-byte) queue files: sparse, a page (204 entries) allocated at a time
    store = open_store(tiny_fs / "store", **{**TINY_FILES, "mapped_file_size_consume_queue": 1000 * 20})
    assert store.put("TopicA", b"m0000").status is PutMessageStatus.PUT_OK
    cq_file = Path(store.find_consume_queue("TopicA", 0).mapped_file_queue.mapped_files[0].path)
    assert cq_file.stat().st_size == 20_000 and cq_file.stat().st_blocks * 512 == PAGE
    for i in range(1, PAGE // 20):  # the rest of the first page
        assert store.put("TopicA", b"m%04d" % i).status is PutMessageStatus.PUT_OK
    fill(tiny_fs / "filler")
    end = store.commit_log.get_max_offset()
    # the next entry needs a page the disk has no room for: refused before anything is written
    # (written through the mapping, a page without blocks would have been a SIGBUS)
    assert store.put("TopicA", b"m0204").status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
    assert store.commit_log.get_max_offset() == end
    (tiny_fs / "filler").unlink()
    assert store.put("TopicA", b"m0205").status is PutMessageStatus.PUT_OK
    assert cq_file.stat().st_blocks * 512 == 2 * PAGE
    assert body_heads(store)[-3:] == [b"m0202", b"m0203", b"m0205"]


def test_a_busy_queue_allocates_by_bigger_steps_and_takes_what_a_full_disk_has_left(tmp_path, open_store):
    files = {**TINY_FILES, "mapped_file_size_commit_log": 1 << 20, "mapped_file_size_consume_queue": 20_000 * 20}
    with tiny_tmpfs(tmp_path / "tiny", "4m") as mount_point:
        store = open_store(mount_point / "store", **files)
        for i in range(STEP_MAX // 20):  # steps of 1, 1, 2, 4, 8, 16 pages: 64 KiB allocated
            assert store.put("TopicA", b"m%04d" % i).status is PutMessageStatus.PUT_OK
        cq_file = Path(store.find_consume_queue("TopicA", 0).mapped_file_queue.mapped_files[0].path)
        assert cq_file.stat().st_blocks * 512 == STEP_MAX
        fill(mount_point / "filler", leave=2 * PAGE)
        # no room for the next 64 KiB step: the page the entry needs is enough
        assert store.put("TopicA", b"more").status is PutMessageStatus.PUT_OK
        assert cq_file.stat().st_blocks * 512 == STEP_MAX + PAGE
        store.shutdown()


def test_an_index_file_that_cannot_be_made_refuses_the_message(tiny_fs, open_store):
    store = open_store(tiny_fs / "store", **TINY_FILES)
    for i in range(7):  # two keys each: 14 of the file's 15 entries
        assert store.put("TopicA", b"m%04d" % i, keys=[f"a{i}", f"b{i}"]).status is PutMessageStatus.PUT_OK
    fill(tiny_fs / "filler")
    end = store.commit_log.get_max_offset()
    # two more keys need the next index file: refused before anything is written
    r = store.put("TopicA", b"m0007", keys=["a7", "b7"])
    assert r.status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
    assert store.commit_log.get_max_offset() == end
    # a message without keys needs no index file
    assert store.put("TopicA", b"m0008").status is PutMessageStatus.PUT_OK
    (tiny_fs / "filler").unlink()
    assert store.put("TopicA", b"m0009", keys=["a9", "b9"]).status is PutMessageStatus.PUT_OK
    assert body_heads(store) == [b"m%04d" % i for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)]
    for key in ("a0", "b6", "a9", "b9"):  # every stored message with keys is found by them
        assert len(store.query_message("TopicA", key).messages) == 1, key


def test_the_store_refuses_puts_above_the_warning_level_and_resumes_below(tiny_fs, open_store):
    store = open_store(tiny_fs / "store", disk_space_warning_level_ratio=0.9, **TINY_FILES)
    assert store.put("TopicA", b"m0000").status is PutMessageStatus.PUT_OK
    usage = store.check_disk_space()
    assert usage.commit_log < 0.9 and not store.disk_full
    fill(tiny_fs / "filler", leave=16 * 1024)  # above 0.9, yet room for more records
    assert used_ratio(tiny_fs) > 0.9
    usage = store.check_disk_space()
    assert store.disk_full and usage.commit_log > 0.9 and "CL:  0.9" in str(usage)
    r = store.put("TopicA", b"m0001")
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert store.get_message("g", "TopicA", 0, 0, 32).status is GetMessageStatus.FOUND  # reads go on
    (tiny_fs / "filler").unlink()
    store.check_disk_space()
    assert not store.disk_full
    assert store.put("TopicA", b"m0002").status is PutMessageStatus.PUT_OK
    assert body_heads(store) == [b"m0000", b"m0002"]


def test_a_checkpoint_that_cannot_be_made_is_an_error_not_a_crash(tiny_fs):
    fill(tiny_fs / "filler")
    # a sparse checkpoint written through its mapping would kill the process with SIGBUS
    with pytest.raises(OSError) as raised:
        StoreCheckpoint(str(tiny_fs / "checkpoint")).physic_msg_timestamp = 1
    assert raised.value.errno == errno.ENOSPC


def test_a_config_file_rewrite_on_a_full_disk_keeps_the_old_file(tiny_fs):
    path = tiny_fs / "config" / "consumerOffset.json"
    write_file_atomically(path, '{"offsetTable": {}}')
    fill(tiny_fs / "filler")
    with pytest.raises(OSError) as raised:
        write_file_atomically(path, '{"offsetTable": {"TopicA@G": {"0": 7}}}' + " " * 64 * 1024)
    assert raised.value.errno == errno.ENOSPC
    assert path.read_text() == '{"offsetTable": {}}'
    assert sorted(p.name for p in path.parent.iterdir()) == ["consumerOffset.json"]  # no temp left


def test_a_timer_log_file_that_cannot_be_made_writes_nothing(tiny_fs):
    timer_log = TimerLog(str(tiny_fs / "timerlog"), 64 * UNIT_SIZE)
    timer_log.load()
    for i in range(64):  # the first file, full
        timer_log.append(-1, i, 1000 + i, i * 100, 100, i)
    fill(tiny_fs / "filler")
    with pytest.raises(OSError) as raised:
        timer_log.append(-1, 64, 1064, 6400, 100, 64)
    assert raised.value.errno == errno.ENOSPC and timer_log.write_pos == 64 * UNIT_SIZE
    (tiny_fs / "filler").unlink()
    assert timer_log.append(-1, 64, 1064, 6400, 100, 64) == 64 * UNIT_SIZE
    assert timer_log.read(64 * UNIT_SIZE)[3] == 6400
    timer_log.close()


def test_a_slave_queues_what_it_copied_once_space_is_back(tiny_fs, tmp_path, open_store):
    master = open_store(tmp_path / "master", **TINY_FILES)
    slave = open_store(tiny_fs / "slave", broker_role="SLAVE", **TINY_FILES)
    assert master.put("TopicA", b"m0000").status is PutMessageStatus.PUT_OK
    offset = slave.append_replica(0, master.replica_view(0, 1 << 20))  # the slave's CommitLog file exists
    assert master.put("TopicB", b"b0000").status is PutMessageStatus.PUT_OK
    assert master.put("TopicB", b"b0001").status is PutMessageStatus.PUT_OK
    fill(tiny_fs / "filler")
    # the bytes land in the CommitLog file; TopicB's first ConsumeQueue file cannot be made
    with pytest.raises(OSError) as raised:
        slave.append_replica(offset, master.replica_view(offset, 1 << 20))
    assert raised.value.errno == errno.ENOSPC
    assert slave.commit_log.get_max_offset() == master.commit_log.get_max_offset()
    assert body_heads(slave, topic="TopicB") == []
    with pytest.raises(OSError):
        slave.dispatch_replica()  # still full: still not skipped
    (tiny_fs / "filler").unlink()
    slave.dispatch_replica()
    assert body_heads(slave, topic="TopicB") == [b"b0000", b"b0001"]
    assert slave.reput_offset == master.commit_log.get_max_offset()
