"""What the controllers' Raft costs (docs/controller.md): a group of ``rmq-controller`` processes on
loopback, then

    commit    one change's round trip (CONTROLLER_APPLY_BROKER_ID, the same id and check code each
              time, so every one is a log entry committed by a majority), one at a time
    failover  seconds from SIGKILL of the leader to the survivors agreeing on a new one (the
              killed member is started again before the next round)

    PYTHONPATH=src python perf/bench_controller.py [--members 3] [--changes 300] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rmq.net import RemotingCommand
from rmq.perf.procs import ControllerGroup, Processes
from rmq.protocol.codes import RequestCode, ResponseCode


def commit_times(group: ControllerGroup, changes: int) -> list[float]:
    leader = group.leader()
    apply = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": "1", "registerCheckCode": "127.0.0.1:1;1"}
    samples = []
    for n in range(changes + 20):
        start = time.perf_counter()
        answer = group.call(leader, RemotingCommand.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, dict(apply)), 3.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        if n >= 20:  # the first ones warm the connections up
            samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples)


def failover_times(group: ControllerGroup, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        leader = group.leader()
        group.kill(leader)
        killed = time.monotonic()
        group.leader(among=tuple(i for i in range(group.size) if i != leader))
        out.append(time.monotonic() - killed)
        group.start(leader)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    procs = Processes()
    with tempfile.TemporaryDirectory() as store:
        group = ControllerGroup(procs.spawn, Path(store), args.members, log_level="ERROR")
        try:
            group.start()
            ms = commit_times(group, args.changes)
            print(
                f"commit, {args.members} members, {len(ms)} changes: median {statistics.median(ms):.2f} ms, "
                f"p90 {ms[int(len(ms) * 0.9)]:.2f} ms, p99 {ms[int(len(ms) * 0.99)]:.2f} ms, max {ms[-1]:.2f} ms"
            )
            seconds = failover_times(group, args.rounds)
            print(
                f"leader failover, {args.rounds} rounds: median {statistics.median(seconds):.2f} s "
                f"({' '.join(f'{s:.2f}' for s in seconds)})"
            )
        finally:
            group.close()
            procs.stop_all()


if __name__ == "__main__":
    main()
