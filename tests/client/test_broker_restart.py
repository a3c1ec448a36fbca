"""The broker killed (SIGKILL) and restarted mid-stream: producers fail over or raise, never hang;
consumers resume; nothing acknowledged is lost."""

from __future__ import annotations

import threading
import time

from rmq.client import Message, Producer, PushConsumer
from rmq.errors import RmqError
from tests.helpers import wait_until

TIMERS = {"persist_consumer_offset_interval": 0.5, "heartbeat_broker_interval": 1.0, "poll_name_server_interval": 1.0}


def test_kill_and_restart_loses_nothing_acknowledged(cluster):
    topic = cluster.create_topic("Survivor", queues=4)
    acked: set[bytes] = set()
    failures: list[tuple[float, str]] = []
    received: set[bytes] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def on_messages(msgs):
        with lock:
            received.update(m.body for m in msgs)

    consumer = PushConsumer(
        "cg-survivor",
        cluster.namesrv_addr,
        instance_name="survivor-c",
        consume_from_where="FIRST_OFFSET",
        rebalance_interval=1.0,
        **TIMERS,
    )
    consumer.subscribe(topic)
    consumer.register_listener(on_messages)

    def produce(producer: Producer) -> None:
        i = 0
        while not stop.is_set():
            body = f"s{i}".encode()
            began = time.monotonic()
            try:
                producer.send(Message(topic, body), timeout=2.0)
                with lock:
                    acked.add(body)
            except RmqError as exc:
                failures.append((time.monotonic() - began, type(exc).__name__))
                time.sleep(0.05)
            i += 1
            time.sleep(0.002)

    with consumer, Producer("pg-survivor", cluster.namesrv_addr, instance_name="survivor-p", **TIMERS) as producer:
        sender = threading.Thread(target=produce, args=(producer,))
        sender.start()
        try:
            wait_until(lambda: len(acked) >= 50, 20, "50 sends acknowledged before the kill")
            cluster.kill_broker()
            wait_until(lambda: failures, 20, "a send failed while the broker was down")
            cluster.restart_broker()
            restarted_with = len(acked)
            wait_until(lambda: len(acked) >= restarted_with + 50, 30, "50 more sends acknowledged after the restart")
        finally:
            stop.set()
            sender.join(10)
        assert not sender.is_alive(), "a send hung"
        with lock:
            expected = set(acked)
        wait_until(
            lambda: expected <= received,
            30,
            lambda: f"every acknowledged message consumed ({len(expected - received)} missing)",
        )
    assert failures, "the broker was down for a second: some sends must have failed"
    assert max(elapsed for elapsed, _ in failures) < 3.0  # each failed within its timeout
    lost = expected - received
    assert not lost, f"{len(lost)} of {len(expected)} acknowledged messages never consumed"
