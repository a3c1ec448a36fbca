"""Consumers and a master with a slave (in-process brokers of one brokerName behind one name server):
each queue is pulled from the broker its last answer suggested; a master that goes away is replaced
by its slave for pulls and offset commits, and taken back once it returns.

Replication is not what these tests look at: the same queue offsets are written into both stores,
with bodies that tell which broker served them ("m..." the master, "s..." the slave).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.broker.controller import BrokerController
from rmq.client import PullConsumer
from rmq.client.message import MessageExt
from rmq.namesrv import NameServer, NamesrvConfig
from rmq.protocol.message_queue import MessageQueue
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.broker import InProcessBrokers, create_topic

TOPIC = "FromWhichNode"
GROUP = "cg-which-node"
MQ = MessageQueue(TOPIC, "broker-a", 0)


class MasterAndSlave:
    def __init__(self, root: Path):
        self.root = root
        self.namesrv = NameServer(NamesrvConfig(listen_host=LOOPBACK, listen_port=0)).start()
        self.brokers = InProcessBrokers(root)
        self.master_settings: dict[str, str] = {}

    def start_master(self, **settings: str) -> BrokerController:
        self.master_settings = self.master_settings or {
            "namesrvAddr": self.namesrv.address,
            "storePathRootDir": str(self.root / "master"),
            "listenPort": str(free_port()),
            **settings,
        }
        return self.brokers.start(**self.master_settings)

    def start_slave(self, **settings: str) -> BrokerController:
        return self.brokers.start(
            namesrvAddr=self.namesrv.address,
            storePathRootDir=str(self.root / "slave"),
            brokerRole="SLAVE",
            brokerId="1",
            **settings,
        )

    def close(self) -> None:
        self.brokers.shutdown_all()
        self.namesrv.shutdown()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[MasterAndSlave]:
    p = MasterAndSlave(tmp_path)
    try:
        yield p
    finally:
        p.close()


def fill(broker: BrokerController, prefix: str, count: int) -> None:
    for _ in range(count):
        offset = broker.store.get_max_offset_in_queue(TOPIC, 0)
        assert broker.store.put_message(TOPIC, 0, f"{prefix}{offset}".encode()).ok


def poll_until(consumer: PullConsumer, count: int, timeout: float = 20.0) -> list[str]:
    got: list[MessageExt] = []
    wait_until(lambda: got.extend(consumer.poll(timeout=0.5)) or len(got) >= count, timeout, f"{count} messages")
    return [m.body.decode() for m in got]


def consumer_of(pair: MasterAndSlave, **options) -> PullConsumer:
    consumer = PullConsumer(
        GROUP,
        pair.namesrv.address,
        instance_name="which-node",
        auto_commit=False,
        consume_from_where="FIRST_OFFSET",
        **options,
    )
    return consumer


def test_each_queue_is_pulled_from_the_broker_its_last_answer_suggested(pair):
    # any read short of the end is "far behind" on this master: it steers the queue to slave 1,
    # whose answers (slaveReadEnable off there) steer it back
    master = pair.start_master(slaveReadEnable="true", accessMessageInMemoryMaxRatio="0")
    create_topic(master, TOPIC, 1)
    slave = pair.start_slave()
    create_topic(slave, TOPIC, 1)
    fill(master, "m", 3)
    fill(slave, "s", 3)
    with consumer_of(pair, pull_batch_size=1) as consumer:
        consumer.assign([MQ])
        assert poll_until(consumer, 3) == ["m0", "s1", "m2"]


@pytest.mark.slow
def test_a_slave_replaces_a_master_that_went_away_until_it_returns(pair):
    master = pair.start_master()
    create_topic(master, TOPIC, 1)
    slave = pair.start_slave()
    create_topic(slave, TOPIC, 1)
    fill(master, "m", 3)
    fill(slave, "s", 6)
    with consumer_of(pair) as consumer:
        consumer.assign([MQ])
        assert poll_until(consumer, 3) == ["m0", "m1", "m2"]
        master_addr = master.broker_addr
        # the master stops (its pull parked there fails); the client's route still lists it, and
        # it refuses connections: the slave serves the queue from where the master left off
        master.shutdown()
        assert poll_until(consumer, 3) == ["s3", "s4", "s5"]
        # offsets go to the slave meanwhile
        consumer.commit()
        assert slave.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 6
        # the master returns (same store, same port): once its address is tried again, the queue
        # goes back to it (the slave's next answer suggests the master)
        master = pair.start_master()
        fill(master, "m", 5)
        wait_until(lambda: consumer.instance.reachable(master_addr), 10, "the master's address tried again")
        fill(slave, "s", 1)
        assert poll_until(consumer, 2) == ["s6", "m7"]
        # and the slave's offset reached the master (the slave hands over what was committed on it)
        wait_until(
            lambda: master.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) >= 6, 15, "offset 6 on the master"
        )
