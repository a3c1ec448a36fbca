"""SubscriptionGroupManager: auto-creation, defaults, subscriptionGroup.json."""

import json

from rmq.broker.config import BrokerConfig
from rmq.broker.subscription_group import (
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
)


def manager(store_dir, **settings):
    return SubscriptionGroupManager(BrokerConfig(broker_ip1="127.0.0.1", **settings), store_dir)


def test_groups_are_auto_created_with_rocketmqs_defaults(store_dir):
    m = manager(store_dir)
    version = m.data_version.counter
    config = m.find_subscription_group_config("GID_orders")
    assert config == SubscriptionGroupConfig("GID_orders")
    assert (
        config.retry_queue_nums,
        config.retry_max_times,
        config.broker_id,
        config.which_broker_when_consume_slowly,
    ) == (1, 16, 0, 1)
    assert config.consume_enable and config.consume_broadcast_enable
    assert m.data_version.counter == version + 1
    assert m.find_subscription_group_config("GID_orders") is config
    assert m.find_subscription_group_config("bad group") is None
    assert m.find_subscription_group_config("TOOLS_CONSUMER") is not None


def test_no_auto_creation_when_disabled_except_system_groups(store_dir):
    m = manager(store_dir, auto_create_subscription_group=False)
    assert m.find_subscription_group_config("GID_orders") is None
    assert m.find_subscription_group_config("CID_RMQ_SYS_TRANS") is not None


def test_subscription_group_json_survives_a_restart(store_dir):
    m = manager(store_dir)
    m.update_subscription_group_config(SubscriptionGroupConfig("G", retry_max_times=3, consume_broadcast_enable=False))
    on_disk = json.loads((store_dir / "config" / "subscriptionGroup.json").read_text())
    assert on_disk["subscriptionGroupTable"]["G"] == {
        "groupName": "G",
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": False,
        "retryQueueNums": 1,
        "retryMaxTimes": 3,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
        "consumeMessageOrderly": False,
    }
    m.disable_consume("G")
    again = manager(store_dir)
    assert again.load()
    loaded = again.find_subscription_group_config("G")
    assert loaded.retry_max_times == 3 and not loaded.consume_enable
    assert again.data_version == m.data_version
    assert again.delete_subscription_group_config("G") and not again.delete_subscription_group_config("G")
