"""Route parsing and the queue lists derived from it."""

from __future__ import annotations

import pytest

from rmq.client.route import (
    TopicPublishInfo,
    TopicRouteData,
    master_addr,
    subscribe_queues,
    why_unwritable,
)
from rmq.errors import ClientError

# As a Java name server writes it: broker ids unquoted.
JAVA_ROUTE = b"""{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",
"cluster":"DefaultCluster"},{"brokerAddrs":{"0":"127.0.0.1:10931"},"brokerName":"broker-b","cluster":"DefaultCluster"},
{"brokerAddrs":{"1":"127.0.0.1:10941"},"brokerName":"broker-c","cluster":"DefaultCluster"}],
"filterServerTable":{},"queueDatas":[
{"brokerName":"broker-b","perm":6,"readQueueNums":2,"writeQueueNums":2,"topicSysFlag":0},
{"brokerName":"broker-a","perm":6,"readQueueNums":3,"writeQueueNums":2,"topicSysFlag":0},
{"brokerName":"broker-c","perm":6,"readQueueNums":1,"writeQueueNums":1,"topicSysFlag":0}]}"""


def test_route_with_unquoted_ids():
    route = TopicRouteData.from_json(JAVA_ROUTE)
    assert route.broker("broker-a").broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert master_addr(route.broker("broker-c")) is None


def test_publish_queues_are_masters_write_queues():
    info = TopicPublishInfo.from_route("T", TopicRouteData.from_json(JAVA_ROUTE))
    assert [(q.broker_name, q.queue_id) for q in info.message_queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
        ("broker-b", 1),
    ]  # broker-c has no master


def test_subscribe_queues_are_every_read_queue():
    queues = subscribe_queues("T", TopicRouteData.from_json(JAVA_ROUTE))
    assert [(q.broker_name, q.queue_id) for q in queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-a", 2),
        ("broker-b", 0),
        ("broker-b", 1),
        ("broker-c", 0),
    ]


def test_round_robin_avoids_the_broker_that_failed():
    info = TopicPublishInfo.from_route("T", TopicRouteData.from_json(JAVA_ROUTE))
    picks = [info.select_one() for _ in range(4)]
    assert len(set(picks)) == 4
    assert all(info.select_one("broker-a").broker_name == "broker-b" for _ in range(10))


def test_malformed_route_is_a_client_error():
    with pytest.raises(ClientError, match="malformed topic route"):
        TopicRouteData.from_json(b'{"queueDatas":[{"perm":6}]}')


def test_why_a_routed_topic_takes_no_send_names_each_broker_set():
    # broker-a's master is gone (its slave still routed), broker-b's queues are read-only
    route = TopicRouteData.from_json(
        JAVA_ROUTE.replace(b'0:"127.0.0.1:10911",', b"").replace(
            b'"brokerName":"broker-b","perm":6', b'"brokerName":"broker-b","perm":4'
        )
    )
    assert not TopicPublishInfo.from_route("T", route).ok
    assert why_unwritable(route) == (
        "broker 'broker-a' has no master alive (slaves: 1 at 127.0.0.1:10921; sends resume when its master is "
        "back or a slave is promoted); broker 'broker-b' takes no writes of it (perm R--); "
        "broker 'broker-c' has no master alive (slaves: 1 at 127.0.0.1:10941; sends resume when its master is "
        "back or a slave is promoted)"
    )
