"""A broker whose connection to the name server closes (its process killed) leaves the routes at
once, as RocketMQ's BrokerHousekeepingService does on channel close, not 120 s later."""

from __future__ import annotations

from pathlib import Path

from rmq.client.admin_client import AdminClient
from rmq.protocol.codes import ResponseCode
from tests.helpers import wait_until
from tests.helpers.processes import BrokerPair
from tests.helpers.requests import update_topic_request

# far below the 120 s expiry: only the closed connection can explain it
GONE_WITHIN = 10.0


def broker_addrs(admin: AdminClient, broker_name: str) -> dict:
    table = admin.cluster_info().get("brokerAddrTable") or {}
    return (table.get(broker_name) or {}).get("brokerAddrs") or {}


def test_a_killed_broker_leaves_the_routes_at_once(cluster):
    topic = cluster.create_topic("Housekeeping", queues=2)
    with AdminClient(cluster.namesrv_addr, timeout=2.0) as admin:
        assert admin.topic_route(topic)["brokerDatas"]
        cluster.kill_broker()
        wait_until(lambda: not broker_addrs(admin, "broker-a"), GONE_WITHIN, "the killed broker dropped")
        assert admin.cluster_info().get("brokerAddrTable") in ({}, None)


def test_a_killed_master_leaves_its_slave_in_the_route(spawn, tmp_path: Path):
    pair = BrokerPair(spawn, tmp_path).start()
    try:
        assert pair.call(pair.master_addr, update_topic_request("Housekeeping", 2)).code == ResponseCode.SUCCESS
        with AdminClient(pair.namesrv_addr, timeout=2.0) as admin:
            assert broker_addrs(admin, "broker-a") == {"0": pair.master_addr, "1": pair.slave_addr}
            pair.kill_master()
            wait_until(
                lambda: broker_addrs(admin, "broker-a") == {"1": pair.slave_addr}, GONE_WITHIN, "the master dropped"
            )
            # consumers still find the topic's queues, now served by the slave
            route = admin.topic_route("Housekeeping")
            assert route["queueDatas"][0]["readQueueNums"] == 2
    finally:
        pair.close()
