"""What the operations scripts (``fuzz_broker.py``, ``soak_crash.py``, ``power_loss.py``,
``bench_connections.py``, ``forge_registration.py``) and the test suite share beyond starting
processes (that is ``rmq.perf.procs``, which rmq-perf uses too): floods of connections, the
requests a RocketMQ client sends (built by hand from docs/protocol.md#sends, not with the SDK), a
failover pair of brokers and a forged name-server registration.

It lives here, beside the scripts, and imports nothing but the standard library and rmq, so that a
script runs from a checkout or an installed rmq without the test tree; ``tests/helpers`` loads this
file by its path and re-exports its names, so that the suite and the scripts run one copy of the
failover logic.

    procs = Processes()                                 # rmq.perf.procs
    pair = FailoverPair(procs.spawn, root).start()      # SYNC_MASTER + SLAVE
    report = pair.round()        # kill, check, promote, rejoin, converge; roles swapped after it
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import errno
import os
import re
import resource
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from rmq.client.admin_client import AdminClient
from rmq.errors import AdminError, RemotingError, ResponseError
from rmq.net import RemotingClient, RemotingCommand
from rmq.net.codec_py import encode
from rmq.net.frame import FLAG_ONEWAY
from rmq.perf.procs import (
    BROKER_PORT_KEYS,
    LOOPBACK,
    ControllerGroup,
    broker_settings,
    start_broker_process,
    start_namesrv,
    wait_until,
)
from rmq.protocol.codes import DEGRADED_SEND_CODES, RequestCode, ResponseCode
from rmq.protocol.crc import crc32
from rmq.protocol.message import encode_properties
from rmq.protocol.record import StoredMessage, decode_records
from rmq.protocol.replica import REGISTER_EPOCH
from rmq.protocol.route import MASTER_ID
from rmq.protocol.send_header import V2


def open_connections(port: int, count: int, timeout: float, greeting: bytes = b"") -> list[socket.socket]:
    """``count`` connections to 127.0.0.1:``port`` opened at once: every connect issued without
    waiting, then one epoll wait for them all, each sending ``greeting`` once connected. OSError
    when one fails, AssertionError when some are still connecting after ``timeout`` seconds (nothing
    is left open then)."""
    socks: list[socket.socket] = []
    poller = select.epoll()
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.setblocking(False)
            err = sock.connect_ex((LOOPBACK, port))
            if err not in (0, errno.EINPROGRESS):
                raise OSError(err, f"connect to {LOOPBACK}:{port}: {os.strerror(err)}")
            poller.register(sock.fileno(), select.EPOLLOUT)
        connecting = {sock.fileno(): sock for sock in socks}
        deadline = time.monotonic() + timeout
        while connecting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{len(connecting)} of {count} connections not established within {timeout:g} s")
            for fd, _events in poller.poll(min(left, 1.0)):
                sock = connecting.pop(fd)
                poller.unregister(fd)
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, f"connect to {LOOPBACK}:{port}: {os.strerror(err)}")
                if greeting:
                    sock.send(greeting)  # a fresh socket's buffer takes it whole
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    finally:
        poller.close()
    return socks


def process_status(pid: int) -> dict[str, int]:
    """A process's threads, open descriptors and memory (kB: VmRSS; RssAnon, its own memory; RssFile,
    the file pages it maps, mostly the CommitLog's, which the kernel reclaims at will) from /proc."""
    status = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Threads", "VmRSS", "RssAnon", "RssFile"):
            status[key] = int(value.split()[0])
    status["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return status


def raise_open_file_limit(needed: int) -> tuple[int, int] | None:
    """Raise this process's soft RLIMIT_NOFILE to ``needed`` (processes it starts inherit it);
    the limits it had, to restore, or None when the hard limit is below ``needed``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        return None
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return soft, hard


@dataclasses.dataclass
class FloodReport:
    """One flood of connections against a process: how long it took to hold them, and its
    ``process_status`` before, while it held them all, and once they were closed."""

    connections: int
    accept_seconds: float  # from the first connect to the process holding every connection
    before: dict[str, int]
    peak: dict[str, int]
    after: dict[str, int]

    @property
    def rss_per_connection(self) -> float:
        """Bytes of the process's own memory (RssAnon) each open connection took."""
        return (self.peak["RssAnon"] - self.before["RssAnon"]) * 1024 / self.connections


# A oneway request of a code no processor has: nothing is answered, nothing logged above DEBUG.
FLOOD_REQUEST_CODE = 4242
FLOOD_GREETING = encode(RemotingCommand(FLOOD_REQUEST_CODE, flag=FLAG_ONEWAY))


def flood_connections(pid: int, port: int, count: int, timeout: float = 60.0) -> FloodReport:
    """Open ``count`` connections at once to the process ``pid`` listening on ``port``, each sending
    one oneway request, wait until it holds them all (its descriptors), close them and wait until it
    has closed them too.

    The request is what a client sends first anyway, and it makes every connection arrive: past a
    full SYN queue the kernel answers with SYN cookies and keeps no state, and a handshake's last ACK
    that meets a full accept queue is dropped; the client's side is established all the same, and
    only its first data segment (retransmitted until it lands) gets the server's side made."""
    before = process_status(pid)
    started = time.monotonic()
    socks = open_connections(port, count, timeout, FLOOD_GREETING)
    try:
        wait_until(
            lambda: process_status(pid)["fds"] >= before["fds"] + count,
            timeout,
            lambda: f"{count} connections accepted (the process holds {process_status(pid)['fds']} descriptors)",
        )
        accept_seconds = time.monotonic() - started
        peak = process_status(pid)
    finally:
        for sock in socks:
            sock.close()
    wait_until(lambda: process_status(pid)["fds"] <= before["fds"], timeout, "the flood's connections closed")
    return FloodReport(count, accept_seconds, before, peak, process_status(pid))


# Small files, fast delay levels and a slave that copies its master's metadata every 0.5 s: tests
# write little and should not wait minutes for a retry or seconds for a slave's copy (a topic made
# on a master is waited for on its slave by nearly every master-and-slave test).
SLAVE_SYNC_INTERVAL = 0.5
CLUSTER_BROKER_SETTINGS = {
    "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(20 * 30000),
    "messageDelayLevel": "1s 1s 1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s",
    "slaveSyncInterval": str(int(SLAVE_SYNC_INTERVAL * 1000)),
}


TIMEOUT = 5.0


def send_request(
    topic: str,
    body: bytes,
    *,
    code: int = RequestCode.SEND_MESSAGE_V2,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    properties: dict | None = None,
    default_topic: str = "TBW102",
    group: str = "test-producer",
) -> RemotingCommand:
    props = dict(properties or {})
    if tags is not None:
        props["TAGS"] = tags
    if keys is not None:
        props["KEYS"] = keys
    fields = {
        "producerGroup": group,
        "topic": topic,
        "defaultTopic": default_topic,
        "defaultTopicQueueNums": 4,
        "queueId": queue_id,
        "sysFlag": 0,
        "bornTimestamp": 1700000000000,
        "flag": 0,
        "properties": encode_properties(props).decode(),
        "reconsumeTimes": 0,
        "unitMode": False,
    }
    if code != RequestCode.SEND_MESSAGE:
        fields = {V2[k]: v for k, v in fields.items()}
    return RemotingCommand.request(code, fields, body)


def pull_request(
    topic: str,
    queue_id: int,
    offset: int,
    *,
    group: str = "test-consumer",
    subscription: str = "*",
    suspend_ms: int = 0,
    max_msgs: int = 32,
    commit_offset: int | None = None,
    expression_type: str = "TAG",
) -> RemotingCommand:
    sys_flag = 4  # the subscription is in the request
    if suspend_ms:
        sys_flag |= 2  # long poll
    if commit_offset is not None:
        sys_flag |= 1  # commit this offset too
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_msgs,
            "sysFlag": sys_flag,
            "commitOffset": commit_offset or 0,
            "suspendTimeoutMillis": suspend_ms,
            "subscription": subscription,
            "subVersion": 0,
            "expressionType": expression_type,
        },
    )


def offset_request(code: int, topic: str, queue_id: int, group: str = "G", **extra) -> RemotingCommand:
    """QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET (with ``commitOffset=...``) of a group's queue."""
    return RemotingCommand.request(code, {"consumerGroup": group, "topic": topic, "queueId": queue_id, **extra})


def update_topic_request(topic: str, queues: int = 4, order: bool = False) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC, as ``rmq-admin topic create`` sends it."""
    return RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": topic,
            "readQueueNums": queues,
            "writeQueueNums": queues,
            "perm": 6,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": order,
        },
    )


def records(body) -> list[StoredMessage]:
    """The stored records of a pull response body, decoded (CRC checked)."""
    return decode_records(bytes(body), check_crc=True)


def call(client: RemotingClient, addr: str, request: RemotingCommand, timeout: float = TIMEOUT) -> RemotingCommand:
    return client.invoke_sync(addr, request, timeout)


BROKER_NAME = "broker-f"
TOPIC = "FailoverTopic"
QUEUES = 4
# sends kept in flight while the master is killed
IN_FLIGHT = 32
DROPPED = re.compile(r"dropped (\d+) bytes \((\d+) records\)")


def pull_all(client: RemotingClient, addr: str, topic: str = TOPIC, queues: int = QUEUES) -> list[StoredMessage]:
    """Every message of queues ``0..queues-1`` of ``topic`` on ``addr``, pulled from offset 0
    (records CRC-checked: a torn one raises RecordError)."""
    found: list[StoredMessage] = []
    for queue_id in range(queues):
        offset = 0
        while True:
            answer = call(client, addr, pull_request(topic, queue_id, offset, max_msgs=1000))
            if answer.code != ResponseCode.SUCCESS:
                break
            found += records(answer.body)
            offset = int(answer.ext_fields["nextBeginOffset"])
    return found


def bodies_in(client: RemotingClient, addr: str, topic: str = TOPIC, queues: int = QUEUES) -> set[bytes]:
    """The bodies of ``pull_all``."""
    return {bytes(m.body) for m in pull_all(client, addr, topic, queues)}


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


class ClientThread:
    """A client's loop (``_run``) on a thread of its own, from ``start()`` until ``stop()``."""

    def __init__(self, name: str):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        raise NotImplementedError


class Sender(ClientThread):
    """Sends to one broker address from a thread, ``IN_FLIGHT`` at a time, until stopped; keeps the
    bodies answered SEND_OK."""

    def __init__(self, client: RemotingClient, addr: str, first: int):
        super().__init__("failover-sender")
        self.client = client
        self.addr = addr
        self.next = first
        self.acked: list[bytes] = []
        self.failed = 0

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


class SteadySender(ClientThread):
    """A producer sending one message at a time to ``addr``, each given ``timeout`` seconds, until
    stopped; the seconds each SUCCESS took, and what failed."""

    def __init__(self, client: RemotingClient, addr: str, topic: str, timeout: float):
        super().__init__("steady-sender")
        self.client = client
        self.addr = addr
        self.topic = topic
        self.timeout = timeout
        self.answered: list[float] = []
        self.errors: list[str] = []

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                answer = call(self.client, self.addr, send_request(self.topic, b"steady"), timeout=self.timeout)
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            else:
                if answer.code == ResponseCode.SUCCESS:
                    self.answered.append(time.monotonic() - started)
                else:
                    self.errors.append(f"answered {answer.code}: {answer.remark}")
            time.sleep(0.01)

    def sends_during(self, action: Callable[[], object]) -> list[float]:
        """Run ``action()`` while this sends; the seconds of the sends answered meanwhile (and of
        two more), or AssertionError when one failed."""
        before = len(self.answered)
        action()
        wait_until(lambda: len(self.answered) > before + 2, 10, "sends answered after the action")
        assert not self.errors, self.errors[:5]
        return self.answered[before:]


class FailoverPair:
    def __init__(self, spawn, root: Path, namesrv_args: tuple[str, ...] = (), **extra: str):
        """``extra``: settings of both brokers; ``namesrv_args``: options of the name server."""
        self.spawn = spawn
        self.root = root
        self.namesrv_args = namesrv_args
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
        self.settings[name].update({key: settings[key] for key in BROKER_PORT_KEYS if key in settings})

    def start(self, role: str = "SYNC_MASTER") -> FailoverPair:
        self.client.start()
        _, self.namesrv_addr = start_namesrv(self.spawn, *self.namesrv_args)
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
        return bodies_in(self.client, self.addr(name))

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


# -- a forged name-server registration (issue 22, defect 1) ------------------------------------------

# The epoch a forger claims: the largest a registration field can carry.
FORGED_EPOCH = 2**31 - 1
# Where the forged master claims to be: an address no broker of the test listens on.
FORGED_ADDR = "127.0.0.1:1"


def forged_master_registration(broker_name: str, cluster: str = "DefaultCluster") -> RemotingCommand:
    """REGISTER_BROKER of a made-up master of ``broker_name`` in FORGED_EPOCH, unsigned, as anyone
    who can reach the name server can send it."""
    body = orjson.dumps(
        {
            "topicConfigSerializeWrapper": {"topicConfigTable": {}, "dataVersion": {"timestamp": 1, "counter": 1}},
            "filterServerList": [],
        }
    )
    ext = {
        "brokerName": broker_name,
        "brokerAddr": FORGED_ADDR,
        "clusterName": cluster,
        "haServerAddr": FORGED_ADDR,
        "brokerId": str(MASTER_ID),
        "compressed": "false",
        "bodyCrc32": str(crc32(body)),
        REGISTER_EPOCH: str(FORGED_EPOCH),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


@dataclasses.dataclass
class ForgeReport:
    seconds: float
    forged: dict[int, int]  # answer code -> how many forged registrations got it
    sends_ok: int
    send_refusals: list[str]  # "code remark" of every send not stored
    routes: list[dict[int, str]]  # the broker name's addresses, each time they changed (first included)


def hold_forged_registration(
    namesrv: str, broker_addr: str, broker_name: str, topic: str, seconds: float, interval: float = 0.5
) -> ForgeReport:
    """For ``seconds``: a forger repeats a forged master registration on one connection it holds
    open, every ``interval``, while a producer sends to the real master one message at a time and
    the routes of ``broker_name`` are read; what each saw."""
    forged: dict[int, int] = {}
    refusals: list[str] = []
    routes: list[dict[int, str]] = []
    sends_ok = 0
    with RemotingClient(name="forger") as forger, RemotingClient(name="producer") as producer:
        with AdminClient(namesrv, timeout=3.0) as admin:
            started = time.monotonic()
            next_forgery = started
            while (now := time.monotonic()) < started + seconds:
                if now >= next_forgery:
                    answer = forger.invoke_sync(namesrv, forged_master_registration(broker_name), TIMEOUT)
                    forged[answer.code] = forged.get(answer.code, 0) + 1
                    next_forgery = now + interval
                sent = call(producer, broker_addr, send_request(topic, b"during-forgery"))
                if sent.code == ResponseCode.SUCCESS:
                    sends_ok += 1
                else:
                    refusals.append(f"{sent.code} {sent.remark}")
                route = admin.broker_addrs(broker_name)
                if not routes or routes[-1] != route:
                    routes.append(route)
                time.sleep(0.02)
    return ForgeReport(round(time.monotonic() - started, 1), forged, sends_ok, refusals, routes)


# -- controller mode (issue 27): controllers, a name server and a broker set they decide -------------

# Small timeouts: a test's failover takes seconds, not RocketMQ's 10 s heartbeat timeout and 5 s polls.
# allAckInSyncStateSet: a send is acknowledged once the whole sync state set holds it, so that a paused
# master, its slaves gone to a newer one, acknowledges nothing (with inSyncReplicas=1 it would ack
# alone); a slave out of touch leaves the set after haMaxTimeSlaveNotCatchup. An idle slave reports
# its offset every haSendHeartbeatInterval: well within haMaxTimeSlaveNotCatchup (RocketMQ's 5 s and
# 15 s), or a caught-up slave of an idle master drops out of the set and is not electable.
CONTROLLER_MODE_BROKER_SETTINGS = {
    "allAckInSyncStateSet": "true",
    "haMaxTimeSlaveNotCatchup": "2000",
    "haSendHeartbeatInterval": "500",
    "controllerHeartBeatTimeoutMills": "2000",
    "syncBrokerMetadataPeriod": "1000",
    "checkSyncStateSetPeriod": "1000",
    "syncControllerMetadataPeriod": "2000",
    "registerNameServerPeriod": "1000",
}
CONTROLLER_SCAN_INTERVAL_MS = 200
CONTROLLER_MODE_BROKER = "broker-c"


class ControllerModeSet:
    """Controllers (a Raft group), a name server and one broker set in controller mode, all real
    processes; brokers are named "b0", "b1", ... and keep their store and ports across restarts."""

    def __init__(
        self,
        spawn,
        root: Path,
        brokers: int = 3,
        controllers: int = 1,
        credentials: tuple[str, str] | None = None,
        controller_settings: dict[str, str] | None = None,
        **extra: str,
    ):
        """``extra``: settings of every broker; ``controller_settings``: of every controller (over
        the harness's scan every CONTROLLER_SCAN_INTERVAL_MS); ``credentials``: the cluster account
        (access key, secret key) every process runs with (registrations and controller writes
        signed)."""
        self.spawn = spawn
        self.root = root
        self.credentials = credentials
        account = {"clusterAccessKey": credentials[0], "clusterSecretKey": credentials[1]} if credentials else {}
        self.client = RemotingClient()
        self.admin: AdminClient | None = None
        self.namesrv_addr = ""
        self.controllers = ControllerGroup(
            spawn,
            root,
            controllers,
            **{
                "scanNotActiveBrokerInterval": str(CONTROLLER_SCAN_INTERVAL_MS),
                **account,
                **(controller_settings or {}),
            },
        )
        self.settings: dict[str, dict[str, str]] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.paused: set[str] = set()
        self.runs: dict[str, int] = {}
        for i in range(brokers):
            name = f"b{i}"
            (root / name).mkdir(parents=True, exist_ok=True)
            settings = broker_settings(
                root / name,
                **{
                    **CLUSTER_BROKER_SETTINGS,
                    **CONTROLLER_MODE_BROKER_SETTINGS,
                    "brokerName": CONTROLLER_MODE_BROKER,
                    "enableControllerMode": "true",
                    **account,
                    **extra,
                },
            )
            del settings["namesrvListenPort"]
            self.settings[name] = settings
            self.runs[name] = 0

    @property
    def controller_addr(self) -> str:
        return self.controllers.controller_addr

    def addr(self, name: str) -> str:
        return f"{LOOPBACK}:{self.settings[name]['listenPort']}"

    def name_of(self, addr: str) -> str:
        return next(name for name in self.settings if self.addr(name) == addr)

    def log_path(self, name: str) -> Path:
        return self.root / f"{name}-{self.runs[name]}.log"

    def start(self) -> ControllerModeSet:
        self.client.start()
        key, secret = self.credentials or ("", "")
        namesrv_args = ("--cluster-access-key", key, "--cluster-secret-key", secret) if self.credentials else ()
        _, self.namesrv_addr = start_namesrv(self.spawn, *namesrv_args)
        self.admin = AdminClient(self.namesrv_addr, timeout=3.0, credentials=self.credentials).__enter__()
        self.controllers.start()
        for settings in self.settings.values():
            settings["controllerAddr"] = self.controller_addr
        for name in self.settings:
            self.start_broker(name)
        self.wait_set(len(self.settings))
        return self

    def close(self) -> None:
        for name in list(self.paused):
            self.resume(name)
        if self.admin is not None:
            self.admin.__exit__(None, None, None)
        self.controllers.close()
        self.client.shutdown()

    def start_broker(self, name: str) -> None:
        self.runs[name] += 1
        with open(self.log_path(name), "wb") as log:
            self.procs[name], _ = start_broker_process(
                self.spawn, self.settings[name], self.namesrv_addr, extra_args=("--log-level", "INFO"), stderr=log
            )

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)

    def pause(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGSTOP)
        self.paused.add(name)

    def resume(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGCONT)
        self.paused.discard(name)

    def controller_leader(self) -> int:
        """The index of the controller that leads."""
        assert self.admin is not None
        return self.controllers.addresses.index(self.admin.controller_leader(self.controller_addr))

    def routes(self) -> dict[int, str]:
        """The broker set's addresses as the name server routes them (0: the master)."""
        assert self.admin is not None
        return self.admin.broker_addrs(CONTROLLER_MODE_BROKER)

    def master(self) -> str | None:
        """The broker the name server routes as master."""
        addr = self.routes().get(MASTER_ID)
        return self.name_of(addr) if addr else None

    def runtime(self, name: str) -> dict[str, str]:
        assert self.admin is not None
        return self.admin.broker_runtime_info(self.addr(name))

    def wait_set(self, brokers: int, timeout: float = 30.0) -> str:
        """Until the name server routes a master and ``brokers`` - 1 slaves; the master's name."""
        wait_until(
            lambda: MASTER_ID in self.routes() and len(self.routes()) == brokers,
            timeout,
            lambda: f"a master and {brokers - 1} slaves routed (routes: {self.routes()})",
            0.05,
        )
        master = self.master()
        assert master is not None
        return master

    def send(self, name: str, body: bytes, timeout: float = 5.0) -> RemotingCommand:
        return self.client.invoke_sync(self.addr(name), send_request(TOPIC, body, keys=body.decode()), timeout)

    def create_topic(self) -> None:
        """TOPIC on the master; the slaves copy it (slaveSyncInterval)."""
        master = self.master()
        assert master is not None
        answer = self.client.invoke_sync(self.addr(master), update_topic_request(TOPIC, QUEUES), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark

    def bodies_on(self, name: str) -> set[bytes]:
        return bodies_in(self.client, self.addr(name))

    def new_master(self, old: str, timeout: float = 20.0) -> str:
        """Until the name server routes a master other than ``old``; its name."""

        def other() -> str | None:
            master = self.master()
            return master if master not in (None, old) else None

        return wait_until(other, timeout, lambda: f"a master other than {old} routed ({self.routes()})", 0.02)

    def wait_in_sync(self, timeout: float = 30.0) -> None:
        """Until the controllers count every broker in the sync state set (each may be elected)."""
        assert self.admin is not None
        admin = self.admin

        def in_sync() -> set[int]:
            try:
                _, info = admin.sync_state(self.controller_addr, CONTROLLER_MODE_BROKER)
            except (AdminError, RemotingError, ResponseError):
                return set()  # the controllers are electing a leader
            return {r.broker_id for r in info.in_sync}

        wait_until(
            lambda: len(in_sync()) == len(self.settings),
            timeout,
            lambda: f"every broker in the sync state set (it holds {sorted(in_sync())})",
            0.05,
        )

    def wait_converged(self, timeout: float = 30.0) -> int:
        """Until every slave's CommitLog ends where the master's does, byte-identical
        (``rmq-admin broker ha-verify``); that end."""
        master = self.master()
        assert master is not None and self.admin is not None
        slaves = [self.name_of(addr) for i, addr in self.routes().items() if i != MASTER_ID]

        def caught_up() -> bool:
            end = self.runtime(master)["commitLogMaxOffset"]
            return all(self.runtime(name)["commitLogMaxOffset"] == end for name in slaves)

        wait_until(caught_up, timeout, f"{slaves} caught up with {master}", 0.05)
        checks = self.admin.verify_replicas(CONTROLLER_MODE_BROKER, 1 << 20)
        assert checks and all(c.identical and c.verified_to == c.master_max_offset for c in checks), checks
        return checks[0].verified_to
