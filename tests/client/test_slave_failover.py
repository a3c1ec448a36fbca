"""Acceptance (issue 11, item 3), real processes: a master and its replicating slave; the master is
SIGKILLed while our SDK's push consumer reads; it goes on consuming from the slave with no message
skipped, and the offsets it committed meanwhile (to the slave) are on the master once it returns."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rmq.broker.slave_sync import SLAVE_SYNC_INTERVAL
from rmq.client import Message, Producer, PushConsumer
from rmq.protocol.codes import ResponseCode
from tests.helpers import wait_until
from tests.helpers.processes import BrokerPair, wait_registered
from tests.helpers.requests import update_topic_request

TOPIC = "Failover"
GROUP = "cg-failover"
COUNT = 60
TIMERS = {"persist_consumer_offset_interval": 0.5, "heartbeat_broker_interval": 1.0, "poll_name_server_interval": 1.0}


@pytest.mark.slow
def test_consumers_read_on_from_the_slave_while_the_master_is_down(spawn, tmp_path: Path):
    pair = BrokerPair(spawn, tmp_path, slave={"registerNameServerPeriod": "1000"}).start()
    try:
        master, slave = pair.master_addr, pair.slave_addr
        assert pair.call(master, update_topic_request(TOPIC, 2)).code == ResponseCode.SUCCESS
        wait_until(lambda: pair.has_topic(slave, TOPIC), SLAVE_SYNC_INTERVAL + 5, "the topic copied to the slave")
        with Producer("pg-failover", pair.namesrv_addr, instance_name="failover-p") as producer:
            for i in range(COUNT):
                assert producer.send(Message(TOPIC, f"m{i}".encode())).ok
        wait_until(
            lambda: pair.max_offsets(slave, TOPIC) == pair.max_offsets(master, TOPIC),
            10,
            "every message replicated",
        )
        ends = pair.max_offsets(master, TOPIC)
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
                at_kill = len(set(received))
            assert at_kill < COUNT, "everything was consumed before the kill: nothing left to read from the slave"
            expected = {f"m{i}".encode() for i in range(COUNT)}
            wait_until(
                lambda: expected <= set(received),
                40,
                lambda: f"every message consumed, the rest from the slave (missing {sorted(expected - set(received))})",
            )
            # the consumer commits to the slave while the master is away
            wait_until(
                lambda: all(pair.committed(slave, TOPIC, q, GROUP) == end for q, end in ends.items()),
                10,
                "the final offsets committed on the slave",
            )
        # the master returns from its SIGKILL with whatever offsets it had written (up to 5 s old)
        pair.start_master()
        wait_registered(pair.namesrv_addr, master, pair.master_proc)
        wait_until(
            lambda: all(pair.committed(master, TOPIC, q, GROUP) == end for q, end in ends.items()),
            SLAVE_SYNC_INTERVAL + 5,
            lambda: (
                "the offsets committed on the slave handed to the master "
                f"(master {[pair.committed(master, TOPIC, q, GROUP) for q in ends]}, ends {ends})"
            ),
        )
    finally:
        pair.close()
