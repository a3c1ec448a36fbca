"""Automatic failover soak (issue 27, acceptance 4): random faults against a broker set in
controller mode while a producer sends, all real processes.

    PYTHONPATH=src python perf/failover_soak.py [--rounds 20] [--controllers 3] [--seed N] [--json]
        [--heartbeat-timeout-ms MS] [--scan-interval-ms MS]

Three ``rmq-controller`` (a Raft group), an ``rmq-namesrv`` and three brokers of one broker name in
controller mode (``harness.ControllerModeSet``: heartbeat timeout 2 s, polls every second). A
sender keeps 32 SEND_MESSAGE_V2 in flight to the master the name server routes (it looks every
50 ms, and at once after a failed send), each body sent once, and records every body answered
SEND_OK with its time. Each round injects one fault, chosen at random:

- ``master-kill``: SIGKILL the master; a slave is elected; the old one is started again and rejoins
  as a slave (truncated if it had a tail nobody acknowledged);
- ``master-pause``: SIGSTOP the master past the heartbeat timeout; once another is routed, SIGCONT:
  it must rejoin as a slave;
- ``slave-kill``: SIGKILL a slave, start it again;
- ``leader-kill``: SIGKILL the controller leader, start it again (the group elects another leader
  meanwhile; the broker set keeps its master).

After each round, once all three brokers are routed again: every slave's CommitLog is
byte-identical to the master's up to its end (``rmq-admin broker ha-verify``). At the end:

- acknowledged messages lost: acked bodies the master does not hold (must be 0);
- duplicates: a body stored twice in any broker's CommitLog (must be 0: none is sent twice);
- send outage per failover: seconds from the fault to the first send acknowledged after it (the
  median and the largest, per fault kind).

Every process runs with the cluster's credentials (clusterAccessKey / clusterSecretKey): name-server
registrations and controller writes are signed; ``--no-cluster-auth`` runs them open (a newer
controller-mode epoch then takes the route unsigned).

Exit code 1 on any loss, duplicate or log difference. ``--json`` prints one object.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness import (
    IN_FLIGHT,
    QUEUES,
    TOPIC,
    ClientThread,
    ControllerModeSet,
    pull_all,
    send_request,
)

from rmq.net import RemotingClient
from rmq.perf.procs import Processes, wait_until
from rmq.protocol.codes import ResponseCode
from rmq.protocol.route import MASTER_ID

FAULTS = ("master-kill", "master-pause", "slave-kill", "leader-kill")
CLUSTER_ACCOUNT = ("rmq-soak-cluster", "rmq-soak-cluster-secret")
ROUTE_POLL = 0.05
# a pause lasts until another master is routed, and at least this (past the harness's 2 s heartbeat timeout)
PAUSE_SECONDS = 3.0
# acknowledged sends between two faults
ACKED_PER_ROUND = 300


class RoutedSender(ClientThread):
    """Sends to the broker set's master of the moment, IN_FLIGHT at a time; ``acked`` holds (time
    answered SEND_OK, body, the broker's address) and ``failed`` counts the rest."""

    def __init__(self, client: RemotingClient, master):
        super().__init__("soak-sender")
        self.client = client
        self.master = master  # () -> address or None
        self.next = 0
        self.acked: list[tuple[float, bytes, str]] = []
        self.failed = 0
        self.lock = threading.Lock()
        self.held = threading.Event()  # set: no new send (the logs are compared meanwhile)

    def in_flight(self) -> int:
        with self.lock:
            return self.next - len(self.acked) - self.failed

    def first_ack_after(self, since: float, not_by: str | None = None) -> float | None:
        """When the first send answered SEND_OK at ``since`` or later (by another broker than
        ``not_by``: a send to a killed master may be answered just as it dies) was answered."""
        with self.lock:
            return next((t for t, _, addr in self.acked if t >= since and addr != not_by), None)

    def _run(self) -> None:
        window = threading.Semaphore(IN_FLIGHT)

        def done(body: bytes, addr: str, future: concurrent.futures.Future) -> None:
            window.release()
            ok = future.exception() is None and future.result().code == ResponseCode.SUCCESS
            with self.lock:
                if ok:
                    self.acked.append((time.monotonic(), body, addr))
                else:
                    self.failed += 1

        while not self._stop.is_set():
            addr = self.master()
            if addr is None or self.held.is_set():
                self._stop.wait(ROUTE_POLL)
                continue
            if not window.acquire(timeout=0.1):
                continue
            body = b"soak-%09d" % self.next
            request = send_request(TOPIC, body, queue_id=self.next % QUEUES, keys=body.decode())
            self.next += 1
            future = self.client.invoke_async(addr, request, 3.0)
            future.add_done_callback(lambda f, b=body, a=addr: done(b, a, f))
        for _ in range(IN_FLIGHT):
            window.acquire(timeout=10)


class RouteWatcher(ClientThread):
    """The master's address as the name server routes it, read every ROUTE_POLL."""

    def __init__(self, cluster: ControllerModeSet):
        super().__init__("soak-routes")
        self.cluster = cluster
        self.master: str | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.master = self.cluster.routes().get(MASTER_ID)
            except Exception:
                pass
            self._stop.wait(ROUTE_POLL)


def wait_whole(cluster: ControllerModeSet, sender: RoutedSender, timeout: float = 60.0) -> str:
    """Until a master and both slaves are routed, and, sends held, every slave is byte-identical
    to the master; then until the sync state set holds every broker (a master killed before its
    slaves rejoined the set leaves none the controllers may elect, as designed)."""
    cluster.wait_set(len(cluster.settings), timeout)
    sender.held.set()
    try:
        wait_until(lambda: sender.in_flight() == 0, 10, "the sends in flight answered")
        master = cluster.wait_set(len(cluster.settings), timeout)
        cluster.wait_converged(timeout)
    finally:
        sender.held.clear()
    cluster.wait_in_sync(timeout)
    return master


def one_round(cluster: ControllerModeSet, sender: RoutedSender, fault: str, rng: random.Random) -> dict:
    master = cluster.master()
    assert master is not None
    started = time.monotonic()
    if fault == "master-kill":
        cluster.kill(master)
        cluster.new_master(master, 60)
        cluster.start_broker(master)
    elif fault == "master-pause":
        cluster.pause(master)
        try:
            cluster.new_master(master, 60)
            time.sleep(max(0.0, PAUSE_SECONDS - (time.monotonic() - started)))
        finally:
            cluster.resume(master)
    elif fault == "slave-kill":
        slave = rng.choice([name for name in cluster.settings if name != master])
        cluster.kill(slave)
        time.sleep(1.0)
        cluster.start_broker(slave)
    else:
        leader = cluster.controller_leader()
        cluster.controllers.kill(leader)
        time.sleep(1.0)
        cluster.controllers.start(leader)
    cluster.wait_set(len(cluster.settings), 60)
    # a master fault's outage ends with a send acknowledged by another broker
    old = cluster.addr(master) if fault.startswith("master") else None
    first = wait_until(lambda: sender.first_ack_after(started, old), 30, "a send acknowledged after the fault")
    new_master = wait_whole(cluster, sender)
    return {
        "fault": fault,
        "master_before": master,
        "master_after": new_master,
        "outage_s": round(first - started, 3),
        "epoch": int(cluster.runtime(new_master)["epoch"]),
    }


def soak(
    rounds: int,
    controllers: int,
    seed: int,
    root: Path,
    faults: tuple[str, ...] = FAULTS,
    cluster_auth: bool = True,
    heartbeat_timeout_ms: int | None = None,
    scan_interval_ms: int | None = None,
) -> dict:
    rng = random.Random(seed)
    procs = Processes()
    credentials = CLUSTER_ACCOUNT if cluster_auth else None
    extra = {} if heartbeat_timeout_ms is None else {"controllerHeartBeatTimeoutMills": str(heartbeat_timeout_ms)}
    scan = {} if scan_interval_ms is None else {"scanNotActiveBrokerInterval": str(scan_interval_ms)}
    cluster = ControllerModeSet(
        procs.spawn,
        root,
        brokers=3,
        controllers=controllers,
        credentials=credentials,
        controller_settings=scan,
        **extra,
    )
    reports = []
    try:
        cluster.start()
        cluster.create_topic()
        routes = RouteWatcher(cluster).start()
        sender = RoutedSender(cluster.client, lambda: routes.master).start()
        try:
            wait_whole(cluster, sender)  # the first round too: a master killed before its slaves joined
            for n in range(1, rounds + 1):
                wanted = len(sender.acked) + ACKED_PER_ROUND
                wait_until(lambda: len(sender.acked) >= wanted, 60, f"{ACKED_PER_ROUND} sends acknowledged")  # noqa: B023
                fault = rng.choice(faults)
                report = one_round(cluster, sender, fault, rng)
                report["round"] = n
                reports.append(report)
                print(json.dumps(report), file=sys.stderr)
        finally:
            sender.stop()
            routes.stop()
        master = wait_whole(cluster, sender)
        acked = [body for _, body, _ in sender.acked]
        stored = {
            name: collections.Counter(bytes(m.body) for m in pull_all(cluster.client, cluster.addr(name)))
            for name in cluster.settings
        }
        lost = set(acked) - set(stored[master])
        duplicates = {
            name: sum(1 for body, n in counts.items() if n > 1 and body.startswith(b"soak-"))
            for name, counts in stored.items()
        }
    finally:
        cluster.close()
        procs.stop_all()
    outages: dict[str, list[float]] = collections.defaultdict(list)
    for r in reports:
        outages[r["fault"]].append(r["outage_s"])
    failovers = [r["outage_s"] for r in reports if r["fault"] in ("master-kill", "master-pause")]
    return {
        "rounds": len(reports),
        "seed": seed,
        "controllers": controllers,
        "faults": list(faults),
        "cluster_auth": cluster_auth,
        "acked": len(acked),
        "failed_sends": sender.failed,
        "lost": len(lost),
        "lost_examples": sorted(b.decode() for b in lost)[:5],
        "duplicates": duplicates,
        "failover_outage_median_s": round(statistics.median(failovers), 3) if failovers else None,
        "failover_outage_max_s": max(failovers) if failovers else None,
        "outage_by_fault": {
            k: {"n": len(v), "median_s": round(statistics.median(v), 3), "max_s": max(v)}
            for k, v in sorted(outages.items())
        },
        "epochs": [r["epoch"] for r in reports],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--controllers", type=int, default=3, choices=(1, 3, 5))
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--faults", default=",".join(FAULTS), help=f"the faults to draw from, comma-separated (of {', '.join(FAULTS)})"
    )
    parser.add_argument(
        "--heartbeat-timeout-ms",
        type=int,
        default=None,
        help="the brokers' controllerHeartBeatTimeoutMills (default the harness's 2000; RocketMQ's is 10000)",
    )
    parser.add_argument(
        "--scan-interval-ms",
        type=int,
        default=None,
        help="the controllers' scanNotActiveBrokerInterval (default the harness's 200; RocketMQ's is 5000)",
    )
    parser.add_argument("--no-cluster-auth", action="store_true", help="run every process without cluster credentials")
    parser.add_argument("--keep", action="store_true", help="keep the stores and logs (their path is printed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    unknown = set(faults) - set(FAULTS)
    if unknown or not faults:
        parser.error(f"--faults: {sorted(unknown) or 'none'} not among {', '.join(FAULTS)}")
    if args.controllers == 1 and "leader-kill" in faults:
        parser.error("leader-kill needs --controllers 3 or 5 (one controller killed leaves none to elect)")
    root = Path(tempfile.mkdtemp(prefix="rmq-failover-soak-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        result = soak(
            args.rounds,
            args.controllers,
            seed,
            root,
            faults,
            not args.no_cluster_auth,
            args.heartbeat_timeout_ms,
            args.scan_interval_ms,
        )
    finally:
        if args.keep:
            print(f"stores and logs in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    bad = result["lost"] or any(result["duplicates"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
