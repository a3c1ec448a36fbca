"""Overload, with real broker processes (rmq.broker.processor.send's docstring maps RocketMQ's send
queue onto rmq): a flood far beyond what the broker serves leaves its memory bounded and a
well-behaved client served; a disk that stops answering turns sends away SYSTEM_BUSY as RocketMQ
does, and producers go to another broker meanwhile."""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from rmq.client import Message, Producer
from rmq.errors import ResponseError
from rmq.net.codec import RemotingCommand, encode
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.frames import RawConnection
from tests.helpers.overload import FLOOD_NON_READERS, MemorySampler, build_stall_shim
from tests.helpers.processes import (
    CLUSTER_BROKER_SETTINGS,
    Cluster,
    process_status,
    start_broker_process,
    start_namesrv,
)
from tests.helpers.requests import call, pull_request, send_request, update_topic_request

REPO_ROOT = Path(__file__).resolve().parents[2]
FLOOD_SECONDS = 6.0
# What the broker's heap may grow by under the flood: three connections that do not read hold at
# most max_pending_output (8 MiB) of answers each, the pulling one 8 MiB of (zero-copy) records,
# plus one read of requests each and the interpreter's churn. Without the bounds it would grow with
# every answer the non-readers are given (some 10 MiB a second here).
HEAP_GROWTH_BOUND_KIB = 160 * 1024


@pytest.fixture
def flood_cluster(spawn, tmp_path: Path):
    store = tmp_path / "store"
    store.mkdir()
    cluster = Cluster(spawn, store)
    try:
        yield cluster.start()
    finally:
        cluster.close()


def test_a_flood_leaves_memory_bounded_and_a_probe_client_served(flood_cluster, spawn):
    """Six connections write sends as fast as their sockets take them, so the broker always has
    more to read than it serves (three never read their answers while they write), and one
    pipelines pulls of 1000 messages without reading. A probe producer and puller beside them get every request answered
    (OK or SYSTEM_BUSY, never a timeout), the broker's heap stays bounded, and every send
    acknowledged is stored."""
    cluster = flood_cluster
    cluster.create_topic("Flood")
    cluster.create_topic("Probe", queues=1)
    pid = cluster.broker_proc.pid
    baseline = process_status(pid)
    with Producer("probe", cluster.namesrv_addr, instance_name="probe") as producer:
        quiet = _probe(producer, cluster, lambda n: n < 50)
        flood = spawn(
            "-m",
            "tests.helpers.overload",
            str(cluster.broker_port),
            "Flood",
            str(FLOOD_SECONDS),
            stdout=subprocess.PIPE,
            cwd=REPO_ROOT,
        )
        deadline = time.monotonic() + FLOOD_SECONDS + 45
        with MemorySampler(pid) as memory:
            loud = _probe(producer, cluster, lambda n: flood.poll() is None and time.monotonic() < deadline)
    out, _ = flood.communicate(timeout=60)
    tallies = json.loads(out)
    stored = sum(cluster.max_offsets("Flood").values())
    flood_acked = tallies["readers"].get("code:0", 0) + tallies["non_readers"].get("code:0", 0)
    growth = memory.peak("RssAnon") - baseline["RssAnon"]
    print(
        f"\nflood: {tallies}\nstored {stored} flood messages in {FLOOD_SECONDS:g} s "
        f"({stored / FLOOD_SECONDS:.0f}/s); acked {flood_acked}\n"
        f"broker memory KiB: baseline {baseline}, peak VmRSS {memory.peak('VmRSS')}, "
        f"peak RssAnon {memory.peak('RssAnon')} (+{growth}), peak RssFile {memory.peak('RssFile')}\n"
        f"probe before the flood: {quiet}\nprobe during the flood: {loud}"
    )
    assert flood.returncode == 0
    for kind, tally in tallies.items():  # every request written was answered, none dropped
        answered = sum(count for key, count in tally.items() if key.startswith("code:"))
        assert answered == tally["written"], (kind, tally)
    # the broker stopped reading the connections that did not read (the pulling one too: its
    # answers' zero-copy bodies count), and the sends it held meanwhile waited too long: refused
    assert tallies["non_readers"]["stalled"] == FLOOD_NON_READERS and tallies["pulls"]["stalled"] == 1, tallies
    assert tallies["non_readers"].get("[TIMEOUT_CLEAN_QUEUE]", 0) > 0, tallies
    assert growth < HEAP_GROWTH_BOUND_KIB, f"the broker's heap grew by {growth} KiB under the flood"
    assert loud.pulls > 0 and loud.acked, "the probe got nothing through"
    probe_bodies = {m.body for m in cluster.messages("Probe")}
    assert loud.acked <= probe_bodies, f"acknowledged and lost: {sorted(loud.acked - probe_bodies)[:5]}"
    assert flood_acked <= stored


@dataclasses.dataclass
class Probe:
    """What a well-behaved client saw: send latencies, bodies acknowledged, refusals, pulls served."""

    latencies: list[float] = dataclasses.field(default_factory=list)
    acked: set[bytes] = dataclasses.field(default_factory=set)
    busy: int = 0
    pulls: int = 0

    def __str__(self) -> str:
        ms = sorted(x * 1000 for x in self.latencies)
        return (
            f"{len(ms)} sends ({self.busy} SYSTEM_BUSY), {self.pulls} pulls; send ms median "
            f"{statistics.median(ms):.1f}, p99 {ms[int(len(ms) * 0.99)]:.1f}, max {ms[-1]:.1f}"
        )


def _probe(producer: Producer, cluster: Cluster, go_on: Callable[[int], bool]) -> Probe:
    """Send to Probe every 10 ms with the SDK's usual timeout (one that passes raises and fails the
    test), and pull it every 10th send, while ``go_on(sends so far)``."""
    probe = Probe()
    n = 0
    while go_on(n):
        body = b"probe-%d" % n
        n += 1
        began = time.monotonic()
        try:
            producer.send(Message("Probe", body))
            probe.acked.add(body)
        except ResponseError as refusal:
            assert refusal.code == ResponseCode.SYSTEM_BUSY, refusal
            probe.busy += 1
        probe.latencies.append(time.monotonic() - began)
        if n % 10 == 0:
            answer = call(cluster.client, cluster.broker_addr, pull_request("Probe", 0, 0, max_msgs=32), 3.0)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            probe.pulls += 1
        time.sleep(0.01)
    return probe


def _send_frame(topic: str, opaque: int) -> bytes:
    request = send_request(topic, b"x" * 64)
    request.opaque = opaque
    return encode(request)


def _send_back_frame(topic: str, opaque: int) -> bytes:
    """CONSUMER_SEND_MSG_BACK of the CommitLog's first message (the one a consumer failed on)."""
    ext = {"group": "busy-consumers", "offset": 0, "delayLevel": 0, "originMsgId": "", "originTopic": topic}
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
    request.opaque = opaque
    return encode(request)


def _runtime(client, addr: str) -> dict[str, str]:
    answer = call(client, addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    return json.loads(answer.body)["table"]


def test_a_stalled_disk_turns_sends_away_busy_and_producers_go_to_another_broker(spawn, tmp_path: Path, client):
    """broker-a runs SYNC_FLUSH over a disk whose msync stalls (an LD_PRELOAD shim) with room for 8
    unanswered sends: the 9th and later are [OVERLOAD]; once the stall is older than
    osPageCacheBusyTimeOutMills (1 s) sends, and consumers' send-backs, are [PCBUSY_CLEAN_QUEUE]; a
    producer meanwhile lands every message on broker-b; when the disk answers again the held sends
    are answered, new ones stored, and nothing refused was stored."""
    shim = build_stall_shim(tmp_path)
    stall = tmp_path / "stall"
    _, namesrv = start_namesrv(spawn)
    metrics_port = free_port()
    brokers = {}
    for name, extra, env in (
        (
            "broker-a",
            {
                "flushDiskType": "SYNC_FLUSH",
                "sendThreadPoolQueueCapacity": "8",
                "syncFlushTimeout": "20000",
                "metricsExporterType": "PROM",
                "metricsPromExporterHost": LOOPBACK,
                "metricsPromExporterPort": str(metrics_port),
            },
            {"LD_PRELOAD": str(shim), "RMQ_STALL_MSYNC": str(stall)},
        ),
        ("broker-b", {}, None),
    ):
        settings = broker_settings(tmp_path / name, brokerName=name, **CLUSTER_BROKER_SETTINGS, **extra)
        del settings["namesrvListenPort"]
        _, brokers[name] = start_broker_process(spawn, settings, namesrv, ("--log-level", "WARNING"), env=env)
    for addr in brokers.values():
        assert call(client, addr, update_topic_request("Busy", queues=1)).code == ResponseCode.SUCCESS
    port_a = int(brokers["broker-a"].rpartition(":")[2])
    try:
        with RawConnection(port_a) as conn:
            conn.send(_send_frame("Busy", 1))
            assert conn.read_commands(1)[0].code == ResponseCode.SUCCESS

            stall.touch()
            conn.send(b"".join(_send_frame("Busy", opaque) for opaque in range(100, 120)))
            refused = conn.read_commands(12, timeout=3)
            assert {a.opaque for a in refused} == set(range(108, 120))
            for answer in refused:
                assert answer.code == ResponseCode.SYSTEM_BUSY
                assert answer.remark == "[OVERLOAD]system busy, start flow control for a while"
            runtime = _runtime(client, brokers["broker-a"])
            assert (runtime["sendThreadPoolQueueSize"], runtime["sendThreadPoolQueueCapacity"]) == ("8", "8")

            wait_until(
                lambda: int(_runtime(client, brokers["broker-a"])["pageCacheLockTimeMills"]) > 1000,
                5,
                "the stalled flush counted as a busy disk",
            )
            conn.send(_send_frame("Busy", 200))
            (pcbusy,) = conn.read_commands(1, timeout=3)
            assert pcbusy.code == ResponseCode.SYSTEM_BUSY
            assert pcbusy.remark.startswith("[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while")
            # a consumer handing a message back: RocketMQ runs it on the send thread pool, refused alike
            conn.send(_send_back_frame("Busy", 201))
            (send_back,) = conn.read_commands(1, timeout=3)
            assert send_back.code == ResponseCode.SYSTEM_BUSY, send_back.remark
            assert send_back.remark.startswith("[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while")

            with Producer("busy-producer", namesrv, instance_name="busy", send_msg_timeout=3.0) as producer:
                results = [producer.send(Message("Busy", b"elsewhere-%d" % i)) for i in range(10)]
            assert {r.message_queue.broker_name for r in results} == {"broker-b"}

            with urllib.request.urlopen(f"http://{LOOPBACK}:{metrics_port}/metrics", timeout=5) as page:
                metrics = page.read().decode()
            assert _sample(metrics, "rocketmq_processor_watermark", 'processor="send"') == 8
            assert _sample(metrics, "rmq_system_busy_total", 'reason="OVERLOAD"') == 12
            assert _sample(metrics, "rmq_system_busy_total", 'reason="PCBUSY_CLEAN_QUEUE"') >= 2

            stall.unlink()
            held = conn.read_commands(8, timeout=5)
            assert {a.opaque for a in held} == set(range(100, 108))
            assert {a.code for a in held} == {ResponseCode.SUCCESS}
            conn.send(_send_frame("Busy", 300))
            assert conn.read_commands(1, timeout=5)[0].code == ResponseCode.SUCCESS
    finally:
        stall.unlink(missing_ok=True)
    stored = call(
        client,
        brokers["broker-a"],
        RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Busy", "queueId": 0}),
    )
    assert stored.ext_fields["offset"] == "10"  # 1 + the 8 held + 1: none of the 13 refused


def _sample(page: str, name: str, label: str) -> float:
    for line in page.splitlines():
        if line.startswith(name + "{") and label in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}{{{label}}} in the metrics page")
