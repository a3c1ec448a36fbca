"""A full disk refuses puts with CREATE_MAPPED_FILE_FAILED, keeps the store consistent, and
writes resume once space returns. Runs on a tiny tmpfs mounted for the test."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.protocol.record import decode_record
from rmq.store import GetMessageStatus, PutMessageStatus


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up (needs root): {proc.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_disk_full_refuses_then_resumes(tiny_fs, open_store):
    # tiny_fs first: it is unmounted after the store is shut down
    filler = tiny_fs / "filler"
    filler.write_bytes(b"\1" * 200 * 1024)
    store = open_store(
        tiny_fs / "store",
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=64,
        max_index_num=256,
    )
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
    store = open_store(
        tiny_fs / "store",
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=64,
        max_index_num=256,
    )
    assert store.last_exit_ok and store.get_max_offset_in_queue("TopicA", 0) == len(stored) + 1
