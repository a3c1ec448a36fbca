"""SYNC_FLUSH single sends against Redis Streams with ``appendfsync always``, at equal concurrency over
one connection (1 KiB, every message durable before its answer), the runs interleaved.

    PYTHONPATH=src python perf/bench_vs_redis.py [--in-flight 1,16,64] [--seconds 3] [--repeat 3] [--json]
        [--base OTHER_CHECKOUT/src]

Per round and depth, one after the other: rmq (``perf/bench_broker.py``'s raw pipelined sender
against an ``rmq-broker`` with flushDiskType=SYNC_FLUSH), then Redis driven by ``redis-benchmark -c 1
-P N`` (C; it writes N commands and waits for their N replies before the next N), then Redis driven
by the same Python pipeliner as rmq (RESP instead of remoting frames: the same client cost on both
sides). Both stores live in temp dirs of one file system. Each figure is the median over
``--repeat`` rounds, with its ratio to rmq. Without ``redis-server`` on PATH only rmq is measured.
``--json`` prints the figures for perf/compare_revisions.py (``--bench vs_redis``), which then
measures Redis once per build as well: a drift between the two builds' Redis figures is the noise.

On a shared VM whose disk is shared too, an fsync's cost drifts by 2-5x within a minute, more than
any change to compare. ``--base SRC`` runs a second broker from another build (its ``src`` dir, e.g.
``git archive main`` built in place) next to this one, and every round measures the two brokers and
Redis back to back with short runs (``--seconds 0.5 --repeat 15``): besides the medians, each other
side's figure is given as the median of its per-round ratios to rmq, which a drift that lasts
longer than one round cancels out of.

Redis writes each command to its append-only file and fdatasyncs it before the replies of that
event-loop iteration go out (appendfsync always): one fdatasync serves every command read in one go.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from bench_broker import BODY, Pipeline, free_port, running_broker, sends_per_second, wait_for_port
from report import JSON_HELP, Report

STREAM_KEY = b"s"
XADD = b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nf\r\n$%d\r\n%s\r\n" % (len(BODY), BODY)


class RespPipeline(Pipeline):
    """``Pipeline`` speaking RESP: answers are Redis replies, (first line, b"") each."""

    def answers(self) -> list[tuple[bytes, bytes]]:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("redis closed the connection")
        buf = self.buffer
        buf += data
        out = []
        pos = 0
        while True:
            end = buf.find(b"\r\n", pos)
            if end < 0:
                break
            line = bytes(buf[pos:end])
            if line[:1] == b"$" and line != b"$-1":
                last = end + 2 + int(line[1:]) + 2
                if last > len(buf):
                    break
            else:
                last = end + 2
            out.append((line, b""))
            pos = last
        del buf[:pos]
        return out


def redis_pipelined(port: int, in_flight: int, seconds: float) -> float:
    """XADDs per second from the Python pipeliner, ``in_flight`` outstanding; only stream ids count."""
    pipe = RespPipeline("127.0.0.1", port)
    try:
        started = time.perf_counter()
        ok = pipe.run(lambda: XADD, in_flight, seconds, lambda line, _body: int(line[:1] == b"$"))
        return ok / (time.perf_counter() - started)
    finally:
        pipe.close()


def redis_benchmark(port: int, in_flight: int, requests: int) -> float:
    """XADDs per second from ``redis-benchmark -c 1 -P in_flight`` (its CSV line's rps)."""
    args = ["redis-benchmark", "-p", str(port), "-c", "1", "-P", str(in_flight), "-n", str(requests), "--csv"]
    out = subprocess.run(
        [*args, "XADD", STREAM_KEY.decode(), "*", "f", BODY.decode()],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    row = [line for line in out.splitlines() if line.startswith('"XADD')][-1]
    return float(row.split('","')[1])


@contextlib.contextmanager
def running_redis() -> Iterator[int]:
    """A ``redis-server`` with appendonly yes and appendfsync always on a temp dir: its port."""
    root = tempfile.mkdtemp(prefix="rmq-bench-redis-")
    port = free_port()
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", root, "--save", ""]
    args += ["--appendonly", "yes", "--appendfsync", "always", "--logfile", f"{root}/redis.log"]
    proc = subprocess.Popen(args)
    try:
        wait_for_port(port, proc)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def running_base(src: str) -> Iterator[int]:
    """``running_broker("SYNC_FLUSH")`` from the build whose ``src`` dir is ``src``: its port."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.path.abspath(src)
    try:
        context = running_broker("SYNC_FLUSH")
        port, _namesrv = context.__enter__()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        yield port
    finally:
        context.__exit__(None, None, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one run")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (the median is printed)")
    parser.add_argument("--in-flight", default="1,16,64", help="requests in flight over the one connection")
    parser.add_argument("--base", help="the src dir of another build: its broker is measured alongside")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    args = parser.parse_args()
    depths = [int(d) for d in args.in_flight.split(",")]
    report = Report(args.json)
    with_redis = shutil.which("redis-server") is not None and shutil.which("redis-benchmark") is not None
    if not with_redis:
        report.line("redis-server / redis-benchmark not installed: rmq only")
    report.line(f"1 KiB, durable per message, one connection; {args.seconds:g} s runs, median of {args.repeat} rounds")
    sides = ["rmq SYNC_FLUSH"] + (["rmq base"] if args.base else [])
    sides += ["redis-benchmark", "redis same client"] if with_redis else []
    rates: dict[tuple[str, int], list[float]] = {(side, depth): [] for side in sides for depth in depths}
    with contextlib.ExitStack() as stack:
        port, _namesrv = stack.enter_context(running_broker("SYNC_FLUSH"))
        base_port = stack.enter_context(running_base(args.base)) if args.base else 0
        redis_port = stack.enter_context(running_redis()) if with_redis else 0
        for depth in depths:  # warm-up: files mapped and grown, the stream created
            for each in (port, base_port) if args.base else (port,):
                sends_per_second(each, depth, False, 0.5)
            if with_redis:
                redis_pipelined(redis_port, depth, 0.5)
        for _ in range(args.repeat):
            for depth in depths:
                rates["rmq SYNC_FLUSH", depth].append(sends_per_second(port, depth, False, args.seconds))
                if args.base:
                    rates["rmq base", depth].append(sends_per_second(base_port, depth, False, args.seconds))
                if with_redis:
                    guess = statistics.median(rates["redis same client", depth] or [2000.0 * depth**0.5])
                    requests = max(1000, int(guess * args.seconds) // depth * depth)
                    rates["redis-benchmark", depth].append(redis_benchmark(redis_port, depth, requests))
                    rates["redis same client", depth].append(redis_pipelined(redis_port, depth, args.seconds))
    for depth in depths:
        ours = statistics.median(rates["rmq SYNC_FLUSH", depth])
        for side in sides:
            rate = statistics.median(rates[side, depth])
            report.figure(f"{side} in flight {depth}", rate, "msgs/s")
            spread = f"{min(rates[side, depth]):,.0f}..{max(rates[side, depth]):,.0f}"
            ratio = ""
            if side != sides[0]:
                paired = statistics.median(
                    a / b for a, b in zip(rates[sides[0], depth], rates[side, depth], strict=True)
                )
                report.figure(f"rmq / {side} in flight {depth}", paired, "x")
                ratio = f"  rmq/this {ours / rate:.2f}x, per round {paired:.2f}x"
            report.line(f"in flight {depth:3d}  {side:18s} {rate:10,.0f} msgs/s  ({spread}){ratio}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
