"""SYNC_FLUSH rounds made by the event loop (syncFlushInlineMaxMicros) against the flush thread's, one
build, interleaved round by round, beside Redis ``appendfsync always`` (not part of the test suite).

    PYTHONPATH=src python perf/bench_flush_inline.py [--in-flight 1,16,64] [--seconds 2] [--repeat 5]
        [--bounds 500,0] [--no-redis]

Per in-flight depth and round: one broker per bound in ``--bounds`` (0: every round on the flush
thread), each driven by the C generator over one connection, then ``redis-benchmark -c 1 -P N``.
Prints msgs/s, the broker's CPU µs per message (every thread, from /proc), the share of the rounds
the loop made itself, and per bound the median of the per-round ratios to the first bound and to
Redis. The brokers and Redis live through the whole run (each on its own fresh store).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import sys
import tempfile

import orjson
from bench_broker import admin, exit_on_signal, sends_per_second, start_broker, stop_process
from bench_vs_redis import redis_benchmark, running_redis

from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rounds(port: int) -> tuple[int, int]:
    """(the loop's rounds, the flush thread's) so far."""
    _header, body = admin(port, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), with_body=True)
    table = orjson.loads(body)["table"]
    return int(table.get("flushInlineRounds", 0)), int(table.get("flushThreadRounds", table["commitLogFlushRounds"]))


def measure(proc, port: int, in_flight: int, seconds: float) -> tuple[float, float, float]:
    """(msgs/s, CPU µs per message, the loop's share of the rounds) of one run."""
    cpu, (inline, thread) = cpu_seconds(proc.pid), rounds(port)
    rate = sends_per_second(port, in_flight, False, seconds)
    cpu, (inline2, thread2) = cpu_seconds(proc.pid) - cpu, rounds(port)
    made = (inline2 - inline) + (thread2 - thread)
    return rate, cpu * 1e6 / max(1.0, rate * seconds), (inline2 - inline) / max(1, made)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bounds", default="500,0", help="syncFlushInlineMaxMicros of each broker")
    parser.add_argument("--no-redis", action="store_true")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, exit_on_signal)
    bounds = [int(b) for b in args.bounds.split(",")]
    with contextlib.ExitStack() as stack:
        brokers = []
        for bound in bounds:
            root = tempfile.mkdtemp(prefix="rmq-bench-inline-")
            stack.callback(shutil.rmtree, root, True)
            proc, port, _namesrv = start_broker(root, "SYNC_FLUSH", syncFlushInlineMaxMicros=str(bound))
            stack.callback(stop_process, proc)
            brokers.append((bound, proc, port))
        redis_port = None if args.no_redis else stack.enter_context(running_redis())
        print(
            f"1 KiB SYNC_FLUSH single sends, C generator, one connection; {args.seconds} s runs, {args.repeat} rounds"
        )
        for in_flight in (int(d) for d in args.in_flight.split(",")):
            runs: dict[int, list[tuple[float, float, float]]] = {bound: [] for bound in bounds}
            redis: list[float] = []
            for _ in range(args.repeat):
                for bound, proc, port in brokers:
                    runs[bound].append(measure(proc, port, in_flight, args.seconds))
                if redis_port is not None:
                    redis.append(
                        redis_benchmark(
                            redis_port, in_flight, max(2000, int(redis[-1] * args.seconds) if redis else 2000)
                        )
                    )
            first = runs[bounds[0]]
            for bound in bounds:
                rates = [r[0] for r in runs[bound]]
                vs_first = statistics.median(r[0] / f[0] for r, f in zip(runs[bound], first, strict=True))
                line = (
                    f"in flight {in_flight:3}  inline bound {bound:>6} us: {statistics.median(rates):9,.0f} msgs/s"
                    f"  {statistics.median(r[1] for r in runs[bound]):6.1f} us CPU/msg"
                    f"  loop's rounds {statistics.median(r[2] for r in runs[bound]):4.0%}"
                    f"  vs bound {bounds[0]}: {vs_first:.2f}x"
                )
                if redis:
                    line += f"  vs redis: {statistics.median(r / x for r, x in zip(rates, redis, strict=True)):.2f}x"
                    line += f" ({', '.join(f'{r / x:.2f}' for r, x in zip(rates, redis, strict=True))})"
                print(line, flush=True)
            if redis:
                print(
                    f"in flight {in_flight:3}  redis-benchmark always:   {statistics.median(redis):9,.0f} msgs/s",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
