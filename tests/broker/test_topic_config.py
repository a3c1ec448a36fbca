"""TopicConfigManager: system topics, auto-creation through TBW102, topics.json, dataVersion."""

import json

import pytest

from rmq.broker.config import BrokerConfig
from rmq.broker.topic_config import TopicConfig, TopicConfigManager
from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode


def manager(store_dir, **settings):
    config = BrokerConfig(broker_ip1="127.0.0.1", **settings)
    return TopicConfigManager(config, store_dir)


def test_system_topics_of_rocketmq_4_9(store_dir):
    m = manager(store_dir)
    tbw = m.select_topic_config("TBW102")
    assert (tbw.read_queue_nums, tbw.write_queue_nums, tbw.perm) == (8, 8, 7)
    schedule = m.select_topic_config("SCHEDULE_TOPIC_XXXX")
    assert (schedule.read_queue_nums, schedule.perm) == (18, 6)
    assert m.select_topic_config("SELF_TEST_TOPIC").write_queue_nums == 1
    assert m.select_topic_config("OFFSET_MOVED_EVENT").write_queue_nums == 1
    assert m.select_topic_config("DefaultCluster").perm == 7
    assert m.select_topic_config("broker-a").perm == 7
    assert m.select_topic_config("DefaultCluster_REPLY_TOPIC") is not None
    assert m.select_topic_config("RMQ_SYS_TRANS_HALF_TOPIC") is None  # created on first use
    assert manager(store_dir, auto_create_topic_enable=False).select_topic_config("TBW102") is None


def test_auto_create_through_tbw102(store_dir):
    changes = []
    m = manager(store_dir)
    m.on_change = lambda: changes.append(1)
    version = m.data_version.counter
    created = m.create_topic_in_send_message("NewTopic", "TBW102", 4, remote_address="127.0.0.1:5555")
    assert created == TopicConfig("NewTopic", 4, 4, 6, "SINGLE_TAG", 0, False)
    assert m.data_version.counter == version + 1 and changes == [1]
    # the client asks for more queues than the template has: the template wins
    assert m.create_topic_in_send_message("Bigger", "TBW102", 32).write_queue_nums == 8
    # an existing topic is returned as it is
    assert m.create_topic_in_send_message("NewTopic", "TBW102", 1).write_queue_nums == 4
    assert json.loads((store_dir / "config" / "topics.json").read_text())["topicConfigTable"]["NewTopic"]["perm"] == 6


def test_auto_create_refused_with_a_reason(store_dir):
    m = manager(store_dir, auto_create_topic_enable=False)
    with pytest.raises(RequestRefused) as e:
        m.create_topic_in_send_message("NewTopic", "TBW102", 4)
    assert e.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert "autoCreateTopicEnable is false" in e.value.remark
    m = manager(store_dir)
    with pytest.raises(RequestRefused, match="no inherit permission"):
        m.create_topic_in_send_message("NewTopic", "SELF_TEST_TOPIC", 4)
    with pytest.raises(RequestRefused, match="'Nope' does not exist"):
        m.create_topic_in_send_message("NewTopic", "Nope", 4)
    with pytest.raises(RequestRefused) as e:
        m.create_topic_in_send_message("bad topic!", "TBW102", 4)
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL and "outside [A-Za-z0-9_%|-]" in e.value.remark
    assert m.select_topic_config("NewTopic") is None


def test_retry_topic_created_by_the_broker(store_dir):
    m = manager(store_dir)
    retry = m.create_topic_in_send_message_back("%RETRY%group", 1, 6)
    assert (retry.read_queue_nums, retry.write_queue_nums, retry.perm) == (1, 1, 6)
    assert m.create_topic_in_send_message_back("%RETRY%group", 8, 6) is retry


def test_update_delete_and_data_version(store_dir):
    m = manager(store_dir)
    versions = [m.data_version.counter]
    m.update_topic_config(TopicConfig("T", 4, 4))
    versions.append(m.data_version.counter)
    m.update_topic_config(TopicConfig("T", 8, 8, order=True))
    versions.append(m.data_version.counter)
    assert m.is_order_topic("T")
    assert m.delete_topic("T") and not m.delete_topic("T")
    versions.append(m.data_version.counter)
    assert versions == sorted(set(versions)) and len(versions) == 4
    with pytest.raises(RequestRefused, match="queue numbers must not be negative"):
        m.update_topic_config(TopicConfig("T", -1, 4))
    with pytest.raises(RequestRefused, match="topic name is empty"):
        m.update_topic_config(TopicConfig(""))


def test_topics_json_is_rocketmqs_shape_and_survives_a_restart(store_dir):
    m = manager(store_dir)
    m.update_topic_config(TopicConfig("TopicTest", 4, 4))
    on_disk = json.loads((store_dir / "config" / "topics.json").read_text())
    assert on_disk["topicConfigTable"]["TopicTest"] == {
        "topicName": "TopicTest",
        "readQueueNums": 4,
        "writeQueueNums": 4,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }
    assert on_disk["dataVersion"] == m.data_version.to_json()
    assert m.build_serialize_wrapper() == on_disk

    again = manager(store_dir)
    assert again.load()
    assert again.select_topic_config("TopicTest") == TopicConfig("TopicTest", 4, 4)
    assert again.data_version == m.data_version
    assert again.select_topic_config("TBW102") is not None


@pytest.mark.parametrize(
    "topic",
    ["TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_anything"],
)
def test_system_topics_cannot_be_changed_by_users(store_dir, topic):
    m = manager(store_dir)
    with pytest.raises(RequestRefused, match="is a system topic") as e:
        m.update_topic_config(TopicConfig(topic, 1, 1))
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
    with pytest.raises(RequestRefused, match="is a system topic"):
        m.delete_topic(topic)
    # the broker itself still creates the lazy ones
    assert m.create_topic_in_send_message_back("RMQ_SYS_TRANS_HALF_TOPIC", 1, 6).write_queue_nums == 1


def test_tbw102_stays_a_system_topic_with_auto_creation_off(store_dir):
    m = manager(store_dir, auto_create_topic_enable=False)
    with pytest.raises(RequestRefused, match="is a system topic"):
        m.update_topic_config(TopicConfig("TBW102", 8, 8, 7))
