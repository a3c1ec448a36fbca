"""Consumers and a master with its slave (in-process brokers of one brokerName behind one name server,
the slave replicating): each queue is pulled from the broker its last answer suggested; a master
that goes away is replaced by its slave for pulls and offset commits, and taken back once it returns.
Each broker's pull handler records the offsets it was asked for, to tell which one served a pull."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.broker.controller import BrokerController
from rmq.client import PullConsumer
from rmq.client.message import MessageExt
from rmq.namesrv import NameServer, NamesrvConfig
from rmq.protocol.codes import RequestCode
from rmq.protocol.message_queue import MessageQueue
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.broker import InProcessBrokers, create_topic, put

TOPIC = "FromWhichNode"
GROUP = "cg-which-node"
MQ = MessageQueue(TOPIC, "broker-a", 0)


class MasterAndSlave:
    def __init__(self, root: Path):
        self.root = root
        self.namesrv = NameServer(NamesrvConfig(listen_host=LOOPBACK, listen_port=0)).start()
        self.brokers = InProcessBrokers(root)
        self.master_settings: dict[str, str] = {}
        # "master" / "slave" -> the queue offsets their pull handler was asked for, in order
        self.pulls: dict[str, list[int]] = {"master": [], "slave": []}
        self.master: BrokerController | None = None
        self.slave: BrokerController | None = None

    def start_master(self, **settings: str) -> BrokerController:
        """The master; started again, with the same store and ports."""
        self.master_settings = self.master_settings or {
            "namesrvAddr": self.namesrv.address,
            "storePathRootDir": str(self.root / "master"),
            "listenPort": str(free_port()),
            "haListenPort": str(free_port()),
            **settings,
        }
        self.master = self._recording("master", self.brokers.start(**self.master_settings))
        return self.master

    def start_slave(self, **settings: str) -> BrokerController:
        self.slave = self._recording(
            "slave",
            self.brokers.start(
                namesrvAddr=self.namesrv.address,
                storePathRootDir=str(self.root / "slave"),
                brokerRole="SLAVE",
                brokerId="1",
                **settings,
            ),
        )
        return self.slave

    def _recording(self, name: str, broker: BrokerController) -> BrokerController:
        if broker.send_lane is not None:
            broker.send_lane.pull_lane = None  # it would answer pulls before any handler could record them
        pull = broker.server._processors[RequestCode.PULL_MESSAGE]

        def recording_pull(channel, request):
            self.pulls[name].append(int(request.ext_fields["queueOffset"]))
            return pull(channel, request)

        broker.server.register_processor(RequestCode.PULL_MESSAGE, recording_pull)
        return broker

    def wait_replicated(self, count: int) -> None:
        assert self.slave is not None
        wait_until(
            lambda: self.slave.store.get_max_offset_in_queue(TOPIC, 0) == count, 10, f"{count} messages replicated"
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


def send(broker: BrokerController, first: int, count: int) -> None:
    for i in range(first, first + count):
        put(broker, TOPIC, f"m{i}".encode())


def poll_until(consumer: PullConsumer, count: int, timeout: float = 20.0) -> list[str]:
    got: list[MessageExt] = []
    wait_until(lambda: got.extend(consumer.poll(timeout=0.5)) or len(got) >= count, timeout, f"{count} messages")
    return [m.body.decode() for m in got]


def consumer_of(pair: MasterAndSlave, **options) -> PullConsumer:
    return PullConsumer(
        GROUP,
        pair.namesrv.address,
        instance_name="which-node",
        auto_commit=False,
        consume_from_where="FIRST_OFFSET",
        **options,
    )


def test_each_queue_is_pulled_from_the_broker_its_last_answer_suggested(pair):
    # any read short of the CommitLog's end is "far behind" on this master: it steers the queue to
    # slave 1, whose answers (slaveReadEnable off there) steer it back
    master = pair.start_master(slaveReadEnable="true", accessMessageInMemoryMaxRatio="0")
    create_topic(master, TOPIC, 1)
    slave = pair.start_slave()
    create_topic(slave, TOPIC, 1)  # the slave's copy of the master's topics comes every 10 s
    send(master, 0, 3)
    pair.wait_replicated(3)
    with consumer_of(pair, pull_batch_size=1) as consumer:
        consumer.assign([MQ])
        assert poll_until(consumer, 3) == ["m0", "m1", "m2"]
    assert pair.pulls["master"][:2] == [0, 2] and pair.pulls["slave"][:1] == [1]


@pytest.mark.slow
def test_a_slave_replaces_a_master_that_went_away_until_it_returns(pair):
    master = pair.start_master()
    create_topic(master, TOPIC, 1)
    slave = pair.start_slave(registerNameServerPeriod="1000")  # learns at once the master went or came
    create_topic(slave, TOPIC, 1)
    send(master, 0, 3)
    pair.wait_replicated(3)
    with consumer_of(pair) as consumer:
        consumer.assign([MQ])
        assert poll_until(consumer, 3) == ["m0", "m1", "m2"]
        master_addr = master.broker_addr
        # the master stops (the pull parked there fails); the client's route still lists it, and it
        # refuses connections: the slave takes the queue from where the master left off
        master.shutdown()
        wait_until(lambda: 3 in pair.pulls["slave"], 10, "a pull at offset 3 on the slave")
        # offsets go to the slave meanwhile
        consumer.commit()
        assert slave.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 3
        # the master returns (same store, same ports) and takes sends; the slave copies them and
        # serves its parked pull, suggesting the master, which the next pull goes to once its
        # address is tried again
        master = pair.start_master()
        wait_until(lambda: consumer.instance.reachable(master_addr), 10, "the master's address tried again")
        send(master, 3, 3)
        assert poll_until(consumer, 3) == ["m3", "m4", "m5"]
        wait_until(lambda: 6 in pair.pulls["master"], 10, "a pull at offset 6 on the master")
        # the offset committed on the slave reached the master (the slave hands it over)
        wait_until(
            lambda: master.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) >= 3, 15, "offset 3 on the master"
        )
