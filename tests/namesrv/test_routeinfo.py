"""RouteInfoManager: RocketMQ's registration, expiry and route rules, without sockets."""

from rmq.namesrv.routeinfo import RouteInfoManager
from tests.helpers.requests import topic_config_wrapper as wrapper


def register(
    m,
    addr="127.0.0.1:10911",
    name="broker-a",
    broker_id=0,
    topics=None,
    counter=1,
    now_ms=1000,
    epoch=None,
    signed=False,
    channel=None,
):
    return m.register_broker(
        "DefaultCluster",
        addr,
        name,
        broker_id,
        addr.replace("10911", "10912"),
        wrapper(topics or {"TopicTest": 4}, counter),
        [],
        now_ms=now_ms,
        epoch=epoch,
        signed=signed,
        channel=channel,
        claim=f"claim-of-{addr}" if epoch is not None else None,
    )


class Peer:
    """What the route tables know of a connection: its remote address."""

    def __init__(self, remote_address: str):
        self.remote_address = remote_address


def test_route_is_the_spec_json():
    m = RouteInfoManager()
    register(m)
    assert m.pickup_topic_route("TopicTest") == {
        "brokerDatas": [
            {"brokerAddrs": {"0": "127.0.0.1:10911"}, "brokerName": "broker-a", "cluster": "DefaultCluster"}
        ],
        "filterServerTable": {},
        "queueDatas": [
            {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}
        ],
    }
    assert m.pickup_topic_route("NoSuchTopic") is None


def test_slave_gets_master_addresses_and_does_not_change_queues():
    m = RouteInfoManager()
    register(m)
    result = register(m, addr="127.0.0.1:20911", broker_id=1, topics={"TopicTest": 8, "OnlyOnSlave": 2})
    assert result.master_addr == "127.0.0.1:10911"
    assert result.ha_server_addr == "127.0.0.1:10912"
    route = m.pickup_topic_route("TopicTest")
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:20911"}
    assert route["queueDatas"][0]["readQueueNums"] == 4  # only a master's topic configs count
    assert m.pickup_topic_route("OnlyOnSlave") is None


def test_topic_configs_apply_only_when_the_data_version_changes():
    m = RouteInfoManager()
    register(m, topics={"A": 4}, counter=1)
    register(m, topics={"A": 8}, counter=1)  # same version: a heartbeat, its topics untouched
    assert m.pickup_topic_route("A")["queueDatas"][0]["writeQueueNums"] == 4
    register(m, topics={"A": 8}, counter=2)
    assert m.pickup_topic_route("A")["queueDatas"][0]["writeQueueNums"] == 8


def test_silent_broker_expires_with_its_topics():
    m = RouteInfoManager(broker_channel_expired_ms=120_000)
    register(m, now_ms=0)
    register(m, addr="127.0.0.1:30911", name="broker-b", topics={"TopicTest": 2}, now_ms=100_000)
    assert m.scan_not_active_broker(now_ms=110_000) == []
    assert m.scan_not_active_broker(now_ms=120_001) == ["127.0.0.1:10911"]
    route = m.pickup_topic_route("TopicTest")
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-b"]
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-b"]
    assert m.get_all_cluster_info()["clusterAddrTable"] == {"DefaultCluster": ["broker-b"]}
    assert m.scan_not_active_broker(now_ms=230_000) == ["127.0.0.1:30911"]
    assert m.pickup_topic_route("TopicTest") is None
    assert m.get_all_cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_unregister_and_channel_close():
    m = RouteInfoManager()
    channel = object()
    m.register_broker("C", "127.0.0.1:1", "b1", 0, "", wrapper({"T1": 1}), channel=channel)
    m.register_broker("C", "127.0.0.1:2", "b2", 0, "", wrapper({"T2": 1}))
    assert m.on_channel_destroy(object()) is None
    assert m.on_channel_destroy(channel) == "127.0.0.1:1"
    assert m.get_all_topic_list() == ["T2"]
    m.unregister_broker("C", "127.0.0.1:2", "b2", 0)
    assert m.get_all_topic_list() == []
    assert m.broker_live_table == {}


def test_promoted_slave_keeps_one_id_per_address():
    m = RouteInfoManager()
    register(m, addr="127.0.0.1:20911", broker_id=1)
    register(m, addr="127.0.0.1:20911", broker_id=0, counter=2)
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:20911"}


def test_topics_by_cluster_and_delete():
    m = RouteInfoManager()
    register(m, topics={"A": 1, "B": 1})
    m.register_broker("Other", "127.0.0.1:5", "x", 0, "", wrapper({"C": 1}))
    assert m.get_topics_by_cluster("DefaultCluster") == ["A", "B"]
    m.delete_topic("A", "DefaultCluster")
    m.delete_topic("C")
    assert m.get_all_topic_list() == ["B"]


def test_encoded_route_follows_every_table_change():
    import json

    m = RouteInfoManager(broker_channel_expired_ms=120_000)
    register(m, now_ms=0)
    assert json.loads(m.topic_route_json("TopicTest")) == m.pickup_topic_route("TopicTest")
    register(m, topics={"TopicTest": 8}, counter=2, now_ms=0)
    assert json.loads(m.topic_route_json("TopicTest"))["queueDatas"][0]["writeQueueNums"] == 8
    register(m, addr="127.0.0.1:20911", broker_id=1, now_ms=0)
    assert json.loads(m.topic_route_json("TopicTest"))["brokerDatas"][0]["brokerAddrs"] == {
        "0": "127.0.0.1:10911",
        "1": "127.0.0.1:20911",
    }
    m.scan_not_active_broker(now_ms=200_000)
    assert m.topic_route_json("TopicTest") is None


def test_a_master_not_newer_than_the_routed_one_is_refused_and_a_signed_newer_one_replaces_it():
    m = RouteInfoManager()
    assert register(m, "127.0.0.1:10911", epoch=1).refused is None
    # a second master of the name in the same epoch, then in an older one: refused with the routed
    # master's claim, nothing recorded
    same = register(m, "127.0.0.1:20911", epoch=1, signed=True)
    assert same.refused is not None and "epoch 1" in same.refused and "127.0.0.1:10911" in same.refused
    assert same.fenced and (same.routed_addr, same.routed_epoch) == ("127.0.0.1:10911", 1)
    assert same.routed_claim == "claim-of-127.0.0.1:10911"
    assert register(m, "127.0.0.1:20911", epoch=0).fenced
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911"}
    assert "127.0.0.1:20911" not in m.broker_live_table
    # the routed master re-registers as it likes; a promoted slave with a newer epoch takes over,
    # when its registration is signed by the cluster account
    assert register(m, "127.0.0.1:10911", epoch=1).refused is None
    register(m, "127.0.0.1:30911", broker_id=1)
    assert register(m, "127.0.0.1:30911", epoch=2, signed=True).refused is None
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:30911"}
    # the old master, back with its old epoch, is refused
    assert register(m, "127.0.0.1:10911", epoch=1).fenced
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:30911"}


def test_an_unsigned_master_never_displaces_a_live_one_whatever_its_epoch():
    m = RouteInfoManager(broker_channel_expired_ms=120_000)
    channel = Peer("127.0.0.1:50000")
    register(m, "127.0.0.1:10911", epoch=1, channel=channel, now_ms=0)
    forged = register(m, "10.9.9.9:10911", epoch=2147483647, now_ms=1000)
    assert forged.refused is not None and not forged.fenced and "live master 127.0.0.1:10911" in forged.refused
    apache = register(m, "10.9.9.9:10911", now_ms=1000)  # no epoch: refused the same way
    assert apache.refused is not None and not apache.fenced
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911"}
    assert "10.9.9.9:10911" not in m.broker_live_table
    # once the routed master is gone (its connection closed), the route is free for another
    m.on_channel_destroy(channel)
    assert register(m, "10.9.9.9:10911", epoch=1, now_ms=2000).refused is None
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "10.9.9.9:10911"}
    # ... and once it is silent past the expiry, even before the scan removes it
    assert register(m, "127.0.0.1:10911", now_ms=200_000).refused is None


def test_an_unsigned_slave_never_takes_the_id_of_a_live_one():
    m = RouteInfoManager()
    register(m, "127.0.0.1:10911")
    register(m, "127.0.0.1:20911", broker_id=1)
    forged = register(m, "10.9.9.9:20911", broker_id=1)
    assert forged.refused is not None and not forged.fenced and "live broker 127.0.0.1:20911" in forged.refused
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:20911"}
    assert register(m, "10.9.9.9:20911", broker_id=1, signed=True).refused is None


def test_a_live_broker_is_unregistered_only_by_itself_or_signed():
    m = RouteInfoManager()
    own = Peer("127.0.0.2:40000")
    register(m, "127.0.0.2:10911", epoch=1, channel=own)
    # from another host, on another connection: refused, nothing changes
    refused = m.unregister_broker("DefaultCluster", "127.0.0.2:10911", "broker-a", 0, channel=Peer("127.0.0.1:1"))
    assert refused is not None and "127.0.0.1" in refused
    # naming the master's id with an address that is not its own removes nothing of it
    assert m.unregister_broker("DefaultCluster", "10.0.0.1:1", "broker-a", 0, channel=Peer("127.0.0.1:1")) is None
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.2:10911"}
    assert m.get_all_topic_list() == ["TopicTest"]
    # its own host, or a signed request, is taken
    assert m.unregister_broker("DefaultCluster", "127.0.0.2:10911", "broker-a", 0, channel=Peer("127.0.0.2:2")) is None
    assert m.get_all_topic_list() == []
    register(m, "127.0.0.2:10911", epoch=1, channel=own)
    assert m.unregister_broker("DefaultCluster", "127.0.0.2:10911", "broker-a", 0, Peer("127.0.0.1:1"), True) is None
    assert m.broker_addr_table == {}


def test_a_deleted_topic_comes_back_at_its_masters_next_registration():
    m = RouteInfoManager()
    register(m, topics={"A": 4, "B": 2})
    m.delete_topic("A")
    assert m.get_all_topic_list() == ["B"]
    # an Apache broker asks before registering: its data version is said to have changed
    assert m.is_broker_topic_config_changed("127.0.0.1:10911", wrapper({}, 1)["dataVersion"])
    register(m, topics={"A": 4, "B": 2})  # the same data version
    assert m.get_all_topic_list() == ["A", "B"]
    assert not m.is_broker_topic_config_changed("127.0.0.1:10911", wrapper({}, 1)["dataVersion"])
    assert m.pickup_topic_route("A")["queueDatas"][0]["writeQueueNums"] == 4


def test_masters_without_an_epoch_register_as_with_apache_name_servers():
    m = RouteInfoManager()
    register(m, "127.0.0.1:10911")
    assert register(m, "127.0.0.1:10911", counter=2).refused is None  # an Apache broker: no epoch, no check
    assert register(m, "127.0.0.1:10911", epoch=1).refused is None  # the same address: it only re-registers
    assert m.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911"}
