"""CommitLog digests: a byte-identical copy digests the same, range by range; one changed byte
changes exactly the digest of its range."""

from __future__ import annotations

import shutil

import pytest

from rmq.protocol.layout import REC_BORNTIMESTAMP
from rmq.protocol.replica import RangeDigest
from rmq.store.digest import commit_log_digests, next_range
from tests.helpers.store import COMMIT_LOG_FILE_SIZE

RANGE = 16 * 1024


def fill(store, count: int = 300) -> list[int]:
    """Puts ``count`` messages; their CommitLog offsets."""
    return [
        store.put("TopicA", b"body-%d-" % i + b"x" * 500, properties={"TAGS": "a"}).wrote_offset for i in range(count)
    ]


def test_a_copy_digests_the_same_and_a_changed_byte_is_found(open_store, tmp_path):
    store = open_store(tmp_path / "master")
    offsets = fill(store)
    end = store.get_max_phy_offset()
    assert end > 2 * COMMIT_LOG_FILE_SIZE, "the log spans several files (with end-of-file blanks)"
    digests = commit_log_digests(store, 0, end, RANGE)
    assert [d.offset for d in digests] == list(range(0, end, RANGE))
    assert sum(d.length for d in digests) == end
    store.shutdown()

    replica_dir = tmp_path / "replica"
    shutil.copytree(tmp_path / "master" / "commitlog", replica_dir / "commitlog")
    replica = open_store(replica_dir)
    assert commit_log_digests(replica, 0, end, RANGE) == digests

    # one byte of a record's born timestamp in the second file, changed behind the store's back (a
    # field no CRC covers, so recovery keeps the record and only the digest can tell)
    replica.shutdown()
    record = next(o for o in offsets if o >= COMMIT_LOG_FILE_SIZE + 3 * RANGE // 2)
    target = record + REC_BORNTIMESTAMP + 4
    second = sorted((replica_dir / "commitlog").iterdir())[1]
    data = bytearray(second.read_bytes())
    data[target - COMMIT_LOG_FILE_SIZE] ^= 0xFF
    second.write_bytes(bytes(data))
    damaged = open_store(replica_dir)
    assert damaged.get_max_phy_offset() == end
    differing = [a.offset for a, b in zip(digests, commit_log_digests(damaged, 0, end, RANGE), strict=True) if a != b]
    assert differing == [target // RANGE * RANGE]


def test_ranges_are_aligned_and_clamped_to_what_the_log_holds(open_store):
    store = open_store()
    fill(store, 50)
    end = store.get_max_phy_offset()
    part = commit_log_digests(store, 1000, end + 10_000, RANGE)
    assert part[0].offset == 1000 and part[0].length == RANGE - 1000
    assert part[-1].offset + part[-1].length == end
    assert commit_log_digests(store, 0, 0, RANGE) == []
    whole = commit_log_digests(store, 0, end, RANGE)
    assert part[1:] == whole[1:], "the same aligned ranges, whatever the start"
    assert isinstance(whole[0], RangeDigest) and len(whole[0].digest) == 32
    with pytest.raises(ValueError, match="range size must be positive"):
        commit_log_digests(store, 0, end, 0)


def test_a_bounded_call_stops_after_its_ranges_or_bytes_and_the_next_call_goes_on(open_store):
    store = open_store()
    fill(store, 50)
    end = store.get_max_phy_offset()
    whole = commit_log_digests(store, 0, end, 1024)
    by_count = commit_log_digests(store, 0, end, 1024, max_ranges=5)
    assert by_count == whole[:5] and next_range(by_count, 1024) == 5 * 1024
    # no range begun once 3000 bytes are hashed: the third (which reaches 3072) is the last
    by_bytes = commit_log_digests(store, 0, end, 1024, max_bytes=3000)
    assert by_bytes == whole[:3]
    # the first range is hashed whatever its size, and the rest follows from where it stopped
    pieces, start = [], 0
    while start < end:
        piece = commit_log_digests(store, start, end, 4096, max_bytes=1)
        assert len(piece) == 1
        pieces += piece
        start = next_range(piece, 4096)
    assert pieces == commit_log_digests(store, 0, end, 4096)
    assert next_range([], 4096) is None
