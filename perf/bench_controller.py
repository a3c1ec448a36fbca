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
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from typing import Any

from rmq.net import RemotingClient, RemotingCommand
from rmq.perf.procs import LOOPBACK, free_port, wait_listening, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.controller import ControllerMetadata


class Group:
    def __init__(self, members: int, store: str):
        self.store = store
        self.raft_ports = [free_port() for _ in range(members)]
        self.ports = [free_port() for _ in range(members)]
        self.peers = ";".join(f"n{i}-{LOOPBACK}:{port}" for i, port in enumerate(self.raft_ports))
        self.procs: list[subprocess.Popen[Any]] = [self.start(i) for i in range(members)]
        self.client = RemotingClient()
        self.client.start()

    def start(self, i: int) -> subprocess.Popen[Any]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq.cli.controller", "--host", LOOPBACK, "--port", str(self.ports[i]),
             "--log-level", "ERROR", "--set", f"controllerDLegerPeers={self.peers}",
             "--set", f"controllerDLegerSelfId=n{i}", "--set", f"controllerStorePath={self.store}/n{i}"],
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_listening(proc, self.ports[i], f"rmq-controller n{i}")
        return proc

    def address(self, i: int) -> str:
        return f"{LOOPBACK}:{self.ports[i]}"

    def leader(self, among: Iterable[int]) -> int | None:
        """The member every one of ``among`` names as leader, or None while they do not agree."""
        named: set[str] = set()
        for i in among:
            try:
                answer = self.client.invoke_sync(
                    self.address(i), RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), 1.0
                )
            except Exception:
                return None
            named.add(ControllerMetadata.from_fields(answer.ext_fields).leader_id)
        if len(named) != 1 or "" in named:
            return None
        leader = int(named.pop()[1:])
        return leader if leader in list(among) else None

    def wait_leader(self, among: Iterable[int]) -> int:
        found: list[int] = []

        def agreed() -> bool:
            leader = self.leader(among)
            if leader is not None:
                found.append(leader)
            return leader is not None

        wait_until(agreed, 10.0, "the members agreeing on a leader", interval=0.02)
        return found[-1]

    def close(self) -> None:
        self.client.shutdown()
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            proc.wait(10)


def commit_times(group: Group, changes: int) -> list[float]:
    leader = group.wait_leader(range(len(group.procs)))
    apply = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": "1", "registerCheckCode": "127.0.0.1:1;1"}
    samples = []
    for n in range(changes + 20):
        start = time.perf_counter()
        answer = group.client.invoke_sync(
            group.address(leader), RemotingCommand.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, dict(apply)), 3.0
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        if n >= 20:  # the first ones warm the connections up
            samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples)


def failover_times(group: Group, rounds: int) -> list[float]:
    everyone = range(len(group.procs))
    out = []
    for _ in range(rounds):
        leader = group.wait_leader(everyone)
        group.procs[leader].send_signal(signal.SIGKILL)
        group.procs[leader].wait()
        killed = time.monotonic()
        survivors = [i for i in everyone if i != leader]
        group.wait_leader(survivors)
        out.append(time.monotonic() - killed)
        group.procs[leader] = group.start(leader)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as store:
        group = Group(args.members, store)
        try:
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


if __name__ == "__main__":
    main()
