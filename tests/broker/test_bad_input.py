"""Requests with something wrong get a clear code and remark; nothing is stored wrongly, and the
connection and the broker go on (issue 4, "Bad input")."""

from __future__ import annotations

import pytest

from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.broker.broker_helpers import (
    batch_body,
    call,
    create_topic,
    pull_request,
    send_request,
)


def _stored(broker, topic):
    return sum(broker.store.get_max_offset_in_queue(topic, q) for q in range(8))


def _still_serving(broker, client):
    r = call(client, broker.broker_addr, send_request("StillThere", b"ok"))
    assert r.code == ResponseCode.SUCCESS, r.remark


@pytest.mark.parametrize("field, value, code, words", [
    ("e", "zero", ResponseCode.SYSTEM_ERROR, "'e'"),             # queueId not a number
    ("b", "bad topic!", ResponseCode.MESSAGE_ILLEGAL, "characters"),
    ("b", "T" * 200, ResponseCode.MESSAGE_ILLEGAL, "127"),
    ("b", "SCHEDULE_TOPIC_XXXX", ResponseCode.NO_PERMISSION, "forbidden"),
    ("e", "99", ResponseCode.SYSTEM_ERROR, "queueId[99]"),
])
def test_bad_send_headers(broker, client, field, value, code, words):
    create_topic(broker, "Good")
    request = send_request("Good", b"x")
    request.ext_fields[field] = value
    r = call(client, broker.broker_addr, request)
    assert r.code == code and words in r.remark
    assert _stored(broker, "Good") == 0
    _still_serving(broker, client)


def test_a_send_without_topic_names_the_missing_field(broker, client):
    request = send_request("Good", b"x")
    del request.ext_fields["b"]
    r = call(client, broker.broker_addr, request)
    assert r.code == ResponseCode.SYSTEM_ERROR and "'b'" in r.remark


def test_a_negative_queue_id_picks_a_queue_as_rocketmq_does(broker, client):
    create_topic(broker, "AnyQueue")
    r = call(client, broker.broker_addr, send_request("AnyQueue", b"x", queue_id=-1))
    assert r.code == ResponseCode.SUCCESS and 0 <= int(r.ext_fields["queueId"]) < 4


def test_oversized_message_and_properties_are_illegal(start_broker, client):
    broker = start_broker(maxMessageSize="4096")
    r = call(client, broker.broker_addr, send_request("Big", b"x" * 5000))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "maxMessageSize" in r.remark
    r = call(client, broker.broker_addr, send_request("Big", b"x", properties={"K": "v" * 40000}))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "properties" in r.remark
    r = call(client, broker.broker_addr, send_request("Big", b"", code=RequestCode.SEND_BATCH_MESSAGE))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "batch" in r.remark
    body = batch_body([(b"a", {}), (b"b", {})])[:-3]
    r = call(client, broker.broker_addr, send_request("Big", body, code=RequestCode.SEND_BATCH_MESSAGE))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "batch" in r.remark
    assert _stored(broker, "Big") == 0
    _still_serving(broker, client)


def test_a_full_disk_refuses_sends_with_a_remark(start_broker, client):
    broker = start_broker(diskMaxUsedSpaceRatio="0")
    r = call(client, broker.broker_addr, send_request("Full", b"x"))
    assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "diskMaxUsedSpaceRatio" in r.remark
    assert _stored(broker, "Full") == 0


def test_a_read_only_broker_refuses_sends_and_send_backs(start_broker, client):
    broker = start_broker(brokerPermission="4")  # read only
    r = call(client, broker.broker_addr, send_request("ReadOnly", b"x"))
    assert r.code == ResponseCode.NO_PERMISSION and "brokerPermission 4" in r.remark
    assert _stored(broker, "ReadOnly") == 0
    back = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "group": "G", "offset": 0, "delayLevel": 0, "originMsgId": "", "originTopic": "ReadOnly"})
    r = call(client, broker.broker_addr, back)
    assert r.code == ResponseCode.NO_PERMISSION and "brokerPermission 4" in r.remark
    # reads still work
    r = call(client, broker.broker_addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                                 {"topic": "ReadOnly", "queueId": 0}))
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")


def test_malformed_heartbeat_is_refused(broker, client):
    for body in (b"{not json", b"[]", b'{"consumerDataSet": []}', b""):
        r = call(client, broker.broker_addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, body))
        assert r.code == ResponseCode.SYSTEM_ERROR and "heartbeat" in r.remark
    _still_serving(broker, client)


@pytest.mark.parametrize("change, code", [
    ({"expressionType": "SQL92", "subscription": "a > 1"}, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
    ({"queueId": "9"}, ResponseCode.SYSTEM_ERROR),
    ({"queueOffset": "-5"}, ResponseCode.SYSTEM_ERROR),
    ({"queueOffset": "abc"}, ResponseCode.SYSTEM_ERROR),
    ({"topic": "NoSuchTopic"}, ResponseCode.TOPIC_NOT_EXIST),
    ({"consumerGroup": "bad group!"}, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
])
def test_bad_pulls_carry_the_four_fields(broker, client, change, code):
    create_topic(broker, "PullMe")
    request = pull_request("PullMe", 0, 0)
    request.ext_fields.update(change)
    r = call(client, broker.broker_addr, request)
    assert r.code == code, r.remark
    assert r.remark
    assert set(r.ext_fields) == {"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"}
    _still_serving(broker, client)


def test_update_and_create_topic(broker, client):
    fields = {"topic": "Created", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
    r = call(client, broker.broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
    assert r.code == ResponseCode.SUCCESS
    route = call(client, broker.namesrv_addrs[0],
                 RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Created"}))
    assert route.code == ResponseCode.SUCCESS  # registered before the creation was answered
    r = call(client, broker.broker_addr, RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {**fields, "topic": "no good"}))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and r.remark
    r = call(client, broker.broker_addr, RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {**fields, "readQueueNums": "many"}))
    assert r.code == ResponseCode.SYSTEM_ERROR and "readQueueNums" in r.remark


def test_a_send_that_waited_too_long_in_the_broker_is_refused_busy(broker):
    """A send read together with a request that holds the loop for 300 ms waited past
    waitTimeMillsInSendQueue (200 ms): SYSTEM_BUSY, and nothing stored."""
    import socket
    import time

    from rmq.net.codec import FrameDecoder, encode

    slow_code = 9999

    def slow(channel, request):
        time.sleep(0.3)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    broker.server.register_processor(slow_code, slow)
    create_topic(broker, "Busy")
    frames = encode(RemotingCommand.request(slow_code, {})) + encode(send_request("Busy", b"late"))
    with socket.create_connection(("127.0.0.1", broker.server.port)) as sock:
        sock.sendall(frames)
        decoder = FrameDecoder()
        answers = []
        while len(answers) < 2:
            answers += decoder.feed(sock.recv(65536))
    assert answers[1].code == ResponseCode.SYSTEM_BUSY and "flow control" in answers[1].remark
    assert _stored(broker, "Busy") == 0


def test_a_send_to_a_retry_topic_past_max_reconsume_times_goes_to_the_dlq(broker, client):
    request = send_request("%RETRY%G1", b"x")
    request.ext_fields.update({"j": "16", "l": "16"})
    r = call(client, broker.broker_addr, request)
    assert r.code == ResponseCode.SUCCESS
    assert broker.store.get_max_offset_in_queue("%DLQ%G1", 0) == 1
    request.ext_fields.update({"j": "3"})
    assert call(client, broker.broker_addr, request).code == ResponseCode.SUCCESS
    assert broker.store.get_max_offset_in_queue("%RETRY%G1", 0) == 1
