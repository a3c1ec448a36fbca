"""rmq-admin group update|delete|list (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200, DELETE_SUBSCRIPTIONGROUP
207, GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201) against a real in-process broker, and what each field of
the group's config does to the broker: consumeEnable stops pulls and pops with 4.x's code and remark,
retryMaxTimes decides when a failing message goes to %DLQ%<group>, consumeBroadcastEnable refuses a
broadcasting consumer, brokerId / whichBrokerWhenConsumeSlowly are what pulls suggest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmq.broker.topic_config import TopicConfig
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import dlq_topic, retry_topic
from rmq.protocol.request_flags import PullSysFlag
from tests.helpers.admin import admin_json
from tests.helpers.broker import InProcessBrokers, messages_in, put, send_back, wait_for_message
from tests.helpers.pop import pop_request
from tests.helpers.requests import heartbeat_request

TOPIC = "GroupsTopic"
GROUP = "OpsGroup"


@pytest.fixture
def with_topic(embedded):
    """The embedded broker and name server, with TOPIC (one queue)."""
    embedded[0].topic_config_manager.update_topic_config(TopicConfig(TOPIC, 1, 1))
    return embedded


def pull(client, broker, group: str, offset: int = 0, subscription: bool = True) -> RemotingCommand:
    """A pull of queue 0 of TOPIC; without ``subscription`` as Java's push consumers pull (the
    subscription is the one their heartbeat registered)."""
    ext = {
        "consumerGroup": group,
        "topic": TOPIC,
        "queueId": "0",
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": str(PullSysFlag.SUBSCRIPTION if subscription else 0),
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
        "expressionType": "TAG",
    }
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)
    return client.invoke_sync(broker.broker_addr, request, timeout=3.0)


def test_update_list_and_delete_a_group_every_field_persisted(with_topic, store_dir: Path):
    broker, namesrv = with_topic
    admin_json(
        namesrv,
        "group",
        "update",
        GROUP,
        "--no-consume-enable",
        "--no-consume-from-min-enable",
        "--no-consume-broadcast-enable",
        "--consume-message-orderly",
        "--no-notify-consumer-ids-changed-enable",
        "--retry-queue-nums",
        "2",
        "--retry-max-times",
        "5",
        "--broker-id",
        "1",
        "--which-broker-when-consume-slowly",
        "2",
    )
    expected = {
        "groupName": GROUP,
        "consumeEnable": False,
        "consumeFromMinEnable": False,
        "consumeBroadcastEnable": False,
        "consumeMessageOrderly": True,
        "notifyConsumerIdsChangedEnable": False,
        "retryQueueNums": 2,
        "retryMaxTimes": 5,
        "brokerId": 1,
        "whichBrokerWhenConsumeSlowly": 2,
    }
    (row,) = [r for r in admin_json(namesrv, "group", "list") if r["groupName"] == GROUP]
    assert row == {"brokerAddr": broker.broker_addr, **expected}
    on_disk = json.loads((store_dir / "config" / "subscriptionGroup.json").read_text())
    assert on_disk["subscriptionGroupTable"][GROUP] == expected

    # a second update changes what it names and keeps the rest
    admin_json(namesrv, "group", "update", GROUP, "--consume-enable")
    (row,) = [r for r in admin_json(namesrv, "group", "list") if r["groupName"] == GROUP]
    assert row == {"brokerAddr": broker.broker_addr, **expected, "consumeEnable": True}

    admin_json(namesrv, "group", "delete", GROUP)
    assert GROUP not in [r["groupName"] for r in admin_json(namesrv, "group", "list")]
    on_disk = json.loads((store_dir / "config" / "subscriptionGroup.json").read_text())
    assert GROUP not in on_disk["subscriptionGroupTable"]


def test_a_bad_config_is_refused_with_the_field_named_and_nothing_changes(with_topic, client):
    broker, namesrv = with_topic
    admin_json(namesrv, "group", "update", GROUP, "--retry-max-times", "3")
    for body, named in (
        ({"groupName": GROUP, "retryMaxTimes": "two"}, "retryMaxTimes"),
        ({"groupName": GROUP, "consumeEnable": 0}, "consumeEnable"),
        ({"groupName": GROUP, "retryQueueNums": 0}, "retryQueueNums"),
        ({"groupName": "bad group!"}, "bad group!"),
        ([GROUP], "JSON object"),
    ):
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(body).encode()
        )
        answer = client.invoke_sync(broker.broker_addr, request, timeout=3.0)
        assert answer.code == ResponseCode.INVALID_PARAMETER and named in answer.remark, (body, answer.remark)
    assert broker.subscription_group_manager.subscription_group_table()[GROUP].retry_max_times == 3


# UPDATE_AND_CREATE_SUBSCRIPTIONGROUP bodies as mqadmin updateSubGroup sends them: fastjson's
# serialization of 4.9's SubscriptionGroupConfig (fields sorted by name) and of 5.x's, which adds
# consumeMessageOrderly, groupRetryPolicy, groupSysFlag, consumeTimeoutMinute, attributes
GOLDEN_4X_BODY = (
    '{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,"consumeFromMinEnable":true,'
    '"groupName":"OpsGroup","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":2,"retryQueueNums":1,'
    '"whichBrokerWhenConsumeSlowly":1}'
)
GOLDEN_5X_BODY = (
    '{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
    '"consumeFromMinEnable":true,"consumeMessageOrderly":true,"consumeTimeoutMinute":15,'
    '"groupName":"OpsGroup","groupRetryPolicy":{"type":"CUSTOMIZED","customizedRetryPolicy":'
    '{"next":[1000,5000],"type":"CUSTOMIZED"}},"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,'
    '"retryMaxTimes":5,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}'
)


def test_mqadmins_4x_and_5x_bodies_are_taken_and_the_list_answers_4x_fields(with_topic, client):
    broker, _ = with_topic
    for body, consume, retries, orderly in ((GOLDEN_4X_BODY, False, 2, False), (GOLDEN_5X_BODY, True, 5, True)):
        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body.encode())
        answer = client.invoke_sync(broker.broker_addr, request, timeout=3.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        config = broker.subscription_group_manager.subscription_group_table()[GROUP]
        assert (config.consume_enable, config.retry_max_times, config.consume_message_orderly) == (
            consume,
            retries,
            orderly,
        )
    request = RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
    table = json.loads(client.invoke_sync(broker.broker_addr, request, timeout=3.0).body)["subscriptionGroupTable"]
    # what 4.x's SubscriptionGroupWrapper holds per group, and 5.x's consumeMessageOrderly
    assert set(table[GROUP]) == set(json.loads(GOLDEN_4X_BODY)) | {"consumeMessageOrderly"}


def test_consume_enable_false_refuses_pulls_and_pops_with_4x_code_and_remark(with_topic, client):
    broker, namesrv = with_topic
    put(broker, TOPIC, b"m")
    assert pull(client, broker, GROUP).code == ResponseCode.SUCCESS
    admin_json(namesrv, "group", "update", GROUP, "--no-consume-enable")

    answer = pull(client, broker, GROUP)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, f"subscription group no permission, {GROUP}")
    answer = client.invoke_sync(broker.broker_addr, pop_request(TOPIC, GROUP), timeout=3.0)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, f"subscription group no permission, {GROUP}")

    admin_json(namesrv, "group", "update", GROUP, "--consume-enable")
    assert pull(client, broker, GROUP).code == ResponseCode.SUCCESS


def test_retry_max_times_two_sends_a_failing_message_to_the_dlq_after_two_retries(with_topic, client):
    broker, namesrv = with_topic
    admin_json(namesrv, "group", "update", GROUP, "--retry-max-times", "2")
    original = put(broker, TOPIC, b"failing")
    offset = original.wrote_offset
    for retry in (1, 2):  # the consumer fails it; no maximum of its own in the send-back
        assert send_back(client, broker, offset, delay_level=1, group=GROUP).code == ResponseCode.SUCCESS
        offset = wait_for_message(broker, retry_topic(GROUP), retry).physical_offset
        assert messages_in(broker, dlq_topic(GROUP)) == []
    assert send_back(client, broker, offset, delay_level=1, group=GROUP).code == ResponseCode.SUCCESS
    (dead,) = messages_in(broker, dlq_topic(GROUP))
    assert dead.body == b"failing" and dead.reconsume_times == 3


def test_consume_broadcast_enable_false_refuses_a_broadcasting_consumer(with_topic, client):
    broker, namesrv = with_topic
    put(broker, TOPIC, b"m")
    heartbeat = heartbeat_request("client-1", GROUP, TOPIC)
    body = json.loads(heartbeat.body)
    body["consumerDataSet"][0]["messageModel"] = "BROADCASTING"
    heartbeat = RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())
    assert client.invoke_sync(broker.broker_addr, heartbeat, timeout=3.0).code == ResponseCode.SUCCESS
    assert pull(client, broker, GROUP, subscription=False).code == ResponseCode.SUCCESS

    admin_json(namesrv, "group", "update", GROUP, "--no-consume-broadcast-enable")
    answer = pull(client, broker, GROUP, subscription=False)
    assert (answer.code, answer.remark) == (
        ResponseCode.NO_PERMISSION,
        f"the consumer group[{GROUP}] can not consume by broadcast way",
    )


def test_retry_queue_nums_makes_the_retry_topic_a_heartbeat_creates(with_topic, client):
    broker, namesrv = with_topic
    admin_json(namesrv, "group", "update", GROUP, "--retry-queue-nums", "3")
    heartbeat = heartbeat_request("client-1", GROUP, TOPIC)
    assert client.invoke_sync(broker.broker_addr, heartbeat, timeout=3.0).code == ResponseCode.SUCCESS
    retry = broker.topic_config_manager.select_topic_config(retry_topic(GROUP))
    assert retry is not None and retry.write_queue_nums == retry.read_queue_nums == 3


def test_pulls_suggest_the_groups_broker_id_and_its_slow_consumer_broker(store_dir: Path, client):
    brokers = InProcessBrokers(store_dir)
    try:
        # every read counts as far behind: nothing is taken to fit in memory
        broker = brokers.start(slaveReadEnable="true", accessMessageInMemoryMaxRatio="0")
        namesrv = brokers.started[0].namesrv.address
        broker.topic_config_manager.update_topic_config(TopicConfig(TOPIC, 1, 1))
        put(broker, TOPIC, b"m")
        admin_json(namesrv, "group", "update", GROUP, "--broker-id", "2", "--which-broker-when-consume-slowly", "3")
        found = pull(client, broker, GROUP)
        assert found.code == ResponseCode.SUCCESS and found.ext_fields["suggestWhichBrokerId"] == "3"
        nothing_new = pull(client, broker, GROUP, offset=1)
        assert nothing_new.code == ResponseCode.PULL_NOT_FOUND
        assert nothing_new.ext_fields["suggestWhichBrokerId"] == "2"
    finally:
        brokers.shutdown_all()
