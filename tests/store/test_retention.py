"""Retention: expired files at deleteWhen o'clock or at any hour on a disk fuller than
diskMaxUsedSpaceRatio, the oldest even unexpired above diskSpaceCleanForciblyRatio, never the file
being written; ConsumeQueue files and min offsets follow."""

from __future__ import annotations

import os
import time

from rmq.store import GetMessageStatus

HOUR_MS = 3_600_000


def at_hour(hour: int, days_later: int = 1) -> int:
    """A "now" (ms) ``days_later`` days ahead, at ``hour`` o'clock local time."""
    t = time.localtime(time.time() + days_later * 86400)
    return int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1)) * 1000)


def fill_files(store, n_files):
    while len(store.commit_log.mapped_files) < n_files:
        store.put("TopicA", b"x" * 900, queue_id=0)
    store.put("TopicA", b"last", queue_id=0)


def age(path: str, hours: float) -> None:
    t = time.time() - hours * 3600
    os.utime(path, (t, t))


def test_expired_files_go_at_delete_time_only(open_store):
    store = open_store(file_reserved_time=72, delete_when="04;16")
    fill_files(store, 5)
    files = store.commit_log.mapped_files
    for mf in files:
        age(mf.path, 100)
    # not o'clock: nothing goes
    assert store.clean_expired_files(now_ms=at_hour(10), disk_used_ratio=lambda: 0.1) == 0
    # 16 o'clock: every expired file but the one being written
    assert store.clean_expired_files(now_ms=at_hour(16), disk_used_ratio=lambda: 0.1) == len(files) - 1
    remaining = store.commit_log.mapped_files
    assert [mf.path for mf in remaining] == [files[-1].path]
    assert not any(os.path.exists(mf.path) for mf in files[:-1])
    assert store.get_min_phy_offset() == files[-1].file_from_offset
    assert store.put("TopicA", b"still writable").status.name == "PUT_OK"


def test_only_files_older_than_the_reserved_time_go(open_store):
    store = open_store(file_reserved_time=72, delete_when="04")
    fill_files(store, 5)
    files = store.commit_log.mapped_files
    age(files[0].path, 100)
    age(files[1].path, 80)
    age(files[2].path, 10)  # younger: it and everything after stays
    assert store.clean_expired_files(now_ms=at_hour(4), disk_used_ratio=lambda: 0.1) == 2
    assert store.commit_log.mapped_files[0].path == files[2].path


def test_a_fuller_disk_deletes_expired_files_at_any_hour(open_store):
    # above diskMaxUsedSpaceRatio, not o'clock: the expired files go, the young ones stay
    store = open_store(file_reserved_time=72, delete_when="04", disk_max_used_space_ratio=75)
    fill_files(store, 4)
    files = store.commit_log.mapped_files
    age(files[0].path, 100)
    assert store.clean_expired_files(now_ms=at_hour(12), disk_used_ratio=lambda: 0.80) == 1
    assert store.commit_log.mapped_files[0].path == files[1].path


def test_above_the_clean_forcibly_level_the_oldest_go_unexpired(open_store):
    store = open_store(disk_max_used_space_ratio=75, disk_space_clean_forcibly_ratio=0.85)
    fill_files(store, 4)
    files = store.commit_log.mapped_files
    usage = iter([0.9, 0.86, 0.84])  # one file less each time; below 0.85 young files stay
    deleted = store.clean_expired_files(now_ms=at_hour(12), disk_used_ratio=lambda: next(usage, 0.5))
    assert deleted == 2
    assert store.commit_log.mapped_files[0].path == files[2].path


def test_consume_queue_files_and_min_offsets_follow(open_store):
    store = open_store(delete_when="04")
    fill_files(store, 6)
    store.put("TopicB", b"only in the last file")
    cq = store.find_consume_queue("TopicA", 0)
    cq_files_before = cq.mapped_file_queue.mapped_files
    assert len(cq_files_before) > 2
    for mf in store.commit_log.mapped_files[:3]:
        age(mf.path, 100)
    assert store.clean_expired_files(now_ms=at_hour(4), disk_used_ratio=lambda: 0.1) == 3
    min_phy = store.get_min_phy_offset()
    min_offset = store.get_min_offset_in_queue("TopicA", 0)
    assert min_offset > 0
    entry = cq.get_entry(min_offset)
    assert entry[0] >= min_phy and cq.get_entry(min_offset - 1) is None or cq.get_entry(min_offset - 1)[0] < min_phy
    # whole ConsumeQueue files below the new min went
    remaining = cq.mapped_file_queue.mapped_files
    assert len(remaining) < len(cq_files_before)
    assert all(os.path.exists(mf.path) for mf in remaining)
    assert not os.path.exists(cq_files_before[0].path)
    too_small = store.get_message("g", "TopicA", 0, 0, 32)
    assert too_small.status is GetMessageStatus.OFFSET_TOO_SMALL and too_small.next_begin_offset == min_offset
    got = store.get_message("g", "TopicA", 0, min_offset, 32)
    assert got.status is GetMessageStatus.FOUND and got.queue_offsets[0] == min_offset
    assert store.get_min_offset_in_queue("TopicB", 0) == 0
    # min offsets survive a restart
    store.shutdown()
    store = open_store()
    assert store.get_min_offset_in_queue("TopicA", 0) == min_offset
    assert store.get_min_phy_offset() == min_phy
