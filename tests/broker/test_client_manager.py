"""Client registries: membership-change signals on join, leave, expiry and channel close."""

from rmq.broker.client_channel import ClientChannelInfo
from rmq.broker.client_manager import ClientManager
from rmq.protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    parse_heartbeat,
)
from rmq.protocol.subscription import build_subscription_data


class Channel:
    """Stands in for the net layer's Channel: the registries only compare identities."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Channel({self.name})"


def heartbeat(client_id, group="G", topics=("T",), producer_group=None, sub_version=1):
    consumers = [
        ConsumerData(
            group,
            ConsumeType.CONSUME_PASSIVELY,
            MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            [build_subscription_data(t, "*", sub_version=sub_version) for t in topics],
        )
    ]
    return HeartbeatData(client_id, consumers if group else [], [producer_group] if producer_group else [])


def test_join_renew_and_topic_changes():
    m = ClientManager()
    a, b = Channel("a"), Channel("b")
    assert m.register_heartbeat(heartbeat("c1"), a, "JAVA", 399, now=1000) == {"G"}
    assert m.register_heartbeat(heartbeat("c1"), a, now=2000) == set()  # a plain renewal
    assert m.register_heartbeat(heartbeat("c2"), b, now=2000) == {"G"}
    assert m.consumers.consumer_ids("G") == ["c1", "c2"]
    assert set(map(id, m.consumers.channels("G"))) == {id(a), id(b)}
    # a new subVersion of the same topic is not a membership change; a new topic is
    assert m.register_heartbeat(heartbeat("c1", sub_version=2), a, now=3000) == set()
    assert m.consumers.find_subscription_data("G", "T").sub_version == 2
    assert m.register_heartbeat(heartbeat("c1", topics=("T", "U")), a, now=3000) == {"G"}
    assert m.consumers.query_topic_consume_by_who("U") == {"G"}
    info = m.consumers.find_channel("G", "c1")
    assert (info.language, info.version, info.last_update_ms) == ("JAVA", 399, 3000)


def test_both_enum_spellings_register_one_group():
    m = ClientManager()
    ordinal = (
        b'{"clientID":"cpp@1","consumerDataSet":[{"groupName":"G","consumeType":1,"messageModel":1,'
        b'"consumeFromWhere":0,"subscriptionDataSet":[{"topic":"T","subString":"*"}]}]}'
    )
    names = (
        b'{"clientID":"java@1","consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY",'
        b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
        b'"subscriptionDataSet":[{"topic":"T","subString":"*"}]}]}'
    )
    assert m.register_heartbeat(parse_heartbeat(ordinal), Channel("a"), "CPP") == {"G"}
    assert m.register_heartbeat(parse_heartbeat(names), Channel("b"), "JAVA") == {"G"}
    assert m.consumers.consumer_ids("G") == ["cpp@1", "java@1"]
    assert m.consumers.groups() == ["G"]


def test_unregister_leaves_the_group():
    m = ClientManager()
    m.register_heartbeat(heartbeat("c1", producer_group="P"), Channel("a"), now=1000)
    m.register_heartbeat(heartbeat("c2"), Channel("b"), now=1000)
    assert m.unregister_client("c1", producer_group="P", consumer_group="G") == {"G"}
    assert m.unregister_client("c1", consumer_group="G") == set()  # already gone
    assert m.consumers.consumer_ids("G") == ["c2"]
    assert m.producers.client_ids("P") == []
    assert m.unregister_client("c2", consumer_group="G") == {"G"}
    assert m.consumers.consumer_ids("G") == [] and m.consumers.groups() == []


def test_channel_close_removes_its_clients_only():
    m = ClientManager()
    a, b = Channel("a"), Channel("b")
    m.register_heartbeat(heartbeat("c1", producer_group="P"), a, now=1000)
    m.register_heartbeat(heartbeat("c1", group="H"), a, now=1000)
    m.register_heartbeat(heartbeat("c2"), b, now=1000)
    assert m.on_channel_closed(a) == {"G", "H"}
    assert m.consumers.consumer_ids("G") == ["c2"] and m.consumers.groups() == ["G"]
    assert m.producers.groups() == []
    assert m.on_channel_closed(a) == set()


def test_reconnect_replaces_the_channel_and_the_old_close_is_harmless():
    m = ClientManager()
    old, new = Channel("old"), Channel("new")
    m.register_heartbeat(heartbeat("c1"), old, now=1000)
    assert m.register_heartbeat(heartbeat("c1"), new, now=2000) == set()  # same member
    assert m.consumers.channels("G") == [new]
    assert m.on_channel_closed(old) == set()
    assert m.consumers.consumer_ids("G") == ["c1"]


def test_silent_clients_expire_after_120_s():
    m = ClientManager()
    a, b, p = Channel("a"), Channel("b"), Channel("p")
    m.register_heartbeat(heartbeat("c1"), a, now=0)
    m.register_heartbeat(heartbeat("c2"), b, now=0)
    m.register_heartbeat(heartbeat("p1", group=None, producer_group="P"), p, now=0)
    m.register_heartbeat(heartbeat("c2"), b, now=60_000)
    scan = m.scan_not_active_channels(now=120_000)
    assert scan.changed_groups == set() and scan.expired_channels == []
    scan = m.scan_not_active_channels(now=120_001)
    assert scan.changed_groups == {"G"}
    assert scan.expired_channels == [a, p]
    assert m.consumers.consumer_ids("G") == ["c2"] and m.producers.groups() == []
    scan = m.scan_not_active_channels(now=180_001)
    assert scan.changed_groups == {"G"} and m.consumers.groups() == []


def test_producers_for_transaction_checks():
    m = ClientManager()
    a, b = Channel("a"), Channel("b")
    m.register_heartbeat(heartbeat("p1", group=None, producer_group="P"), a, now=0)
    m.register_heartbeat(heartbeat("p2", group=None, producer_group="P"), b, now=0)
    assert m.producers.client_ids("P") == ["p1", "p2"]
    assert {id(m.producers.get_available_channel("P")) for _ in range(4)} == {id(a), id(b)}
    assert m.producers.get_available_channel("nobody") is None
    assert m.producers.find_channel("p2") is b


def test_registry_works_without_the_facade():
    m = ClientManager()
    info = ClientChannelInfo(Channel("a"), "c1", "CPP", 1)
    assert m.consumers.register_consumer(
        "G",
        info,
        ConsumeType.CONSUME_ACTIVELY,
        MessageModel.BROADCASTING,
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        [],
    )
    group = m.consumers.get_consumer_group_info("G")
    assert group.message_model is MessageModel.BROADCASTING and group.subscriptions == {}
