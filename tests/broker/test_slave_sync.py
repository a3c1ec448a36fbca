"""A slave's metadata follows its master (real processes): topics, consumer offsets, delay offsets
and subscription groups are copied within one sync period, and offsets committed on the slave while
the master is away are not lost when it returns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.client.admin_client import AdminClient
from rmq.perf.procs import wait_registered
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import wait_until
from tests.helpers.processes import (
    SLAVE_SYNC_INTERVAL,
    BrokerPair,
    start_broker_process,
    start_namesrv,
)
from tests.helpers.requests import pull_request, send_request, update_topic_request

TOPIC = "TopicSync"
GROUP = "GroupSync"
# One sync period, plus the time a round and a process under load may take.
WITHIN_ONE_PERIOD = SLAVE_SYNC_INTERVAL + 5.0


@pytest.fixture
def pair(spawn, tmp_path: Path) -> Iterator[BrokerPair]:
    # the slave re-registers every second, so it learns at once that its master went or came back;
    # the master flushes whatever is written every round (delay offsets are published once flushed)
    p = BrokerPair(
        spawn, tmp_path, master={"flushCommitLogLeastPages": "0"}, slave={"registerNameServerPeriod": "1000"}
    )
    try:
        yield p.start()
    finally:
        p.close()


@pytest.mark.slow
def test_slave_copies_topics_offsets_groups_and_delay_offsets(pair):
    master, slave = pair.master_addr, pair.slave_addr
    assert pair.call(master, update_topic_request(TOPIC, 2)).code == ResponseCode.SUCCESS
    pair.commit(master, TOPIC, 1, GROUP, 7)
    # a pull by an unknown group creates its subscription group on the master
    assert pair.call(master, pull_request(TOPIC, 0, 0, group=GROUP)).code == ResponseCode.PULL_NOT_FOUND
    # a message of delay level 1 (1 s here) moves level 1's delay offset once delivered
    delayed = send_request(TOPIC, b"later", properties={"DELAY": "1"})
    assert pair.call(master, delayed).code == ResponseCode.SUCCESS
    wait_until(
        lambda: pair.get_all(master, RequestCode.GET_ALL_DELAY_OFFSET)["offsetTable"].get("1") == 1,
        10,
        "the delayed message delivered on the master",
    )

    def copied() -> bool:
        topics = pair.get_all(slave, RequestCode.GET_ALL_TOPIC_CONFIG)
        offsets = pair.get_all(slave, RequestCode.GET_ALL_CONSUMER_OFFSET)["offsetTable"]
        delay = pair.get_all(slave, RequestCode.GET_ALL_DELAY_OFFSET)["offsetTable"]
        groups = pair.get_all(slave, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)["subscriptionGroupTable"]
        return (
            topics["topicConfigTable"].get(TOPIC, {}).get("readQueueNums") == 2
            and offsets.get(f"{TOPIC}@{GROUP}", {}).get("1") == 7
            and delay.get("1") == 1
            and GROUP in groups
        )

    wait_until(copied, WITHIN_ONE_PERIOD, "topics, offsets, delay offsets and groups copied to the slave")
    # the copy is the master's, DataVersion included
    assert pair.get_all(slave, RequestCode.GET_ALL_TOPIC_CONFIG) == pair.get_all(
        master, RequestCode.GET_ALL_TOPIC_CONFIG
    )
    assert pair.committed(slave, TOPIC, 1, GROUP) == 7


@pytest.mark.slow
def test_offsets_committed_on_the_slave_survive_the_masters_return(pair):
    master, slave = pair.master_addr, pair.slave_addr
    assert pair.call(master, update_topic_request(TOPIC, 2)).code == ResponseCode.SUCCESS
    pair.commit(master, TOPIC, 0, GROUP, 3)
    pair.commit(master, TOPIC, 1, GROUP, 4)
    wait_until(lambda: pair.committed(slave, TOPIC, 0, GROUP) == 3, WITHIN_ONE_PERIOD, "offset 3 copied to the slave")
    # SIGKILL: the master's consumerOffset.json is whatever it last wrote (at most 5 s old)
    pair.kill_master()
    # meanwhile consumers commit to the slave
    pair.commit(slave, TOPIC, 0, GROUP, 10)
    pair.start_master()
    wait_registered(pair.namesrv_addr, master, pair.master_proc)
    wait_until(
        lambda: pair.committed(master, TOPIC, 0, GROUP) == 10,
        WITHIN_ONE_PERIOD,
        lambda: f"the slave's offset handed to the master (it has {pair.committed(master, TOPIC, 0, GROUP)})",
    )
    # and the slave's copy never went back meanwhile; a queue nobody committed on the slave
    # follows the master
    assert pair.committed(slave, TOPIC, 0, GROUP) == 10
    pair.commit(master, TOPIC, 1, GROUP, 2)  # the master may move an offset back (a reset)
    wait_until(
        lambda: pair.committed(slave, TOPIC, 1, GROUP) == 2, WITHIN_ONE_PERIOD, "the master's lower offset copied"
    )
    assert pair.committed(slave, TOPIC, 0, GROUP) == 10


# Issue 26: a master and its slave started together replicated after ~30 s (the slave's next
# registration), its log silent meanwhile.
MASTER_FOUND_WITHIN = 5.0


@pytest.mark.slow
def test_slave_started_before_its_master_replicates_as_soon_as_the_master_is_routed(spawn, tmp_path: Path):
    pair = BrokerPair(spawn, tmp_path, master={"brokerRole": "SYNC_MASTER"})
    pair.client.start()
    try:
        pair.namesrv_addr = start_namesrv(spawn)[1]
        # INFO: the waiting line is what a user sees at the default level
        pair.slave_proc, pair.slave_addr = start_broker_process(spawn, pair.slave_settings, pair.namesrv_addr)
        slave_log = Path(pair.slave_settings["storePathRootDir"]) / "logs" / "broker.log"
        broker_name = "broker-a"
        wait_until(
            lambda: f"waiting for a master of {broker_name}: name servers {pair.namesrv_addr}" in slave_log.read_text(),
            MASTER_FOUND_WITHIN,
            lambda: f"the slave's log says what it waits for (it has: {slave_log.read_text()[-2000:]})",
        )
        pair.start_master()  # routed once this returns

        def slaves_connected() -> list:
            with AdminClient(pair.namesrv_addr, timeout=2.0) as admin:
                return admin.ha_status(broker_name)[1].slaves

        wait_until(slaves_connected, MASTER_FOUND_WITHIN, "the slave's HA connection to its master")
        # a SYNC_MASTER send is answered once the slave holds it: replication works, not just a socket
        topic = pair.create_topic(TOPIC, 1)
        answer = pair.call(pair.master_addr, send_request(topic, b"replicated"))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    finally:
        pair.close()
