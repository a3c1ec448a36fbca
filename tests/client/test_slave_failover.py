"""Acceptance (issue 11, item 3), real processes: a master and its replicating slave; the master is
SIGKILLed while our SDK's push consumer reads; it goes on consuming from the slave with no message
skipped, and the offsets it committed meanwhile (to the slave) are on the master once it returns.
(tests/compat/test_slave_failover.py tells the same with ali-ons.) A send meanwhile fails saying the
master is down, not that the topic is unknown."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rmq.client import Message, Producer, PushConsumer
from rmq.client.admin_client import AdminClient
from rmq.errors import ClientError
from tests.helpers import wait_until
from tests.helpers.processes import BrokerPair

TOPIC = "Failover"
GROUP = "cg-failover"
COUNT = 60
TIMERS = {"persist_consumer_offset_interval": 0.5, "heartbeat_broker_interval": 1.0, "poll_name_server_interval": 1.0}


@pytest.mark.slow
def test_consumers_read_on_from_the_slave_while_the_master_is_down(spawn, tmp_path: Path):
    pair = BrokerPair(spawn, tmp_path, slave={"registerNameServerPeriod": "1000"}).start()
    try:
        pair.create_topic(TOPIC, 2)
        with Producer("pg-failover", pair.namesrv_addr, instance_name="failover-p") as producer:
            for i in range(COUNT):
                assert producer.send(Message(TOPIC, f"m{i}".encode())).ok
        ends = pair.wait_replicated(TOPIC)
        received: list[bytes] = []
        lock = threading.Lock()

        def on_messages(msgs):
            with lock:
                received.extend(m.body for m in msgs)

        # one message a pull, a pull every 0.1 s a queue: most are still on the brokers at the kill
        consumer = PushConsumer(
            GROUP,
            pair.namesrv_addr,
            instance_name="failover-c",
            consume_from_where="FIRST_OFFSET",
            pull_batch_size=1,
            pull_interval=0.1,
            **TIMERS,
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(on_messages)
        with consumer:
            wait_until(lambda: len(received) >= 10, 20, "10 messages consumed from the master")
            pair.kill_master()
            with lock:
                assert len(set(received)) < COUNT, "all consumed before the kill: nothing left for the slave"
            expected = {f"m{i}".encode() for i in range(COUNT)}
            wait_until(
                lambda: expected <= set(received),
                40,
                lambda: f"every message consumed, the rest from the slave (missing {sorted(expected - set(received))})",
            )
        # the consumer committed to the slave while the master was away; the master returns from its
        # SIGKILL with whatever offsets it had written (up to 5 s old) and gets the slave's
        pair.master_returns_with(TOPIC, GROUP, ends)
    finally:
        pair.close()


@pytest.mark.slow
def test_a_send_while_the_only_master_is_down_says_so(spawn, tmp_path: Path):
    # issue 26: it said "no route for topic ... create the topic first", of a topic that exists
    pair = BrokerPair(spawn, tmp_path).start()
    try:
        pair.create_topic(TOPIC, 2)
        pair.kill_master()
        with AdminClient(pair.namesrv_addr, timeout=2.0) as admin:
            wait_until(lambda: not admin.master_addrs(), 10, "the name server forgets the killed master")
        with Producer("pg-master-down", pair.namesrv_addr, instance_name="master-down") as producer:
            with pytest.raises(ClientError) as info:
                producer.send(Message(TOPIC, b"x"))
        text = str(info.value)
        assert f"cannot send to topic {TOPIC!r}" in text and "broker 'broker-a' has no master alive" in text
        assert pair.slave_addr in text and "create the topic" not in text
    finally:
        pair.close()
