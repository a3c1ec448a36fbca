"""PULL_MESSAGE through a live broker: tag and SQL92 subscriptions, offsets out of range corrected,
bad pulls refused with all four reply fields."""

from __future__ import annotations

import orjson
import pytest

from rmq.protocol.codes import ResponseCode
from tests.helpers import wait_until
from tests.helpers.broker import assert_still_serving, create_topic, put
from tests.helpers.requests import call, heartbeat_request, pull_request, records, send_request


def test_tag_subscription_gets_only_its_tags(broker, client):
    addr = broker.broker_addr
    for i in range(12):
        tag = ("TagA", "TagB", "TagC")[i % 3]
        assert call(client, addr, send_request("Tagged", b"%d" % i, tags=tag)).code == ResponseCode.SUCCESS
    r = call(client, addr, pull_request("Tagged", 0, 0, subscription="TagA"))
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in records(r.body)] == [b"0", b"3", b"6", b"9"]
    assert r.ext_fields["nextBeginOffset"] == "12"
    r = call(client, addr, pull_request("Tagged", 0, 0, subscription="TagB || TagC"))
    assert {m.tags for m in records(r.body)} == {"TagB", "TagC"} and len(records(r.body)) == 8
    # nothing of the tag past offset 10: the scan moves on without a body, never an empty SUCCESS
    r = call(client, addr, pull_request("Tagged", 0, 10, subscription="TagA"))
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "12"


def test_pull_offsets_out_of_range_are_corrected(broker, client):
    addr = broker.broker_addr
    for _ in range(3):
        call(client, addr, send_request("Ranges", b"x"))
    r = call(client, addr, pull_request("Ranges", 0, 3))
    assert r.code == ResponseCode.PULL_NOT_FOUND and r.ext_fields["nextBeginOffset"] == "3"
    # past the end: RocketMQ sends the consumer back to the min offset while the queue starts at 0
    r = call(client, addr, pull_request("Ranges", 0, 100))
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "0"
    # an empty queue of the topic: offset 0 is "nothing yet", any other offset moved back to 0
    r = call(client, addr, pull_request("Ranges", 1, 0))
    assert r.code == ResponseCode.PULL_NOT_FOUND
    r = call(client, addr, pull_request("Ranges", 1, 7))
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "0"


@pytest.mark.parametrize(
    "change, code",
    [
        ({"expressionType": "SQL92", "subscription": "a >> 1"}, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
        # enablePropertyFilter is off by default: refused as RocketMQ refuses it
        ({"expressionType": "SQL92", "subscription": "a > 1"}, ResponseCode.SYSTEM_ERROR),
        ({"expressionType": "XPATH", "subscription": "a"}, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
        ({"queueId": "9"}, ResponseCode.SYSTEM_ERROR),
        ({"queueOffset": "-5"}, ResponseCode.SYSTEM_ERROR),
        ({"queueOffset": "abc"}, ResponseCode.SYSTEM_ERROR),
        ({"topic": "NoSuchTopic"}, ResponseCode.TOPIC_NOT_EXIST),
        ({"consumerGroup": "bad group!"}, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
    ],
)
def test_bad_pulls_carry_the_four_fields(broker, client, change, code):
    create_topic(broker, "PullMe")
    request = pull_request("PullMe", 0, 0)
    request.ext_fields.update(change)
    r = call(client, broker.broker_addr, request)
    assert r.code == code, r.remark
    assert r.remark
    assert set(r.ext_fields) == {"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"}
    assert_still_serving(broker, client)


def test_a_master_suggests_a_slave_to_a_group_reading_far_behind(start_broker, client):
    # a ratio of 0: any read short of the CommitLog's end (the last message read included, as
    # RocketMQ measures from its start) is far behind
    broker = start_broker(slaveReadEnable="true", accessMessageInMemoryMaxRatio="0")
    addr = broker.broker_addr
    for i in range(3):
        assert call(client, addr, send_request("Behind", b"%d" % i)).code == ResponseCode.SUCCESS
    r = call(client, addr, pull_request("Behind", 0, 0, max_msgs=1))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "1"
    # nothing read: the group's brokerId, the master
    r = call(client, addr, pull_request("Behind", 0, 3))
    assert r.code == ResponseCode.PULL_NOT_FOUND and r.ext_fields["suggestWhichBrokerId"] == "0"


@pytest.mark.parametrize(
    "settings",
    [{"slaveReadEnable": "true"}, {"accessMessageInMemoryMaxRatio": "0"}],
    ids=["in-memory", "no-slave-read"],
)
def test_the_master_is_suggested_when_in_memory_or_without_slave_read_enable(start_broker, client, settings):
    broker = start_broker(**settings)
    for i in range(3):
        call(client, broker.broker_addr, send_request("Behind", b"%d" % i))
    r = call(client, broker.broker_addr, pull_request("Behind", 0, 0, max_msgs=1))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "0"


def test_a_slave_serves_what_it_holds_and_never_corrects_an_offset(start_broker, client, tmp_path):
    master = start_broker(storePathRootDir=str(tmp_path / "master"))
    create_topic(master, "Copied")
    slave = start_broker(
        storePathRootDir=str(tmp_path / "slave"),
        brokerRole="SLAVE",
        brokerId="1",
        namesrvAddr=master.config.namesrv_addr,
    )
    put(master, "Copied", b"a")
    wait_until(lambda: slave.store.get_max_offset_in_queue("Copied", 0) == 1, 10, "the message replicated")
    create_topic(slave, "Copied")  # the slave's copy of the master's topics comes every 10 s
    r = call(client, slave.broker_addr, pull_request("Copied", 0, 0))
    assert [m.body for m in records(r.body)] == [b"a"]
    # beyond what it holds (the master may have more): retry, from the same offset, at the master
    r = call(client, slave.broker_addr, pull_request("Copied", 0, 5))
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert r.ext_fields["nextBeginOffset"] == "5" and r.ext_fields["suggestWhichBrokerId"] == "0"
    # a long poll at the end is answered once replication brings the next message
    answer = client.invoke_async(slave.broker_addr, pull_request("Copied", 0, 1, suspend_ms=20_000), 25)
    wait_until(lambda: slave.pull_hold.parked_count == 1, 5, "the pull parked")
    put(master, "Copied", b"b")
    assert [m.body for m in records(answer.result(10).body)] == [b"b"]


def sql_pull(topic: str, offset: int, sql: str, **kwargs):
    return pull_request(topic, 0, offset, subscription=sql, expression_type="SQL92", **kwargs)


def test_an_sql92_pull_gets_only_what_matches_and_a_tag_pull_is_unaffected(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    addr = broker.broker_addr
    create_topic(broker, "Priced")
    for i in range(30):
        props = {"price": str(i), "region": "eu" if i % 2 else "us"}
        put(broker, "Priced", b"%d" % i, TAGS="TagA" if i % 3 == 0 else "TagB", **props)
    r = call(client, addr, sql_pull("Priced", 0, "price >= 20 AND region = 'eu'"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert [m.body for m in records(r.body)] == [b"21", b"23", b"25", b"27", b"29"]
    assert r.ext_fields["nextBeginOffset"] == "30"
    # TAGS is a property like any other; a missing property never matches
    r = call(client, addr, sql_pull("Priced", 0, "TAGS = 'TagA' AND price BETWEEN 3 AND 9"))
    assert [m.body for m in records(r.body)] == [b"3", b"6", b"9"]
    r = call(client, addr, sql_pull("Priced", 0, "color = 'red' OR color IS NOT NULL"))
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "30"
    r = call(client, addr, pull_request("Priced", 0, 0, subscription="TagA"))
    assert len(records(r.body)) == 10


def test_a_long_run_of_sql92_misses_never_stalls_the_consumer(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, "Sparse")
    for i in range(2000):
        put(broker, "Sparse", b"miss", n=str(i))
    put(broker, "Sparse", b"hit", n="-1")
    offset, pulls = 0, 0
    while True:
        r = call(client, broker.broker_addr, sql_pull("Sparse", offset, "n < 0"))
        pulls += 1
        next_offset = int(r.ext_fields["nextBeginOffset"])
        if r.code == ResponseCode.SUCCESS:
            break
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and next_offset > offset
        offset = next_offset
    assert [m.body for m in records(r.body)] == [b"hit"] and next_offset == 2001
    assert pulls <= 4  # each pull scans up to 800 entries (RocketMQ: 16000 bytes of ConsumeQueue)


def test_a_parked_sql92_pull_waits_for_a_match(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, "Waiting")
    answer = client.invoke_async(broker.broker_addr, sql_pull("Waiting", 0, "kind = 'wanted'", suspend_ms=20_000), 25)
    wait_until(lambda: broker.pull_hold.parked_count == 1, 5, "the pull parked")
    put(broker, "Waiting", b"other", kind="other")
    put(broker, "Waiting", b"wanted", kind="wanted")
    r = answer.result(10)
    assert r.code == ResponseCode.SUCCESS and [m.body for m in records(r.body)] == [b"wanted"]
    assert r.ext_fields["nextBeginOffset"] == "2"


def test_bad_sql92_is_refused_with_its_position_and_the_connection_serves_on(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, "Sql")
    put(broker, "Sql", b"x", a="1")
    for _ in range(2):  # the second answer comes from the cache of outcomes
        r = call(client, broker.broker_addr, sql_pull("Sql", 0, "a > 1 AND AND b = 2"))
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "SQL92 expression 'a > 1 AND AND b = 2', line 1 column 11: unexpected 'AND'" in r.remark
        assert r.ext_fields["nextBeginOffset"] == "0"
    r = call(client, broker.broker_addr, sql_pull("Sql", 0, "a = 1"))
    assert [m.body for m in records(r.body)] == [b"x"]
    assert_still_serving(broker, client)


def test_without_enable_property_filter_sql92_is_refused_as_rocketmq_refuses_it(broker, client):
    create_topic(broker, "Sql")
    r = call(client, broker.broker_addr, sql_pull("Sql", 0, "a = 1"))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark.startswith("The broker does not support consumer to filter message by SQL92")


def test_a_heartbeat_sql92_subscription_filters_pulls_that_carry_none(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, "Registered")
    hb = heartbeat_request("c1", "SqlGroup", "Registered", sub="v > 1")
    body = orjson.loads(hb.body)
    body["consumerDataSet"][0]["subscriptionDataSet"][0]["expressionType"] = "SQL92"
    hb.body = orjson.dumps(body)
    assert call(client, broker.broker_addr, hb).code == ResponseCode.SUCCESS
    for v in range(4):
        put(broker, "Registered", b"%d" % v, v=str(v))
    pull = pull_request("Registered", 0, 0, group="SqlGroup")
    pull.ext_fields["sysFlag"] = "0"
    r = call(client, broker.broker_addr, pull)
    assert [m.body for m in records(r.body)] == [b"2", b"3"]


def test_a_group_with_bad_sql92_does_not_affect_the_other_groups_of_its_heartbeat(start_broker, client):
    broker = start_broker(enablePropertyFilter="true")
    create_topic(broker, "Shared")
    hb = heartbeat_request("c1", "GoodGroup", "Shared", sub="TagA")
    body = orjson.loads(hb.body)
    bad = {**body["consumerDataSet"][0], "groupName": "BadGroup"}
    bad["subscriptionDataSet"] = [{"topic": "Shared", "subString": "v >>> 1", "expressionType": "SQL92"}]
    body["consumerDataSet"].append(bad)
    hb.body = orjson.dumps(body)
    assert call(client, broker.broker_addr, hb).code == ResponseCode.SUCCESS  # registered, as RocketMQ does
    put(broker, "Shared", b"a", TAGS="TagA")
    for group, code in (("BadGroup", ResponseCode.SUBSCRIPTION_PARSE_FAILED), ("GoodGroup", ResponseCode.SUCCESS)):
        pull = pull_request("Shared", 0, 0, group=group)
        pull.ext_fields["sysFlag"] = "0"  # by the heartbeat's subscription
        r = call(client, broker.broker_addr, pull)
        assert r.code == code, r.remark
    assert "'v >>> 1', line 1 column 4" in call(client, broker.broker_addr, sql_pull("Shared", 0, "v >>> 1")).remark
