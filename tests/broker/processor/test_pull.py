"""PULL_MESSAGE through a live broker: tag subscriptions, offsets out of range corrected, bad pulls
refused with all four reply fields."""

from __future__ import annotations

import pytest

from rmq.protocol.codes import ResponseCode
from tests.helpers import wait_until
from tests.helpers.broker import assert_still_serving, create_topic, put
from tests.helpers.requests import call, pull_request, records, send_request


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
        ({"expressionType": "SQL92", "subscription": "a > 1"}, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
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
