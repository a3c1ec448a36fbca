"""The admin requests rmq-admin sends a broker, with RocketMQ's codes and body shapes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from rmq.broker.topic_config import TopicConfig
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.heartbeat import parse_heartbeat
from rmq.protocol.java_json import loads_mq_tables
from rmq.protocol.message_queue import MessageQueue
from tests.helpers.broker import put

TOPIC = "TopicAdmin"


def ask(client, broker, code: int, **ext) -> RemotingCommand:
    return client.invoke_sync(broker.broker_addr, RemotingCommand.request(code, ext), timeout=3.0)


def mq(queue_id: int, topic: str = TOPIC) -> MessageQueue:
    return MessageQueue(topic, "broker-a", queue_id)


@pytest.fixture
def filled(broker):
    """TopicAdmin with 2 queues: 3 messages in queue 0 (1 ms apart), none in queue 1."""
    broker.topic_config_manager.update_topic_config(TopicConfig(TOPIC, 2, 2))
    results = []
    for i in range(3):
        results.append(put(broker, TOPIC, f"m{i}".encode()))
        time.sleep(0.002)
    return results


def test_topic_stats_per_queue(broker, client, filled):
    answer = ask(client, broker, RequestCode.GET_TOPIC_STATS_INFO, topic=TOPIC)
    table = loads_mq_tables(answer.body)["offsetTable"]
    assert table[mq(0)] == {"lastUpdateTimestamp": filled[2].store_timestamp, "maxOffset": 3, "minOffset": 0}
    assert table[mq(1)] == {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0}
    answer = ask(client, broker, RequestCode.GET_TOPIC_STATS_INFO, topic="NoSuchTopic")
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST and "NoSuchTopic" in answer.remark


def test_consume_stats_and_who_consumes(broker, client, filled):
    broker.consumer_offset_manager.commit_offset("G1", TOPIC, 0, 1)
    stats = loads_mq_tables(ask(client, broker, RequestCode.GET_CONSUME_STATS, consumerGroup="G1").body)
    assert stats["offsetTable"][mq(0)] == {
        "brokerOffset": 3,
        "consumerOffset": 1,
        "lastTimestamp": filled[0].store_timestamp,
    }
    assert stats["offsetTable"][mq(1)]["brokerOffset"] == 0
    answer = ask(client, broker, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, topic=TOPIC)
    assert json.loads(bytes(answer.body)) == {"groupList": ["G1"]}
    empty = loads_mq_tables(ask(client, broker, RequestCode.GET_CONSUME_STATS, consumerGroup="Nobody").body)
    assert empty == {"consumeTps": 0.0, "offsetTable": {}}


def test_reset_offset_of_an_offline_group(broker, client, filled):
    broker.consumer_offset_manager.commit_offset("G1", TOPIC, 0, 3)
    answer = ask(
        client,
        broker,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        topic=TOPIC,
        group="G1",
        timestamp=filled[1].store_timestamp,
        isForce=True,
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert loads_mq_tables(answer.body)["offsetTable"] == {mq(0): 1, mq(1): 0}
    assert broker.consumer_offset_manager.query_offsets("G1", TOPIC) == {0: 1, 1: 0}
    # to the end; then without force a reset never moves an offset forward
    ask(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic=TOPIC, group="G1", timestamp=-1)
    assert broker.consumer_offset_manager.query_offset("G1", TOPIC, 0) == 3
    broker.consumer_offset_manager.commit_offset("G1", TOPIC, 0, 0)
    ask(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic=TOPIC, group="G1", timestamp=-1, isForce=False)
    assert broker.consumer_offset_manager.query_offset("G1", TOPIC, 0) == 0

    answer = ask(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic=TOPIC, group="Nobody", timestamp=0)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "no offsets" in answer.remark
    answer = ask(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic="Nope", group="G1", timestamp=0)
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST


def test_reset_offset_tells_online_consumers(broker, client, filled):
    told = []
    arrived = threading.Event()

    def on_reset(channel, request):
        told.append(request)
        arrived.set()

    client.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
    ask(client, broker, RequestCode.GET_ALL_TOPIC_CONFIG)  # opens the connection
    (channel,) = broker.server.channels
    heartbeat = parse_heartbeat(
        json.dumps(
            {
                "clientID": "c1",
                "consumerDataSet": [
                    {
                        "groupName": "G2",
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                        "subscriptionDataSet": [{"topic": TOPIC, "subString": "*"}],
                    }
                ],
                "producerDataSet": [],
            }
        )
    )
    broker.client_manager.register_heartbeat(heartbeat, channel, "JAVA", 399)

    answer = ask(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic=TOPIC, group="G2", timestamp=0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert arrived.wait(3.0)
    assert told[0].ext_fields["group"] == "G2" and told[0].ext_fields["topic"] == TOPIC
    assert loads_mq_tables(told[0].body)["offsetTable"] == {mq(0): 0, mq(1): 0}

    connections = json.loads(
        bytes(ask(client, broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="G2").body)
    )
    assert [c["clientId"] for c in connections["connectionSet"]] == ["c1"]
    assert connections["messageModel"] == "CLUSTERING" and TOPIC in connections["subscriptionTable"]
    answer = ask(client, broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="Nobody")
    assert answer.code == ResponseCode.CONSUMER_NOT_ONLINE


def test_delete_topic_forgets_config_offsets_and_queue_files(broker, client, filled):
    broker.consumer_offset_manager.commit_offset("G1", TOPIC, 0, 2)
    queue_dir = Path(broker.store.store_path) / "consumequeue" / TOPIC
    assert queue_dir.is_dir()
    assert ask(client, broker, RequestCode.DELETE_TOPIC_IN_BROKER, topic=TOPIC).code == ResponseCode.SUCCESS
    assert broker.topic_config_manager.select_topic_config(TOPIC) is None
    assert broker.consumer_offset_manager.query_offsets("G1", TOPIC) == {}
    assert not queue_dir.exists() and broker.store.get_max_offset_in_queue(TOPIC, 0) == 0  # space given back
    answer = ask(client, broker, RequestCode.DELETE_TOPIC_IN_BROKER, topic="SCHEDULE_TOPIC_XXXX")
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL and "system topic" in answer.remark


@pytest.mark.parametrize("name", ["../not-a-queue-dir", "..", "a\x00b", "Trail\n", ""])
def test_delete_topic_refuses_a_name_no_topic_can_have_and_touches_no_file(broker, client, name, tmp_path):
    # found by perf/fuzz_broker.py: a NUL failed the processor, and ".." reached os.rmdir, which
    # removed an empty directory beside the queues
    outside = Path(broker.store.store_path) / "not-a-queue-dir"
    outside.mkdir()
    answer = ask(client, broker, RequestCode.DELETE_TOPIC_IN_BROKER, topic=name)
    assert answer.code in (ResponseCode.MESSAGE_ILLEGAL, ResponseCode.SYSTEM_ERROR), answer
    assert outside.is_dir()


def test_topic_configs_runtime_info_and_delay_offsets(broker, client, filled):
    configs = json.loads(bytes(ask(client, broker, RequestCode.GET_ALL_TOPIC_CONFIG).body))
    assert configs["topicConfigTable"][TOPIC]["writeQueueNums"] == 2
    table = json.loads(bytes(ask(client, broker, RequestCode.GET_BROKER_RUNTIME_INFO).body))["table"]
    assert int(table["commitLogMaxOffset"]) == broker.store.get_max_phy_offset()
    assert all(isinstance(v, str) for v in table.values())
    delay = json.loads(bytes(ask(client, broker, RequestCode.GET_ALL_DELAY_OFFSET).body))
    assert "offsetTable" in delay


def test_what_a_slave_copies_comes_in_rocketmqs_wrappers(broker, client, filled):
    broker.consumer_offset_manager.commit_offset("G1", TOPIC, 1, 2)
    offsets = json.loads(bytes(ask(client, broker, RequestCode.GET_ALL_CONSUMER_OFFSET).body))
    assert offsets == {"offsetTable": {f"{TOPIC}@G1": {"1": 2}}}
    groups = json.loads(bytes(ask(client, broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body))
    assert set(groups) == {"subscriptionGroupTable", "dataVersion"}
    assert groups["subscriptionGroupTable"]["TOOLS_CONSUMER"]["whichBrokerWhenConsumeSlowly"] == 1
