"""POP state across a SIGKILL of the broker process (SYNC_FLUSH): nothing acked comes back and nothing
unacked is lost; the unacked come back after their invisible time (docs/pop.md#crash-safety). The
same across a SIGKILL of a master whose slave is promoted.

The consume offsets are written to their file only every minute here, so what the restarted broker
knows of the pops comes from the checkpoints in its revive topic alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.client.admin_client import AdminClient
from rmq.protocol.codes import ResponseCode
from tests.helpers import wait_until
from tests.helpers.pop import Popper
from tests.helpers.processes import BrokerPair, Cluster
from tests.helpers.requests import send_request, update_topic_request

TOPIC = "PopCrash"
MESSAGES = 20


@pytest.fixture
def sync_cluster(spawn, tmp_path: Path) -> Iterator[Cluster]:
    store = tmp_path / "broker-store"
    store.mkdir()
    c = Cluster(spawn, store)
    c.settings.update(
        flushDiskType="SYNC_FLUSH", reviveInterval="100", reviveQueueNum="2", flushConsumerOffsetInterval="60000"
    )
    try:
        yield c.start()
    finally:
        c.close()


def test_after_sigkill_acked_pops_stay_acked_and_unacked_ones_come_back(sync_cluster):
    cluster = sync_cluster
    cluster.create_topic(TOPIC, 2)
    for i in range(MESSAGES):
        answer = cluster.call(send_request(TOPIC, b"m%d" % i, queue_id=i % 2))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    popper = Popper(cluster.client, cluster.broker_addr, TOPIC)
    popped = popper.pop(max_msgs=12, invisible_ms=2000)
    assert len(popped) == 12
    acked = {m.body for m in popped[::2]}
    for message in popped[::2]:
        assert popper.ack(message).code == ResponseCode.SUCCESS

    cluster.kill_broker()
    cluster.start_broker()

    popper = Popper(cluster.client, cluster.broker_addr, TOPIC)
    expected = {b"m%d" % i for i in range(MESSAGES)} - acked
    received: list[bytes] = []

    def all_received() -> bool:
        for message in popper.pop(invisible_ms=60_000):
            received.append(message.body)
            assert popper.ack(message).code == ResponseCode.SUCCESS
        return expected <= set(received)

    wait_until(all_received, 15, lambda: f"every unacked message again (missing {expected - set(received)})")
    assert not acked & set(received), "acked before the crash, delivered again after it"
    assert set(received) == expected


def test_a_slave_promoted_after_its_master_died_keeps_the_masters_pops(spawn, tmp_path: Path):
    """Its offsets are the master's as last synced (here only at start, slaveSyncInterval 60 s) and
    its revive rounds far apart (60 s): the checkpoints and acks it replicated must move them before
    its first pop, or that pop hands out again what the dead master's consumers acked."""
    pair = BrokerPair(
        spawn,
        tmp_path,
        master={"brokerRole": "SYNC_MASTER", "reviveQueueNum": "2"},
        slave={"reviveInterval": "60000", "reviveQueueNum": "2"},
    )
    pair.slave_settings["slaveSyncInterval"] = "60000"
    pair.start()
    try:
        for addr in (pair.master_addr, pair.slave_addr):  # the slave's metadata sync is off
            assert pair.call(addr, update_topic_request(TOPIC, 2)).code == ResponseCode.SUCCESS
        for i in range(4):
            assert pair.call(pair.master_addr, send_request(TOPIC, b"m%d" % i, queue_id=i % 2)).code == 0
        popped = Popper(pair.client, pair.master_addr, TOPIC, "G").pop(max_msgs=4, invisible_ms=60_000)
        assert len(popped) == 4
        for message in popped[:3]:  # SYNC_MASTER: each ack answered once the slave has it
            assert Popper(pair.client, pair.master_addr, TOPIC, "G").ack(message).code == ResponseCode.SUCCESS
        pair.kill_master()
        with AdminClient(pair.namesrv_addr) as admin:
            admin.promote("broker-a", 1)
        assert Popper(pair.client, pair.slave_addr, TOPIC, "G").pop(invisible_ms=60_000) == []
    finally:
        pair.close()
