"""IndexFile benchmark: key puts through the store's C path and through put_key, then queries.

    PYTHONPATH=src python perf/bench_index.py [--keys 2000000] [--runs 5]

Each run uses a fresh index directory with the default file geometry (5,000,000 slots,
20,000,000 entries: one 420 MB file, fallocated), so page faults of a new file are included.
Keys are 32-hex-char UNIQ_KEYs, one per message, as a producer sets them. Prints medians.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time

from rmq.store._index import IndexService

TOPIC = "BenchTopic"
T0 = 1_700_000_000_000
MSG_SIZE = 1200  # CommitLog offsets step by a typical 1 KiB-body record


def uniq_keys(n: int) -> list[bytes]:
    return [b"7F0000010F2C18B4AAC2%012X" % i for i in range(n)]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_once(keys: list[bytes], py_keys: int, queries: int) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="rmq-bench-index-")
    try:
        svc = IndexService(root)
        svc.load(True)
        n = len(keys)
        c_path = timed(lambda: svc.build_index_batch(TOPIC.encode(), keys, 0, MSG_SIZE, T0))
        str_keys = [f"py-{i}" for i in range(py_keys)]
        first = n * MSG_SIZE

        def put_from_python():
            for i, key in enumerate(str_keys):
                svc.put_key(TOPIC, key, first + i * MSG_SIZE, T0)

        py_path = timed(put_from_python)
        probe = [keys[random.randrange(n)].decode() for _ in range(queries)]

        def query_all():
            for key in probe:
                svc.query(TOPIC, key, 32, 0, 2**62)

        query_time = timed(query_all)
        flush_time = timed(svc.flush)
        svc.shutdown()
        return {
            "build_index (C path) keys/s": n / c_path,
            "put_key (Python) keys/s": py_keys / py_path,
            "query keys/s": queries / query_time,
            "flush s": flush_time,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=2_000_000, help="keys per run through the C path")
    parser.add_argument("--py-keys", type=int, default=200_000, help="keys per run through put_key")
    parser.add_argument("--queries", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    random.seed(1)
    keys = uniq_keys(args.keys)
    results = [run_once(keys, args.py_keys, args.queries) for _ in range(args.runs)]
    print(
        f"{args.runs} runs, {args.keys:,} keys via build_index, {args.py_keys:,} via put_key, "
        f"{args.queries:,} queries; median (min..max):"
    )
    for name in results[0]:
        values = [r[name] for r in results]
        fmt = "{:,.0f}" if "/s" in name else "{:.3f}"
        print(
            f"  {name:30s} {fmt.format(statistics.median(values)):>14s}  "
            f"({fmt.format(min(values))}..{fmt.format(max(values))})"
        )


if __name__ == "__main__":
    main()
