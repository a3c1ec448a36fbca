"""SIGKILL a SYNC_FLUSH writer at random moments; every acknowledged message must survive intact."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmq.protocol.record import decode_record
from rmq.store import GetMessageStatus, MessageStore, MessageStoreConfig

ROUNDS = 24
CHILD = Path(__file__).with_name("crash_child.py")


def run_and_kill(store_dir: Path, round_no: int, rng: random.Random) -> list[tuple[int, int, str]]:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(store_dir), str(round_no)], stdout=subprocess.PIPE, env=dict(os.environ)
    )
    out = b""
    try:
        kill_at = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.01)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
                if kill_at is None and b"started\n" in out:
                    kill_at = time.monotonic() + rng.uniform(0.01, 0.12)
            if kill_at is not None and time.monotonic() >= kill_at:
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(10)
        out += proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert b"started\n" in out, f"child did not start (exit {proc.returncode})"
    acks = []
    for line in out.decode().splitlines():
        if line == "started" or not line.endswith(tuple("012")):
            continue  # a line cut by the kill is not an acknowledgement
        queue_id, offset, key = line.split()
        acks.append((int(queue_id), int(offset), key))
    return acks


def verify(
    store_dir: Path, acked: dict[tuple[int, int], str], checked: dict[tuple[int, int], str], decode_all: bool
) -> None:
    """Reopen after the kill: queue offsets contiguous, records intact (CRC), every ack present.
    Records already decoded in earlier rounds are only re-decoded when ``decode_all``."""
    config = MessageStoreConfig(
        store_path_root_dir=str(store_dir),
        mapped_file_size_commit_log=32 * 1024,
        mapped_file_size_consume_queue=40 * 20,
        max_hash_slot_num=512,
        max_index_num=4096,
    )
    with MessageStore(config) as store:
        assert not store.last_exit_ok
        present = set()
        for queue_id in range(3):
            offset = 0
            while True:
                got = store.get_message("g", "CrashTopic", queue_id, offset, 32)
                if got.status is not GetMessageStatus.FOUND:
                    break
                for view, queue_offset in zip(got.messages, got.queue_offsets, strict=True):
                    present.add((queue_id, queue_offset))
                    if not decode_all and (queue_id, queue_offset) in checked:
                        continue
                    m = decode_record(view)  # CRC checked: no half-written record comes back
                    assert m.queue_offset == queue_offset and m.queue_id == queue_id
                    key = m.properties["KEYS"]
                    assert m.body.startswith(key.encode() + b"|")
                    assert len(set(m.body[len(key) + 1 :])) <= 1
                    assert checked.setdefault((queue_id, queue_offset), key) == key
                offset = got.next_begin_offset
            # contiguous queue offsets, nothing readable past the end
            assert sorted(o for q, o in present if q == queue_id) == list(range(offset))
            assert got.status in (GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.NO_MESSAGE_IN_QUEUE)
        for position, key in acked.items():
            assert position in present and checked[position] == key, f"acknowledged {key} at {position} lost"


@pytest.mark.slow
def test_sigkill_during_sync_flush_puts_loses_nothing_acknowledged(store_dir):
    rng = random.Random(20240601)
    acked: dict[tuple[int, int], str] = {}
    checked: dict[tuple[int, int], str] = {}
    total = 0
    for round_no in range(ROUNDS):
        acks = run_and_kill(store_dir, round_no, rng)
        total += len(acks)
        for queue_id, offset, key in acks:
            acked[(queue_id, offset)] = key
        verify(store_dir, acked, checked, decode_all=round_no == ROUNDS - 1)
    assert total > ROUNDS * 10, f"only {total} acknowledgements in {ROUNDS} rounds"
    print(f"{total} acknowledged, {len(acked)} checked")
