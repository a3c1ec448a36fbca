"""Send and pull through a live broker, as RocketMQ clients do (SPEC.md section 4)."""

from __future__ import annotations

import pytest

from rmq.protocol.codes import RequestCode, ResponseCode
from tests.broker.broker_helpers import (
    batch_body,
    call,
    pull_request,
    records,
    send_request,
)


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
def test_send_then_pull_round_trip(broker, client, code):
    addr = broker.broker_addr
    sent = []
    for i in range(5):
        r = call(client, addr, send_request("RoundTrip", b"body-%d" % i, code=code, queue_id=1, tags="tagA"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == str(i)
        sent.append(r.ext_fields["msgId"])
    r = call(client, addr, pull_request("RoundTrip", 1, 0))
    assert r.code == ResponseCode.SUCCESS
    assert r.ext_fields == {"nextBeginOffset": "5", "minOffset": "0", "maxOffset": "5", "suggestWhichBrokerId": "0"}
    got = records(r.body)
    assert [m.body for m in got] == [b"body-%d" % i for i in range(5)]
    assert [m.msg_id for m in got] == sent
    assert all(m.tags == "tagA" for m in got)


def test_batch_send_gets_consecutive_offsets_and_joined_msg_ids(broker, client):
    addr = broker.broker_addr
    body = batch_body([(b"m%d" % i, {"TAGS": "b", "UNIQ_KEY": "K%d" % i}) for i in range(32)])
    request = send_request("Batched", body, code=RequestCode.SEND_BATCH_MESSAGE, queue_id=2)
    r = call(client, addr, request)
    assert r.code == ResponseCode.SUCCESS, r.remark
    msg_ids = r.ext_fields["msgId"].split(",")
    assert len(msg_ids) == 32 and r.ext_fields["queueOffset"] == "0"
    r = call(client, addr, pull_request("Batched", 2, 0))
    got = records(r.body)
    assert [m.body for m in got] == [b"m%d" % i for i in range(32)]
    assert [m.msg_id for m in got] == msg_ids
    assert got[5].properties["UNIQ_KEY"] == "K5"


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
    for i in range(3):
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


def test_auto_create_through_tbw102_routes_the_topic_at_once(broker, client):
    from rmq.net import RemotingCommand
    route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Fresh"})
    assert call(client, broker.namesrv_addrs[0], route).code == ResponseCode.TOPIC_NOT_EXIST
    r = call(client, broker.broker_addr, send_request("Fresh", b"x", code=RequestCode.SEND_MESSAGE))
    assert r.code == ResponseCode.SUCCESS
    config = broker.topic_config_manager.select_topic_config("Fresh")
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (4, 4, 6)
    route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Fresh"})
    for _ in range(100):  # registration is sent asynchronously right after the create
        r = call(client, broker.namesrv_addrs[0], route)
        if r.code == ResponseCode.SUCCESS:
            break
        import time
        time.sleep(0.01)
    assert r.code == ResponseCode.SUCCESS and b'"writeQueueNums":4' in r.body


def test_without_auto_create_an_unknown_topic_is_refused(start_broker, client):
    broker = start_broker(autoCreateTopicEnable="false")
    r = call(client, broker.broker_addr, send_request("Unknown", b"x"))
    assert r.code == ResponseCode.TOPIC_NOT_EXIST and "Unknown" in r.remark
    assert broker.topic_config_manager.select_topic_config("Unknown") is None
    assert broker.store.get_max_offset_in_queue("Unknown", 0) == 0


def test_delayed_message_waits_in_the_schedule_topic(broker, client):
    r = call(client, broker.broker_addr, send_request("Later", b"x", queue_id=2, properties={"DELAY": "3"}))
    assert r.code == ResponseCode.SUCCESS
    assert broker.store.get_max_offset_in_queue("Later", 2) == 0
    got = broker.store.get_message("g", "SCHEDULE_TOPIC_XXXX", 2, 0, 1)
    (message,) = records(b"".join(bytes(m) for m in got.messages))
    assert message.properties["REAL_TOPIC"] == "Later" and message.properties["REAL_QID"] == "2"
    assert message.body == b"x"
    # levels above the highest are capped
    call(client, broker.broker_addr, send_request("Later", b"y", properties={"DELAY": "99"}))
    assert broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 17) == 1
