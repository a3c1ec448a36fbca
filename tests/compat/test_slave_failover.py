"""Acceptance (issue 11, item 3) with ali-ons, real processes: a master and its replicating slave; the
master is SIGKILLed while an ali-ons consumer reads; it goes on consuming from the slave once its
route drops the master, with no message skipped, and the offsets it committed meanwhile (to the
slave) are on the master once it returns. (tests/client/test_slave_failover.py: the same with our SDK.)"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.helpers.processes import BrokerPair

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TOPIC = "OnsFailover"
GROUP = "ons-failover"
COUNT = 60
# one message a pull, a pull every 0.1 s a queue (most are still on the brokers at the kill); routes
# every second, so the dead master leaves the consumer's route at once; offsets committed promptly
ONS_OPTIONS = {
    "pullBatchSize": 1,
    "pullInterval": 100,
    "pollNameServerInteval": 1000,
    "heartbeatBrokerInterval": 1000,
    "persistConsumerOffsetInterval": 500,
}


def test_ali_ons_reads_on_from_the_slave_while_the_master_is_down(spawn, tmp_path: Path, ons_clients):
    pair = BrokerPair(spawn, tmp_path, slave={"registerNameServerPeriod": "1000"}).start()
    try:
        pair.create_topic(TOPIC, 2)
        sent = ons_clients.run("ons_produce.js", pair.namesrv_addr, TOPIC, "ons-failover-p", COUNT, "TagA", "f")
        assert {s["status"] for s in sent} == {"SEND_OK"} and len(sent) == COUNT
        ends = pair.wait_replicated(TOPIC)
        # it stops once every body came (a redelivery counts once), or once idle for 8 s
        consumer = ons_clients.start(
            "ons_consume.js", pair.namesrv_addr, TOPIC, GROUP, "*", COUNT, 8_000, 0, 16,
            json.dumps({**ONS_OPTIONS, "distinct": True}),
        )  # fmt: skip
        received: list[str] = []
        reader = threading.Thread(
            target=lambda: received.extend(
                json.loads(line)["body"] for line in consumer.stdout if line.startswith('{"body"')
            )
        )
        reader.start()
        try:
            wait_until(lambda: len(received) >= 10, 30, "10 messages consumed from the master")
            pair.kill_master()
            assert len(set(received)) < COUNT, "all consumed before the kill: nothing left for the slave"
            consumer.wait(90)
        finally:
            if consumer.poll() is None:
                consumer.kill()
            reader.join(10)
        assert consumer.returncode == 0, consumer.stderr.read()[-3000:]
        expected = {f"f-body-{i}" for i in range(COUNT)}
        assert expected <= set(received), f"missing {sorted(expected - set(received))}"
        # it committed to the slave while the master was away; the master takes them when it returns
        pair.master_returns_with(TOPIC, GROUP, ends)
    finally:
        pair.close()
