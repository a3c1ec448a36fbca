"""Crash soak: SIGKILL rounds against real ``rmq-broker`` processes while clients send and consume.

    PYTHONPATH=src python perf/soak_crash.py [--rounds 100] [--failover-rounds 20] [--json]

**SYNC_FLUSH rounds** (one broker, its embedded name server, a store of 1 MiB CommitLog files so that
rounds cross file ends): a sender keeps 32 SEND_MESSAGE_V2 in flight and records every body
answered SUCCESS (under SYNC_FLUSH: on disk); a consumer pulls every queue from where it is, checks
each record (CRC included) and commits its offset after every pull, recording each commit the
broker acknowledged. Once the round has its acknowledged sends, the broker is SIGKILLed with sends,
pulls and commits in flight, restarted on its store, and checked:

- every message ever acknowledged is there (all queues pulled from offset 0, records CRC-checked);
- no pull ever served a record that does not decode whole (a torn record);
- consumer offsets: as in RocketMQ, commits live in memory and reach ``config/consumerOffset.json``
  on a timer (``flushConsumerOffsetInterval``, 500 ms here), so a crash takes back the commits made
  since its last write: the consumer sees those messages again. Checked: the restarted broker has
  exactly the offsets of that file (read right after the kill); no offset is past the highest one the
  consumer sent (a crash never makes it skip a message); and none is behind a commit that broker
  acknowledged more than ``--offset-age`` seconds (2) before the kill (the timer keeps running; it
  bites in rounds longer than that: raise ``--min-acked``). How far back
  offsets went after each crash, against the last acknowledged commit, is reported.

**SYNC_MASTER rounds with promotion** (``harness.FailoverPair``, the suite's failover): a SYNC_MASTER
and its slave; sends in flight, the master SIGKILLed, every acknowledged message checked on the
slave, the slave promoted, the old master restarted as its slave, both CommitLogs byte-identical; the
roles swap every round. A consumer pulls from the master of the moment throughout, checking records.

Every process runs with the cluster's credentials (clusterAccessKey / clusterSecretKey, the name
server's --cluster-access-key): registrations are signed, a returning master is fenced only on its
successor's signed claim, and a slave authenticates to its master's HA port. ``--no-cluster-auth``
runs them open, as RocketMQ 4.x runs.

Exit code 1 on any loss, torn record, or offset behind its bound. ``--json`` prints one object.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness import (
    QUEUES,
    TOPIC,
    ClientThread,
    FailoverPair,
    Sender,
    bodies_in,
    offset_request,
    pull_request,
    records,
    update_topic_request,
)

from rmq.errors import RecordError
from rmq.net import RemotingClient
from rmq.perf.procs import Processes, broker_settings, start_broker_process, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode

GROUP = "soak-consumers"
OFFSET_FLUSH_MS = 500


class Consumer(ClientThread):
    """Pulls every queue of TOPIC from ``addr()`` (the broker of the moment), checks the records and
    commits after each pull; ``commits`` holds (time acknowledged, queue, offset)."""

    def __init__(self, client: RemotingClient, addr, commit: bool = True):
        super().__init__("soak-consumer")
        self.client = client
        self.addr = addr
        self.commit = commit
        self.next = [0] * QUEUES
        self.consumed = 0
        self.torn: list[str] = []
        self.commits: list[tuple[float, int, int]] = []
        self.sent_max = [-1] * QUEUES  # the highest offset sent in a commit, acknowledged or not
        self.paused = threading.Event()

    def _run(self) -> None:
        queue_id = 0
        while not self._stop.is_set():
            if self.paused.is_set():
                self._stop.wait(0.01)
                continue
            queue_id = (queue_id + 1) % QUEUES
            addr = self.addr()
            try:
                answer = self.client.invoke_sync(
                    addr, pull_request(TOPIC, queue_id, self.next[queue_id], group=GROUP), 3
                )
            except Exception:  # the broker is down: wait for it
                self._stop.wait(0.05)
                continue
            if answer.code == ResponseCode.PULL_OFFSET_MOVED:
                self.next[queue_id] = int(answer.ext_fields["nextBeginOffset"])
            if answer.code != ResponseCode.SUCCESS:
                self._stop.wait(0.005)
                continue
            try:
                self.consumed += len(records(answer.body))  # CRC checked
            except RecordError as e:
                self.torn.append(f"queue {queue_id} offset {self.next[queue_id]}: {e}")
                continue
            self.next[queue_id] = int(answer.ext_fields["nextBeginOffset"])
            if not self.commit:
                continue
            request = offset_request(
                RequestCode.UPDATE_CONSUMER_OFFSET, TOPIC, queue_id, GROUP, commitOffset=self.next[queue_id]
            )
            self.sent_max[queue_id] = max(self.sent_max[queue_id], self.next[queue_id])
            try:
                if self.client.invoke_sync(addr, request, 3).code == ResponseCode.SUCCESS:
                    self.commits.append((time.monotonic(), queue_id, self.next[queue_id]))
            except Exception:
                pass


def persisted_offsets(store: Path) -> dict[int, int]:
    """GROUP's offsets of TOPIC in the broker's consumerOffset.json (what a restart reads)."""
    path = store / "config" / "consumerOffset.json"
    if not path.exists():
        return {}
    table = json.loads(path.read_text())["offsetTable"].get(f"{TOPIC}@{GROUP}", {})
    return {int(q): int(offset) for q, offset in table.items()}


def committed(client: RemotingClient, addr: str, queue_id: int) -> int:
    answer = client.invoke_sync(addr, offset_request(RequestCode.QUERY_CONSUMER_OFFSET, TOPIC, queue_id, GROUP), 10)
    return int(answer.ext_fields["offset"]) if answer.code == ResponseCode.SUCCESS else -1


# The cluster account every process of the soak signs with (unless --no-cluster-auth).
CLUSTER_ACCESS_KEY = "soak-cluster"
CLUSTER_SECRET_KEY = "soak-cluster-secret"
CLUSTER_SETTINGS = {"clusterAccessKey": CLUSTER_ACCESS_KEY, "clusterSecretKey": CLUSTER_SECRET_KEY}
NAMESRV_AUTH_ARGS = ("--cluster-access-key", CLUSTER_ACCESS_KEY, "--cluster-secret-key", CLUSTER_SECRET_KEY)


def sync_flush_rounds(
    rounds: int, root: Path, min_acked: int, offset_age: float = 2.0, log=print, cluster_auth: bool = True
) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(rounds)
    procs = Processes()
    client = RemotingClient()
    client.start()
    settings = broker_settings(
        root / "store",
        flushDiskType="SYNC_FLUSH",
        mappedFileSizeCommitLog=str(1 << 20),
        flushConsumerOffsetInterval=str(OFFSET_FLUSH_MS),
        **(CLUSTER_SETTINGS if cluster_auth else {}),
    )
    addr = f"127.0.0.1:{settings['listenPort']}"
    log_file = root / "broker.log"
    report: dict = {"rounds": 0, "acked": 0, "lost": 0, "torn": 0, "offset_errors": 0}
    rewinds: list[int] = []
    restart_seconds: list[float] = []
    acked: set[bytes] = set()

    def start() -> object:
        with open(log_file, "ab") as out:
            proc, _ = start_broker_process(procs.spawn, settings, extra_args=("--log-level", "WARNING"), stderr=out)
        return proc

    try:
        proc = start()
        up_since = time.monotonic()
        answer = client.invoke_sync(addr, update_topic_request(TOPIC, QUEUES), 10)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        consumer = Consumer(client, lambda: addr).start()
        started = time.monotonic()
        try:
            for n in range(1, rounds + 1):
                sender = Sender(client, addr, 1_000_000 * n).start()
                try:
                    wait_until(lambda s=sender: len(s.acked) >= min_acked, 60, f"{min_acked} sends acked")
                    time.sleep(rng.uniform(0, 0.3))  # the kill lands anywhere in what follows
                    proc.send_signal(signal.SIGKILL)  # sends, pulls and commits in flight
                    proc.wait(10)
                    killed_at = time.monotonic()
                finally:
                    sender.stop()
                acked.update(sender.acked)
                consumer.paused.set()  # its next calls go to the restarted broker only once checked
                persisted = persisted_offsets(root / "store")
                t0 = time.monotonic()
                proc = start()
                up_since = time.monotonic()
                restart_seconds.append(up_since - t0)
                # every acknowledged message survived, whole
                missing = acked - bodies_in(client, addr)
                report["lost"] += len(missing)
                commits = list(consumer.commits)
                for queue_id in range(QUEUES):
                    now = committed(client, addr, queue_id)
                    acked_commits = [off for _, q, off in commits if q == queue_id]
                    old_enough = [  # commits this run of the broker took, long enough before the kill
                        off for t, q, off in commits if q == queue_id and up_since < t < killed_at - offset_age
                    ]
                    problems = []
                    if queue_id in persisted and now != persisted[queue_id]:
                        problems.append(f"not the {persisted[queue_id]} of consumerOffset.json")
                    if now > consumer.sent_max[queue_id]:
                        problems.append(f"past the highest offset sent, {consumer.sent_max[queue_id]}")
                    if old_enough and now < max(old_enough):
                        problems.append(f"behind {max(old_enough)}, acknowledged over {offset_age} s before the kill")
                    if problems:
                        report["offset_errors"] += 1
                        log(f"round {n}: queue {queue_id} committed offset {now}: {'; '.join(problems)}")
                    if acked_commits:
                        rewinds.append(max(0, max(acked_commits) - now))
                consumer.paused.clear()
                report["torn"] = len(consumer.torn)
                report["rounds"] = n
                if missing or consumer.torn:
                    log(
                        f"round {n}: {len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:3]}; "
                        f"torn records served: {consumer.torn[:3]}"
                    )
                if n % 10 == 0 or n == rounds:
                    log(
                        f"  SYNC_FLUSH round {n}: {len(acked)} acked, {consumer.consumed} consumed, "
                        f"lost {report['lost']}, torn {report['torn']}, {time.monotonic() - started:.0f} s"
                    )
        finally:
            consumer.stop()
        report.update(
            acked=len(acked),
            consumed=consumer.consumed,
            commits=len(consumer.commits),
            # messages a queue's offset went back after a crash, from the last acknowledged commit
            offset_rewind_max=max(rewinds, default=0),
            offset_rewind_median=sorted(rewinds)[len(rewinds) // 2] if rewinds else 0,
            restart_seconds_median=round(sorted(restart_seconds)[len(restart_seconds) // 2], 2),
            seconds=round(time.monotonic() - started, 1),
        )
        return report
    finally:
        client.shutdown()
        procs.stop_all()


def sync_master_rounds(rounds: int, root: Path, min_acked: int, log=print, cluster_auth: bool = True) -> dict:
    procs = Processes()
    if cluster_auth:
        pair = FailoverPair(procs.spawn, root, NAMESRV_AUTH_ARGS, **CLUSTER_SETTINGS)
    else:
        pair = FailoverPair(procs.spawn, root)
    report: dict = {"rounds": 0, "lost": 0, "torn": 0, "dropped_bytes": 0, "dropped_records": 0}
    started = time.monotonic()
    try:
        pair.start()
        # reads only: the offsets a consumer commits on a promoted slave are another story (its
        # copy of the master's table), told in the README's failover section
        consumer = Consumer(pair.client, lambda: pair.addr(pair.master), commit=False).start()
        try:
            for n in range(1, rounds + 1):
                try:
                    result = pair.round(min_acked=min_acked)
                except AssertionError as e:  # a loss is what FailoverPair asserts against
                    report["lost"] += 1
                    report["failure"] = str(e)[:500]
                    log(f"SYNC_MASTER round {n} failed: {e}")
                    break
                report.update(rounds=n, acked=result.acked, epoch=result.epoch)
                report["dropped_bytes"] += result.dropped_bytes
                report["dropped_records"] += result.dropped_records
                if n % 5 == 0 or n == rounds:
                    log(
                        f"  SYNC_MASTER round {n}: {result.acked} acked, epoch {result.epoch}, "
                        f"converged at {result.converged_at}, {time.monotonic() - started:.0f} s"
                    )
        finally:
            consumer.stop()
        report.update(torn=len(consumer.torn), consumed=consumer.consumed, seconds=round(time.monotonic() - started, 1))
        return report
    finally:
        pair.close()
        procs.stop_all()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100, help="SYNC_FLUSH SIGKILL rounds")
    parser.add_argument("--failover-rounds", type=int, default=20, help="SYNC_MASTER rounds with promotion")
    parser.add_argument("--min-acked", type=int, default=300, help="acknowledged sends per round before the kill")
    parser.add_argument("--offset-age", type=float, default=2.0, help="seconds after which a commit must survive")
    parser.add_argument("--no-cluster-auth", action="store_true", help="run every process without cluster credentials")
    parser.add_argument("--keep", action="store_true", help="keep the stores and logs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rmq-soak-"))
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    try:
        report: dict = {"cluster_auth": not args.no_cluster_auth}
        if args.rounds:
            report["sync_flush"] = sync_flush_rounds(
                args.rounds, root / "sync-flush", args.min_acked, args.offset_age, log, not args.no_cluster_auth
            )
        if args.failover_rounds:
            report["sync_master"] = sync_master_rounds(
                args.failover_rounds, root / "sync-master", args.min_acked, log, not args.no_cluster_auth
            )
    finally:
        if args.keep:
            log(f"stores and logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    flush, master = report.get("sync_flush", {}), report.get("sync_master", {})
    report["ok"] = not (
        flush.get("lost") or flush.get("torn") or flush.get("offset_errors") or master.get("lost") or master.get("torn")
    )
    print(json.dumps(report, indent=None if args.json else 2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
