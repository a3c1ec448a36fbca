"""Store benchmarks (not part of the test suite): python perf/bench_store.py [--rounds N] [--json].

1 KiB bodies with realistic properties (TAGS, KEYS, UNIQ_KEY) so dispatch is included. Each figure
is the median of ``--rounds`` runs after one warm-up run (on a VM the first touch of fresh memory
costs several times more than reused page cache; the warm-up absorbs it).
``--json`` prints the figures as one object for perf/compare_revisions.py (see perf/report.py).
"""

from __future__ import annotations

import argparse
import mmap
import os
import queue
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time

import isal.isal_zlib as isal_zlib
from report import JSON_HELP, Report

from rmq.store import MessageStore, MessageStoreConfig

try:
    from rmq.protocol.message import encode_properties
except ImportError:  # a build from before rmq.protocol (e78e7a7), as perf/compare_revisions.py may measure
    from rmq.message import encode_properties

BODY = b"x" * 1024
TOPIC = "BenchTopic"
QUEUES = 8


def properties(n: int) -> list[bytes]:
    return [
        encode_properties({"TAGS": "TagA", "KEYS": f"order-{i}", "UNIQ_KEY": f"7F00000100002A9F{i:016X}"})
        for i in range(n)
    ]


def open_store(root: str, **settings) -> MessageStore:
    return MessageStore(MessageStoreConfig(store_path_root_dir=root, **settings)).start()


def bench_put_async(root: str, props: list[bytes]) -> float:
    store = open_store(root)
    put = store.put_message
    t = time.perf_counter()
    for i, p in enumerate(props):
        put(TOPIC, i & 7, BODY, p)
    rate = len(props) / (time.perf_counter() - t)
    store.shutdown()
    return rate


def bench_naive_append(root: str, props: list[bytes]) -> float:
    """The same record layout appended by plain Python: struct.pack + concatenation into an mmap."""
    path = os.path.join(root, "naive")
    size = (len(props) * (91 + 1024 + 64 + 80)) // 4096 * 4096 + 4096
    with open(path, "w+b") as f:
        f.truncate(size)
        m = mmap.mmap(f.fileno(), size)
    head = struct.Struct(">iIiiiqqiqiiqiiiqi")
    topic = TOPIC.encode()
    queue_offsets = [0] * QUEUES
    pos = 0
    t = time.perf_counter()
    for i, p in enumerate(props):
        q = i & 7
        total = 91 + len(BODY) + len(topic) + len(p)
        now = int(time.time() * 1000)
        record = (
            head.pack(
                total,
                0xDAA320A7,
                isal_zlib.crc32(BODY) & 0x7FFFFFFF,
                q,
                0,
                queue_offsets[q],
                pos,
                0,
                now,
                0x7F000001,
                0,
                now,
                0x7F000001,
                10911,
                0,
                0,
                len(BODY),
            )
            + BODY
            + bytes([len(topic)])
            + topic
            + len(p).to_bytes(2, "big")
            + p
        )
        m[pos : pos + total] = record
        queue_offsets[q] += 1
        pos += total
    rate = len(props) / (time.perf_counter() - t)
    m.close()
    os.unlink(path)
    return rate


def bench_put_sync(root: str, props: list[bytes], in_flight: int = 256) -> tuple[float, float]:
    store = open_store(root, flush_disk_type="SYNC_FLUSH")
    put = store.put_message
    # The window of puts in flight is a C-implemented queue of tokens: threading.Semaphore is
    # Python code (a Condition and a lock), whose per-completion cost and wake-ups of the putting
    # thread would be measured instead of the store.
    window: queue.SimpleQueue = queue.SimpleQueue()
    for _ in range(in_flight):
        window.put(None)
    take, give_back = window.get, window.put
    done = threading.Event()
    remaining = [len(props)]

    def on_durable(result):
        give_back(None)
        remaining[0] -= 1
        if remaining[0] == 0:
            done.set()

    flushes = store.group_commit_flushes
    t = time.perf_counter()
    for i, p in enumerate(props):
        take()
        put(TOPIC, i & 7, BODY, p, callback=on_durable)
    done.wait(60)
    elapsed = time.perf_counter() - t
    flushes = store.group_commit_flushes - flushes
    store.shutdown()
    return len(props) / elapsed, flushes / elapsed


def bench_get(root: str, props: list[bytes]) -> float:
    store = open_store(root)
    for i, p in enumerate(props):
        store.put_message(TOPIC, i & 7, BODY, p)
    get = store.get_message
    n = 0
    t = time.perf_counter()
    for q in range(QUEUES):
        offset = 0
        while True:
            r = get("g", TOPIC, q, offset, 32)
            if r.status_code:
                break
            n += len(r.messages)
            offset = r.next_begin_offset
    rate = n / (time.perf_counter() - t)
    store.shutdown()
    return rate


def bench_recovery(root: str) -> tuple[float, float, str]:
    """Crash recovery of one full 1 GiB CommitLog file: CRC scan + re-dispatch of every record."""
    store = open_store(root)
    props = properties(1000)
    i = 0
    while len(store.commit_log.mapped_files) < 2:
        store.put_message(TOPIC, i & 7, BODY, props[i % 1000])
        i += 1
    store.shutdown()
    os.unlink(os.path.join(root, "checkpoint"))
    shutil.rmtree(os.path.join(root, "consumequeue"))
    open(os.path.join(root, "abort"), "wb").close()
    t = time.perf_counter()
    store = open_store(root)
    elapsed = time.perf_counter() - t
    report = store.recovery_report
    size = store.commit_log.get_max_offset()
    store.shutdown()
    return size / elapsed / 1e9, i / elapsed, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=400_000)
    parser.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--only", choices=["put", "sync", "get", "recovery"], help="run one benchmark")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    args = parser.parse_args()
    props = properties(args.messages)
    results: dict[str, list] = {}
    report = Report(args.json)

    def run(name, fn, *fn_args):
        values = []
        for r in range(args.rounds + 1):
            root = tempfile.mkdtemp(prefix="rmq-bench-", dir=args.dir)
            try:
                value = fn(root, *fn_args)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            if r:
                values.append(value)
        results[name] = values
        return values

    if args.only in (None, "put"):
        with report.section("put"):
            run("naive", bench_naive_append, props)
            run("async", bench_put_async, props)
            run("async_tags_only", bench_put_async, [encode_properties({"TAGS": "TagA"})] * len(props))
            put_async, naive = statistics.median(results["async"]), statistics.median(results["naive"])
            tags_only = statistics.median(results["async_tags_only"])
            report.figure("put ASYNC_FLUSH, 1 thread", put_async, "msgs/s")
            report.figure("put naive pure-Python append", naive, "msgs/s")
            report.figure("put ASYNC_FLUSH, TAGS only", tags_only, "msgs/s")
            report.line(
                f"put ASYNC_FLUSH, 1 thread:       {put_async:>12,.0f} msgs/s "
                f"(naive pure-Python append, same run: {naive:,.0f} msgs/s; "
                f"TAGS only, no index keys: {tags_only:,.0f} msgs/s)"
            )
    if args.only in (None, "sync"):
        with report.section("sync"):
            sync = run("sync", bench_put_sync, props[:200_000])
            rate, flushes = statistics.median(s[0] for s in sync), statistics.median(s[1] for s in sync)
            report.figure("put SYNC_FLUSH, 256 in flight", rate, "msgs/s")
            report.figure("put SYNC_FLUSH, 256 in flight, flushes", flushes, "flushes/s")
            report.line(f"put SYNC_FLUSH, 256 in flight:   {rate:>12,.0f} msgs/s, {flushes:,.0f} flushes/s")
    if args.only in (None, "get"):
        with report.section("get"):
            run("get", bench_get, props)
            get = statistics.median(results["get"])
            report.figure("get, batches of 32", get, "msgs/s")
            report.line(f"get, batches of 32:              {get:>12,.0f} msgs/s")
    if args.only in (None, "recovery"):
        with report.section("recovery"):
            root = tempfile.mkdtemp(prefix="rmq-bench-", dir=args.dir)
            try:
                gbps, rps, recovery_report = bench_recovery(root)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            # one run, not a median: a 1 GiB file is written for it
            report.figure("crash recovery of a 1 GiB CommitLog", gbps, "GB/s")
            report.figure("crash recovery of a 1 GiB CommitLog, records", rps, "records/s")
            report.line(
                f"crash recovery of a 1 GiB CommitLog: {gbps:.2f} GB/s, {rps:,.0f} records/s ({recovery_report})"
            )
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
