"""CONSUMER_SEND_MSG_BACK: retries through the delay levels into %RETRY%<group>, then %DLQ%<group>."""

from __future__ import annotations

from rmq.broker.delay import delay_level_to_queue_id
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import SCHEDULE_TOPIC, MessageProperty, dlq_topic, retry_topic
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from tests.helpers.broker import RETRY_GROUP as GROUP
from tests.helpers.broker import messages_in, put, send_back, wait_for_message


def test_retry_twice_then_dead_letter(broker, client):
    original = put(broker, "TopicA", b"payload", 0, TAGS="tagA", KEYS="k1")
    answer = send_back(client, broker, original.wrote_offset, delay_level=1, max_reconsume_times=2)
    assert answer.code == ResponseCode.SUCCESS, answer.remark

    # it waits in the schedule topic (level 1 = 1 s), then comes back in %RETRY%<group>
    waiting = messages_in(broker, SCHEDULE_TOPIC, delay_level_to_queue_id(1))
    assert waiting[0].properties[MessageProperty.REAL_TOPIC] == retry_topic(GROUP)
    first = wait_for_message(broker, retry_topic(GROUP), 1)
    assert first.body == b"payload" and first.reconsume_times == 1
    assert first.properties[MessageProperty.RETRY_TOPIC] == "TopicA"
    assert first.properties[MessageProperty.ORIGIN_MESSAGE_ID] == original.msg_id
    assert first.properties[MessageProperty.TAGS] == "tagA"
    for key in (MessageProperty.DELAY_TIME_LEVEL, MessageProperty.REAL_TOPIC, MessageProperty.REAL_QUEUE_ID):
        assert key not in first.properties
    assert first.store_timestamp - waiting[0].store_timestamp >= 1000

    assert send_back(client, broker, first.physical_offset, 1, 2).code == ResponseCode.SUCCESS
    second = wait_for_message(broker, retry_topic(GROUP), 2)
    assert second.reconsume_times == 2
    assert second.properties[MessageProperty.ORIGIN_MESSAGE_ID] == original.msg_id

    # reconsumeTimes 2 >= maxReconsumeTimes 2: dead letter, at once
    assert send_back(client, broker, second.physical_offset, 1, 2).code == ResponseCode.SUCCESS
    (dead,) = messages_in(broker, dlq_topic(GROUP))
    assert dead.body == b"payload" and dead.reconsume_times == 3
    assert dead.properties[MessageProperty.RETRY_TOPIC] == "TopicA"
    assert dead.properties[MessageProperty.ORIGIN_MESSAGE_ID] == original.msg_id
    assert MessageProperty.DELAY_TIME_LEVEL not in dead.properties
    dlq = broker.topic_config_manager.select_topic_config(dlq_topic(GROUP))
    assert dlq.read_queue_nums == dlq.write_queue_nums == 1 and dlq.perm == PERM_READ | PERM_WRITE
    retry = broker.topic_config_manager.select_topic_config(retry_topic(GROUP))
    assert retry.write_queue_nums == 1 and retry.perm == PERM_READ | PERM_WRITE


def test_delay_level_zero_means_three_plus_reconsume_times(broker, client):
    original = put(broker, "TopicA", b"x")
    assert send_back(client, broker, original.wrote_offset).code == ResponseCode.SUCCESS
    (waiting,) = messages_in(broker, SCHEDULE_TOPIC, delay_level_to_queue_id(3))
    assert waiting.properties[MessageProperty.DELAY_TIME_LEVEL] == "3"
    entry = broker.store.find_consume_queue(SCHEDULE_TOPIC, 2).get_entry(0)
    assert entry[2] == waiting.store_timestamp + 10_000  # the deliver time, as tags code


def test_group_retry_max_times_applies_without_a_request_maximum(broker, client):
    config = broker.subscription_group_manager.find_subscription_group_config(GROUP)
    config.retry_max_times = 0
    broker.subscription_group_manager.update_subscription_group_config(config)
    original = put(broker, "TopicA", b"x")
    assert send_back(client, broker, original.wrote_offset, delay_level=1).code == ResponseCode.SUCCESS
    assert len(messages_in(broker, dlq_topic(GROUP))) == 1


def test_negative_delay_level_goes_straight_to_the_dlq(broker, client):
    original = put(broker, "TopicA", b"x")
    assert send_back(client, broker, original.wrote_offset, delay_level=-1).code == ResponseCode.SUCCESS
    assert len(messages_in(broker, dlq_topic(GROUP))) == 1
    assert messages_in(broker, SCHEDULE_TOPIC, 0) == []


def test_an_offset_without_a_message_is_refused_and_nothing_is_stored(broker, client):
    original = put(broker, "TopicA", b"x")
    end = broker.store.get_max_phy_offset()
    for offset in (original.wrote_offset + 1, end, 10**12, -5):
        answer = send_back(client, broker, offset)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert f"look message by offset failed, {offset}" in answer.remark
    assert broker.store.get_max_phy_offset() == end
    # the connection and the broker go on
    assert send_back(client, broker, original.wrote_offset, -1).code == ResponseCode.SUCCESS


def test_missing_or_malformed_header_fields_are_refused(broker, client):
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": GROUP})
    answer = client.invoke_sync(broker.broker_addr, request, timeout=3.0)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "'offset' is missing" in answer.remark
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": GROUP, "offset": "x1"})
    answer = client.invoke_sync(broker.broker_addr, request, timeout=3.0)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "expected an integer" in answer.remark


def test_unknown_group_without_auto_creation(broker, client):
    broker.config.auto_create_subscription_group = False
    original = put(broker, "TopicA", b"x")
    answer = send_back(client, broker, original.wrote_offset, group="NoSuchGroup")
    assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
