"""Two broker processes of one brokerName that swap roles by failover: a SYNC_MASTER SIGKILLed while
sends are in flight, its slave promoted (PROMOTE_TO_MASTER), the old master restarted as a SLAVE of
it. Each keeps its store and ports across restarts; ``stderr`` of every broker run goes to a file of
its own, so a test can read what a rejoining slave logged it dropped.

    pair = FailoverPair(spawn, tmp_path).start()
    report = pair.round()        # kill, check, promote, rejoin, converge; roles swapped after it
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import re
import signal
import subprocess
import threading
from pathlib import Path

from rmq.client.admin_client import AdminClient
from rmq.net import RemotingClient
from rmq.protocol.codes import DEGRADED_SEND_CODES, ResponseCode
from rmq.protocol.route import MASTER_ID
from tests.helpers import LOOPBACK, wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.processes import CLUSTER_BROKER_SETTINGS, start_broker_process, start_namesrv
from tests.helpers.requests import pull_all, pull_request, send_request, update_topic_request

BROKER_NAME = "broker-f"
TOPIC = "FailoverTopic"
QUEUES = 4
# sends kept in flight while the master is killed
IN_FLIGHT = 32
DROPPED = re.compile(r"dropped (\d+) bytes \((\d+) records\)")


@dataclasses.dataclass
class RoundReport:
    round: int
    killed: str
    promoted: str
    acked: int  # SEND_OK answers so far, all rounds
    epoch: int
    dropped_bytes: int  # what the old master cut when it rejoined
    dropped_records: int
    converged_at: int  # CommitLog offset up to which both logs are identical


class Sender:
    """Sends to one broker address from a thread, ``IN_FLIGHT`` at a time, until stopped; keeps the
    bodies answered SEND_OK."""

    def __init__(self, client: RemotingClient, addr: str, first: int):
        self.client = client
        self.addr = addr
        self.next = first
        self.acked: list[bytes] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="failover-sender")

    def start(self) -> Sender:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        window = threading.Semaphore(IN_FLIGHT)
        lock = threading.Lock()

        def done(body: bytes, future: concurrent.futures.Future) -> None:
            window.release()
            ok = future.exception() is None and future.result().code == ResponseCode.SUCCESS
            with lock:
                if ok:
                    self.acked.append(body)
                else:
                    self.failed += 1

        while not self._stop.is_set():
            if not window.acquire(timeout=0.1):
                continue
            body = b"msg-%08d" % self.next
            request = send_request(TOPIC, body, queue_id=self.next % QUEUES, keys=body.decode())
            self.next += 1
            future = self.client.invoke_async(self.addr, request, 5.0)
            future.add_done_callback(lambda f, b=body: done(b, f))
        for _ in range(IN_FLIGHT):  # every answer (or error) is in before the lists are read
            window.acquire(timeout=10)


class FailoverPair:
    def __init__(self, spawn, root: Path, **extra: str):
        self.spawn = spawn
        self.root = root
        self.client = RemotingClient()
        self.namesrv_addr = ""
        base = {
            **CLUSTER_BROKER_SETTINGS,
            "brokerName": BROKER_NAME,
            "mappedFileSizeCommitLog": str(1 << 20),
            **extra,
        }
        self.settings = {}
        for name in ("a", "b"):
            (root / name).mkdir(parents=True, exist_ok=True)
            settings = broker_settings(root / name, **base)
            del settings["namesrvListenPort"]
            self.settings[name] = settings
        self.procs: dict[str, subprocess.Popen] = {}
        self.runs: dict[str, int] = {"a": 0, "b": 0}
        self.master, self.slave = "a", "b"
        self.acked: list[bytes] = []
        self.sent = 0
        self.rounds = 0

    def addr(self, name: str) -> str:
        return f"{LOOPBACK}:{self.settings[name]['listenPort']}"

    def log_path(self, name: str) -> Path:
        return self.root / f"{name}-{self.runs[name]}.log"

    def start_broker(self, name: str, role: str) -> None:
        settings = dict(self.settings[name])
        settings.update(brokerRole=role, brokerId="0" if role != "SLAVE" else "1")
        self.runs[name] += 1
        with open(self.log_path(name), "wb") as log:
            self.procs[name], _ = start_broker_process(
                self.spawn, settings, self.namesrv_addr, extra_args=("--log-level", "WARNING"), stderr=log
            )

    def start(self, role: str = "SYNC_MASTER") -> FailoverPair:
        self.client.start()
        _, self.namesrv_addr = start_namesrv(self.spawn)
        self.start_broker(self.master, role)
        answer = self.client.invoke_sync(self.addr(self.master), update_topic_request(TOPIC, QUEUES), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        # started after the topic: a slave copies its master's topics as soon as it learns of it
        self.start_broker(self.slave, "SLAVE")
        wait_until(lambda: self.topic_on(self.slave), 20, "the topic copied to the slave")
        if role == "SYNC_MASTER":
            wait_until(self.slave_connected, 20, "the slave replicating")
        return self

    def close(self) -> None:
        self.client.shutdown()

    def runtime(self, name: str) -> dict[str, str]:
        with AdminClient(self.namesrv_addr) as admin:
            return admin.broker_runtime_info(self.addr(name))

    def slave_connected(self) -> bool:
        """A send to the master is answered SEND_OK (a SYNC_MASTER's needs a slave in sync)."""
        request = send_request(TOPIC, b"probe-%d" % self.sent, queue_id=0, keys="probe")
        self.sent += 1
        return self.client.invoke_sync(self.addr(self.master), request, 5).code == ResponseCode.SUCCESS

    def send(self, name: str, body: bytes) -> int:
        """One send to broker ``name``; the answer's code."""
        return self.client.invoke_sync(self.addr(name), send_request(TOPIC, body, keys=body.decode()), 5).code

    def wait_converged(self) -> int:
        """Until the slave's CommitLog ends where the master's does and both hold the same bytes;
        that end."""
        wait_until(
            lambda: self.runtime(self.slave)["commitLogMaxOffset"] == self.runtime(self.master)["commitLogMaxOffset"],
            30,
            f"{self.slave} caught up with {self.master}",
        )
        with AdminClient(self.namesrv_addr) as admin:
            (check,) = admin.verify_replicas(BROKER_NAME, 1 << 20)
        assert check.identical and check.verified_to == check.master_max_offset, check
        return check.verified_to

    def dropped(self, name: str) -> tuple[int, int]:
        """(bytes, records) broker ``name`` logged it dropped when it last rejoined as a slave."""
        found = DROPPED.search(self.log_path(name).read_text(errors="replace"))
        return (int(found.group(1)), int(found.group(2))) if found else (0, 0)

    def topic_on(self, name: str) -> bool:
        answer = self.client.invoke_sync(self.addr(name), pull_request(TOPIC, 0, 0), 5)
        return answer.code != ResponseCode.TOPIC_NOT_EXIST

    def bodies_on(self, name: str) -> set[bytes]:
        return {bytes(m.body) for m in pull_all(self.client, self.addr(name), TOPIC, QUEUES)}

    def round(self, min_acked: int = 300) -> RoundReport:
        """One failover; afterwards ``master`` and ``slave`` are swapped."""
        self.rounds += 1
        old, new = self.master, self.slave
        sender = Sender(self.client, self.addr(old), 1_000_000 * self.rounds).start()
        try:
            wait_until(lambda: len(sender.acked) >= min_acked, 30, f"{min_acked} sends acked by {old}")
            self.procs[old].send_signal(signal.SIGKILL)  # sends still in flight
            self.procs[old].wait(10)
        finally:
            sender.stop()
        self.acked += sender.acked
        # every acknowledged message is on the slave, readable there
        missing = set(self.acked) - self.bodies_on(new)
        assert not missing, f"{len(missing)} acknowledged messages not on the slave, e.g. {sorted(missing)[:3]}"
        with AdminClient(self.namesrv_addr) as admin:
            promotion = admin.promote(BROKER_NAME, 1, "SYNC_MASTER")
            assert admin.broker_addrs(BROKER_NAME) == {MASTER_ID: self.addr(new)}  # routed as master at once
        # it takes sends (stored; degraded while it has no slave)
        after = [
            self.client.invoke_sync(self.addr(new), send_request(TOPIC, b"after-%d-%d" % (self.rounds, i)), 5)
            for i in range(5)
        ]
        assert all(a.code == ResponseCode.SUCCESS or a.code in DEGRADED_SEND_CODES for a in after), [
            (a.code, a.remark) for a in after
        ]
        self.master, self.slave = new, old
        self.start_broker(old, "SLAVE")
        wait_until(self.slave_connected, 30, f"{old} replicating from {new}")
        converged_at = self.wait_converged()
        assert self.runtime(old)["epoch"] == str(promotion.epoch)
        return RoundReport(self.rounds, old, new, len(self.acked), promotion.epoch, *self.dropped(old), converged_at)
