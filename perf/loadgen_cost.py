"""What rmq-perf's load generator costs per message, beside redis-benchmark's, against one
redis-server (appendfsync everysec) with the same 1 KiB ``XADD rmq-perf MAXLEN ~ 200000 * body ...``
over one connection (not part of the test suite).

    PYTHONPATH=src python perf/loadgen_cost.py [--in-flight 1,16,64] [--seconds 3] [--repeat 3]

Per round and depth, one after the other: ``rmq.perf.load`` with the compiled engine, with the
Python engine, then ``redis-benchmark -c 1 -P N``. For each: XADDs acked per second, the
generator's own CPU microseconds per message (its worker process's CPU; redis-benchmark's user +
system time as a child of this one) and the server's (every thread of redis-server, from /proc).
Each figure is the median over ``--repeat`` rounds.

The two keep N in flight differently: rmq-perf sends a request for every answer (always N
outstanding), redis-benchmark writes N and waits for all N replies before the next N (N, then
draining to 0). At 1 in flight they are the same load.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

from cost_per_message import counters

from rmq.perf.load import ENGINES, LoadSpec, run_load
from rmq.perf.peers import REDIS_MAXLEN, REDIS_STREAM, PeerServer

SIZE = 1024
KINDS = (*(f"rmq-perf {e}" for e in ENGINES), "redis-benchmark")


def rmq_perf(engine: str, port: int, in_flight: int, seconds: float) -> tuple[float, float]:
    """(msgs/s, generator CPU us per message) of one rmq-perf run."""
    spec = LoadSpec("redis", "127.0.0.1", port, "unused", size=SIZE, in_flight=in_flight, workers=1,
                    duration=seconds, interval=seconds, warmup=0.3, engine=engine)  # fmt: skip
    report = run_load(spec, lambda *_: None)
    n = max(report.acked, 1)
    return report.acked / seconds, report.cpu_s / n * 1e6


def redis_benchmark(port: int, in_flight: int, seconds: float, rate_guess: float) -> tuple[float, float]:
    """(msgs/s, CPU us per message) of one ``redis-benchmark -c 1 -P N`` run of about ``seconds``."""
    requests = max(1000, int(rate_guess * seconds))
    argv = ["redis-benchmark", "-p", str(port), "-c", "1", "-P", str(in_flight), "-n", str(requests), "-q",
            "XADD", REDIS_STREAM.decode(), "MAXLEN", "~", REDIS_MAXLEN.decode(), "*", "body", "x" * SIZE]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True)
    elapsed = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return requests / elapsed, cpu / requests * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-flight", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        print("redis-server / redis-benchmark not installed", file=sys.stderr)
        return 1
    depths = [int(n) for n in args.in_flight.split(",")]
    figures: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    with PeerServer("redis", "ASYNC_FLUSH") as server:
        assert server.proc is not None
        for _ in range(args.repeat):
            for n in depths:
                rate_guess = 0.0
                for kind in KINDS:
                    before = counters(server.proc.pid)[2]
                    if kind == "redis-benchmark":
                        rate, gen_us = redis_benchmark(server.port, n, args.seconds, rate_guess)
                        sent = rate * args.seconds  # redis-benchmark sent all its requests in about that
                    else:
                        rate, gen_us = rmq_perf(kind.split()[1], server.port, n, args.seconds)
                        rate_guess = max(rate_guess, rate)
                        sent = rate * (args.seconds + 0.3)  # the warm-up's XADDs cost the server too
                    server_us = (counters(server.proc.pid)[2] - before) / max(sent, 1) * 1e6
                    figures.setdefault((kind, n), []).append((rate, gen_us, server_us))
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores; medians of {args.repeat}")
    print(f"{'generator':18s} {'in-fl':>5s} {'XADD/s':>9s} {'gen us/msg':>10s} {'redis us/msg':>12s}")
    for n in depths:
        for kind in KINDS:
            runs = figures[(kind, n)]
            rate, gen_us, server_us = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"{kind:18s} {n:5d} {rate:9.0f} {gen_us:10.2f} {server_us:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
