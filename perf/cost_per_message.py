"""What one durable send costs each process, rmq SYNC_FLUSH beside Redis ``appendfsync always``, under
the load ``rmq-perf matrix`` puts on them (not part of the test suite).

    PYTHONPATH=src python perf/cost_per_message.py [--in-flight 1,16,64] [--workers 2] [--seconds 2] [--repeat 2]

Per run, for the server process (every thread of it): CPU microseconds per acked message (user +
system, from /proc), voluntary and involuntary context switches per message; for the load generator
(``rmq.perf.load``, the same worker code for both, only the protocol differs): CPU microseconds per
message. The runs alternate rmq, Redis, rmq, Redis, ... against one broker and one redis-server.

On a machine whose cores are shared, throughput follows CPU per message more than anything else:
every microsecond a side spends is one the other processes on the machine wait for, and every
context switch across cores costs an inter-processor interrupt, which is dear in a VM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from rmq.perf.cluster import RmqCell
from rmq.perf.load import LoadSpec, run_load
from rmq.perf.peers import PeerServer, available

TOPIC = "RmqPerfTopic"


def counters(pid: int) -> tuple[int, int, float]:
    """(voluntary, involuntary context switches over every thread, CPU seconds) of a process."""
    voluntary = involuntary = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    involuntary += int(line.split()[1])
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return voluntary, involuntary, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(system: str, port: int, pid: int, in_flight: int, workers: int, seconds: float) -> str:
    spec = LoadSpec(system, "127.0.0.1", port, TOPIC, in_flight=in_flight, workers=workers, duration=seconds)
    spec.interval = seconds
    before = counters(pid)
    report = run_load(spec, lambda *_: None)
    after = counters(pid)
    n = max(report.acked, 1)
    return (
        f"{system:5s} in flight {in_flight:3d}: {report.acked / seconds:9,.0f} msgs/s | server: "
        f"{(after[2] - before[2]) / n * 1e6:6.1f} us CPU, {(after[0] - before[0]) / n:5.2f} + "
        f"{(after[1] - before[1]) / n:4.2f} switches (voluntary + not) | generator {report.cpu_s / n * 1e6:5.1f} us CPU"
        " per message"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", default="1,16,64")
    parser.add_argument("--workers", type=int, default=2, help="load processes (= connections), as the matrix's")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        cell = stack.enter_context(RmqCell("SYNC_FLUSH", "standalone", TOPIC))
        assert cell.master is not None
        sides = [("rmq", int(cell.master_addr.rsplit(":", 1)[1]), cell.master.pid)]
        notice = available("redis")
        if notice:
            print(notice)
        else:
            redis = stack.enter_context(PeerServer("redis", "SYNC_FLUSH"))
            assert redis.proc is not None
            sides.append(("redis", redis.port, redis.proc.pid))
        for in_flight in (int(d) for d in args.in_flight.split(",")):
            for _ in range(args.repeat):
                for system, port, pid in sides:
                    print(measure(system, port, pid, in_flight, args.workers, args.seconds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
