"""A broker process's connections (serverChannelMaxIdleTimeSeconds, serverFrameTimeoutSeconds,
serverMaxConnections): idle, trickling and surplus connections are closed while a client beside them
sends on; 10,000 connections opened at once leave that client served."""

from __future__ import annotations

import json
import resource
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from rmq.net import RemotingClient, RemotingCommand
from rmq.net.codec_py import encode
from rmq.net.server import RESERVED_DESCRIPTORS
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.frames import RawConnection, trickle_until_closed
from tests.helpers.processes import (
    FloodReport,
    SteadySender,
    flood_connections,
    process_status,
    raise_open_file_limit,
    start_broker_process,
)
from tests.helpers.requests import (
    call,
    heartbeat_request,
    pull_request,
    records,
    send_request,
    update_topic_request,
)

TOPIC = "ConnTopic"
GROUP = "ConnGroup"
# A RocketMQ producer's sendMsgTimeout: what "answered in time" means to the client beside.
SEND_TIMEOUT = 3.0
FLOOD = 10_000


def consumers_of(client: RemotingClient, addr: str, group: str) -> list[str]:
    request = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    answer = call(client, addr, request)
    if answer.code != ResponseCode.SUCCESS:
        return []  # RocketMQ answers SYSTEM_ERROR "no consumer for this group"
    return json.loads(answer.body)["consumerIdList"]


def test_idle_trickling_and_surplus_connections_are_closed_while_a_producer_sends(spawn, store_dir, client):
    metrics_port = free_port()
    settings = broker_settings(
        store_dir,
        serverChannelMaxIdleTimeSeconds="2",
        serverFrameTimeoutSeconds="1",
        serverMaxConnections="6",
        serverSocketBacklog="7",
        metricsExporterType="PROM",
        metricsPromExporterHost=LOOPBACK,
        metricsPromExporterPort=str(metrics_port),
    )
    _, addr = start_broker_process(spawn, settings)
    port = int(settings["listenPort"])
    if shutil.which("ss"):  # the listening socket's backlog is its Send-Q in ss
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True)
        assert listening.stdout.split()[2] == "7", listening.stdout
    sender = SteadySender(client, addr, TOPIC, SEND_TIMEOUT).start()
    try:
        wait_until(lambda: len(sender.answered) >= 3, 10, "the producer's first sends answered")

        # A consumer that falls silent is closed after the idle time, and the broker forgets it.
        consumer = RawConnection(port)
        consumer.send(encode(heartbeat_request("silent@1", GROUP, TOPIC)))
        answer = consumer.read_commands(1)[0]
        while not answer.is_response:  # NOTIFY_CONSUMER_IDS_CHANGED may come first
            answer = consumer.read_commands(1)[0]
        assert answer.code == ResponseCode.SUCCESS
        assert consumers_of(client, addr, GROUP) == ["silent@1"]
        started = time.monotonic()
        assert consumer.is_closed_by_peer(timeout=10.0)
        assert time.monotonic() - started >= 1.5  # the idle time (2 s), less the heartbeat's answer
        consumer.close()
        wait_until(lambda: consumers_of(client, addr, GROUP) == [], 5, "the closed consumer dropped")

        # A frame trickled in a byte every 50 ms: never idle, closed once the frame is 1 s old.
        def trickle() -> None:
            frame = encode(send_request(TOPIC, b"x" * 2000))
            with socket.create_connection((LOOPBACK, port), timeout=5) as loris:
                assert trickle_until_closed(loris, frame, interval=0.05, limit=10.0) >= 1.0

        assert sender.sends_during(trickle)

        # serverMaxConnections=6: the producer's connection and 5 more are served, the next refused.
        inside = [RawConnection(port) for _ in range(5)]
        try:
            for conn in inside:
                conn.send(encode(send_request(TOPIC, b"inside")))
                assert conn.read_commands(1)[0].code == ResponseCode.SUCCESS
            for _ in range(10):
                with RawConnection(port) as surplus:
                    assert surplus.is_closed_by_peer(timeout=3.0)
            for conn in inside:
                conn.send(encode(send_request(TOPIC, b"inside again")))
                assert conn.read_commands(1)[0].code == ResponseCode.SUCCESS
        finally:
            for conn in inside:
                conn.close()
        assert _metric(metrics_port, "rmq_connections_refused_total") == 10
    finally:
        sender.stop()
    assert not sender.errors, sender.errors[:5]


def test_ten_thousand_connections_at_once_leave_a_producer_served(spawn, store_dir, client):
    needed = FLOOD + RESERVED_DESCRIPTORS + 100  # the broker's connections and its own files
    limits = raise_open_file_limit(needed)  # the broker started below inherits it
    if limits is None:
        pytest.skip(f"the RLIMIT_NOFILE hard limit is below {needed}: cannot hold {FLOOD} connections")
    try:
        settings = broker_settings(store_dir)
        proc, addr = start_broker_process(spawn, settings)
        sender = SteadySender(client, addr, TOPIC, SEND_TIMEOUT).start()
        floods: list[FloodReport] = []
        try:
            wait_until(lambda: len(sender.answered) >= 3, 10, "the producer's first sends answered")
            for _ in range(2):
                latencies = sender.sends_during(
                    lambda: floods.append(flood_connections(proc.pid, int(settings["listenPort"]), FLOOD))
                )
                assert max(latencies) < SEND_TIMEOUT
        finally:
            sender.stop()
        assert not sender.errors, sender.errors[:5]
        first, second = floods
        # no thread per connection; the memory a flood took is the broker's to reuse: the next one
        # needs no more (RssAnon stays near its first peak, not back at the start: Python keeps
        # freed memory in its arenas)
        assert first.before["Threads"] == first.peak["Threads"] == second.after["Threads"], floods
        grown = first.peak["RssAnon"] - first.before["RssAnon"]
        assert second.peak["RssAnon"] <= first.peak["RssAnon"] + grown // 4, floods
        print(
            f"\n{FLOOD} connections held in {first.accept_seconds:.2f} s, then {second.accept_seconds:.2f} s; "
            f"broker RssAnon {first.before['RssAnon']} -> {first.peak['RssAnon']} -> {first.after['RssAnon']} -> "
            f"{second.peak['RssAnon']} -> {second.after['RssAnon']} kB ({first.rss_per_connection:.0f} B a "
            f"connection), threads {first.before['Threads']} -> {second.after['Threads']}; slowest send "
            f"{max(sender.answered) * 1000:.0f} ms"
        )
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=5) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not served")


# serverMaxPendingWriteBytes of the test below, and what one connection may hold on its own
# (rmq.net.channel.MAX_PENDING_OUTPUT_DEFAULT): NON_READERS of them would hold 8 times the bound.
PENDING_BOUND_MIB = 16
NON_READERS = 16
PULLS_EACH = 300  # of some 130 KiB answers each: past the 8 MiB a connection may hold on its own
# What the broker's own memory may grow by: up to twice the bound (those under their share when the
# total passes it still fill it), the requests read and the interpreter's churn.
PENDING_GROWTH_BOUND_KIB = (2 * PENDING_BOUND_MIB + 24) * 1024


def _stable(pid: int, key: str, seconds: float, timeout: float) -> int:
    """``key`` of the process's status once it has moved less than 1 MiB for ``seconds``."""
    last, since = process_status(pid)[key], time.monotonic()
    deadline = since + timeout
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = process_status(pid)[key]
        if abs(now - last) > 1024:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return now
    raise AssertionError(f"{key} still moving after {timeout} s (last {last} KiB)")


def test_connections_that_never_read_are_held_to_the_total_bound_and_a_reader_served(spawn, store_dir, client):
    """Sixteen connections pipeline pulls and never read the answers (some 38 MiB each): the broker
    stops reading them once all its unsent answers pass serverMaxPendingWriteBytes, its memory stays
    near that bound instead of 16 times 8 MiB, a client beside them is served, and a connection that
    reads at last gets every answer it asked for. Once they leave, the memory comes back."""
    settings = broker_settings(store_dir, serverMaxPendingWriteBytes=f"{PENDING_BOUND_MIB}m")
    proc, addr = start_broker_process(spawn, settings)
    port = int(settings["listenPort"])
    assert call(client, addr, update_topic_request(TOPIC, 1)).code == ResponseCode.SUCCESS
    for n in range(32):
        # records of 4 KiB: a pull's answer copies them (rmq.net.channel.COPY_LIMIT), heap the broker holds
        assert call(client, addr, send_request(TOPIC, b"%04d" % n * 1024)).code == ResponseCode.SUCCESS
    pulls = b"".join(encode(_with_opaque(pull_request(TOPIC, 0, 0, max_msgs=32), i)) for i in range(PULLS_EACH))
    baseline = _stable(proc.pid, "RssAnon", 0.3, 10)
    non_readers = []
    try:
        for _ in range(NON_READERS):
            conn = RawConnection(port, receive_buffer=64 * 1024)  # the kernel keeps little for it
            non_readers.append(conn)
            conn.send(pulls)  # the broker's receive buffer takes them, whether it reads or not
        held = _stable(proc.pid, "RssAnon", 1.0, 30)
        served = call(client, addr, pull_request(TOPIC, 0, 0, max_msgs=32))
        assert served.code == ResponseCode.SUCCESS and len(records(served.body)) == 32
        growth = held - baseline
        print(f"\nbroker RssAnon: baseline {baseline} KiB, held by {NON_READERS} non-readers {held} KiB (+{growth})")
        assert growth < PENDING_GROWTH_BOUND_KIB, f"the broker's memory grew by {growth} KiB"
        answers = non_readers[0].read_commands(PULLS_EACH, timeout=20)
        assert sorted(a.opaque for a in answers) == list(range(PULLS_EACH))
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
    finally:
        for conn in non_readers:
            conn.close()
    wait_until(
        lambda: process_status(proc.pid)["RssAnon"] - baseline < growth / 2,
        10,
        lambda: f"the broker's memory given back once they left: +{process_status(proc.pid)['RssAnon'] - baseline} KiB",
    )


def _with_opaque(request: RemotingCommand, opaque: int) -> RemotingCommand:
    request.opaque = opaque
    return request
