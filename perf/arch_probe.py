"""The SYNC_FLUSH design without Python: ``arch_probe.c`` in its four shapes against Redis (appendfsync always).

Issue 12 asks for SYNC_FLUSH single sends at >= 1.0x Redis at 1, 16 and 64 in flight. Our broker differs
from Redis in two ways at once: its loop is Python, and it hands every flush round to a flush thread and
back (the loop never waits for the disk), where Redis fsyncs on its only thread. This probe separates
them: the same durable-append server in C, once with Redis's shape (``inline``: one thread waits for the
disk) and once with rmq's (``thread``: loop -> flush thread -> eventfd -> loop), appending through a
mapping + msync (``mmap``, rmq's CommitLog, the next 1 MiB chunk prefaulted as rmq does), write() +
fdatasync (``write``, Redis's AOF) or one pwrite per command into the fallocated file + fdatasync
(``pwrite``, a put path that copies records in; ``pwrite-sparse`` into a file sized by ftruncate, not
fallocated). Every side is
driven by ``redis-benchmark -c 1 -P N`` with the same 1 KiB XADD, interleaved round by round, so the
ratios compare equal loads on the same disk minutes.

    python perf/arch_probe.py [--in-flight 1,16,64] [--repeat 5] [--requests 20000] [--shapes "thread mmap,..."]

It needs a C compiler, redis-server and redis-benchmark; results: docs/sync-flush.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_broker import free_port, wait_for_port
from bench_vs_redis import redis_benchmark, running_redis

SHAPES = "inline mmap,thread mmap,inline write,thread write,thread pwrite"


def build() -> str:
    """Compile arch_probe.c into a temp dir: the binary's path."""
    out = os.path.join(tempfile.mkdtemp(prefix="rmq-arch-probe-"), "arch_probe")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "arch_probe.c")
    subprocess.run(["cc", "-O2", "-pthread", "-o", out, source], check=True)
    return out


@contextlib.contextmanager
def running_probe(binary: str, shape: str) -> Iterator[int]:
    root = tempfile.mkdtemp(prefix="rmq-arch-probe-store-")
    port = free_port()
    proc = subprocess.Popen([binary, str(port), root, *shape.split()], stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        yield port
    finally:
        proc.kill()
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", default="1,16,64")
    parser.add_argument(
        "--shapes", default=SHAPES, help="comma list of 'inline|thread mmap|write|pwrite|pwrite-sparse'"
    )
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (medians printed)")
    parser.add_argument(
        "--requests", type=int, default=20000, help="XADDs per redis-benchmark run (x in-flight / 4 above 4)"
    )
    args = parser.parse_args()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        print("redis-server / redis-benchmark not installed", file=sys.stderr)
        return 1
    binary = build()
    shapes = args.shapes.split(",")
    depths = [int(d) for d in args.in_flight.split(",")]
    rates: dict[tuple[str, int], list[float]] = {}
    for _round in range(args.repeat):
        for depth in depths:
            requests = args.requests * max(1, depth // 4) if depth > 1 else args.requests // 4
            with running_redis() as port:
                rates.setdefault(("redis", depth), []).append(redis_benchmark(port, depth, requests))
            for shape in shapes:
                with running_probe(binary, shape) as port:
                    rates.setdefault((shape, depth), []).append(redis_benchmark(port, depth, requests))
    for depth in depths:
        redis = rates["redis", depth]
        print(f"in flight {depth:3}  redis always   {statistics.median(redis):>9,.0f} msgs/s")
        for shape in shapes:
            mine = rates[shape, depth]
            ratio = statistics.median(m / r for m, r in zip(mine, redis, strict=True))
            print(
                f"in flight {depth:3}  {shape:14} {statistics.median(mine):>9,.0f} msgs/s  {ratio:.2f}x redis per round"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
