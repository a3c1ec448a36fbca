"""A connection flood against one real ``rmq-broker``: how long it takes to hold 10,000 connections
opened at once, the broker's own memory (RssAnon) per idle connection, and what a producer sending
beside the flood sees (one send at a time, 3 s each, as a RocketMQ producer's sendMsgTimeout).

    PYTHONPATH=src python perf/bench_connections.py [--connections 10000] [--repeat 3] [--json]

Each round opens the connections with non-blocking connects from this process, waits until the
broker holds them all (its descriptors), then closes them and waits until it has closed them too.
Per figure the median over rounds. Needs an open-file limit above the connections (the broker
inherits this process's, raised to its hard limit's need).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from harness import (
    SteadySender,
    flood_connections,
    raise_open_file_limit,
)
from report import JSON_HELP, Report

from rmq.net import RemotingClient
from rmq.net.server import RESERVED_DESCRIPTORS
from rmq.perf.procs import Processes, broker_settings, start_broker_process, wait_until

TOPIC = "FloodTopic"
SEND_TIMEOUT = 3.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    args = parser.parse_args()
    report = Report(args.json)
    needed = args.connections + RESERVED_DESCRIPTORS + 100
    if raise_open_file_limit(needed) is None:
        report.line(f"the RLIMIT_NOFILE hard limit is below {needed}: cannot hold {args.connections} connections")
        return 2
    procs = Processes()
    with tempfile.TemporaryDirectory(prefix="rmq-bench-connections-") as work:
        settings = broker_settings(Path(work) / "store")
        with RemotingClient() as client:
            try:
                proc, addr = start_broker_process(procs.spawn, settings, stdout=open(os.devnull, "w"))
                sender = SteadySender(client, addr, TOPIC, SEND_TIMEOUT).start()
                floods, slowest = [], []
                try:
                    wait_until(lambda: len(sender.answered) >= 3, 10, "the producer's first sends answered")
                    for _ in range(args.repeat):
                        latencies = sender.sends_during(
                            lambda: floods.append(
                                flood_connections(proc.pid, int(settings["listenPort"]), args.connections)
                            )
                        )
                        slowest.append(max(latencies))
                        flood = floods[-1]
                        report.line(
                            f"{args.connections} connections held in {flood.accept_seconds:.2f} s; RssAnon "
                            f"{flood.before['RssAnon']} -> {flood.peak['RssAnon']} -> {flood.after['RssAnon']} kB, "
                            f"threads "
                            f"{flood.before['Threads']} -> {flood.peak['Threads']} -> {flood.after['Threads']}; "
                            f"{len(latencies)} sends meanwhile, slowest {max(latencies) * 1000:.0f} ms"
                        )
                finally:
                    sender.stop()
            finally:
                procs.stop_all()
    if sender.errors:
        report.line(f"the producer beside the flood failed: {sender.errors[:3]}")
        return 1
    report.figure("accept_seconds", statistics.median(f.accept_seconds for f in floods), "s")
    # memory held with the connections open against the broker before it ever held any (a later
    # round's own growth is smaller: it reuses what the first one freed)
    start = floods[0].before["RssAnon"]
    per_connection = [(f.peak["RssAnon"] - start) * 1024 / args.connections for f in floods]
    report.figure("rss_per_connection", statistics.median(per_connection), "B")
    report.figure("slowest_send_during_flood", statistics.median(slowest) * 1000, "ms")
    report.line(
        f"median of {args.repeat}: held in {report.figures['accept_seconds']['median']:.2f} s, "
        f"{report.figures['rss_per_connection']['median']:.0f} B a connection, slowest send beside it "
        f"{report.figures['slowest_send_during_flood']['median']:.0f} ms"
    )
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
