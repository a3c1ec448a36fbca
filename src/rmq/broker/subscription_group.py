"""Consumer group settings (RocketMQ's SubscriptionGroupManager), in ``config/subscriptionGroup.json``:

    {"subscriptionGroupTable": {"<group>": {"groupName", "consumeEnable", "consumeFromMinEnable",
        "consumeBroadcastEnable", "retryQueueNums", "retryMaxTimes", "brokerId",
        "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable", "consumeMessageOrderly"}},
     "dataVersion": {"timestamp", "counter"}}

A group is created with the defaults the first time it is seen (autoCreateSubscriptionGroup).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from rmq.broker.config import BrokerConfig
from rmq.broker.config_manager import VersionedTableManager
from rmq.protocol.message import CID_RMQ_SYS_PREFIX, SYSTEM_GROUPS, group_error
from rmq.protocol.route import MASTER_ID

log = logging.getLogger("rmq.broker")

_JSON_NAMES = {
    "group_name": "groupName",
    "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable",
    "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes",
    "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
    "consume_message_orderly": "consumeMessageOrderly",
}


@dataclasses.dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    # queues of %RETRY%<group>, created when a consumer of the group first heartbeats
    retry_queue_nums: int = 1
    # deliveries before a message goes to %DLQ%<group> (a send-back may carry its own maximum)
    retry_max_times: int = 16
    # the broker pulls are steered to; a slave id when the master is slow
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    # RocketMQ 5.x adds this; 4.x brokers ignore it in the file
    consume_message_orderly: bool = False

    def to_json(self) -> dict[str, Any]:
        return {json_name: getattr(self, name) for name, json_name in _JSON_NAMES.items()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        kwargs: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            json_name = _JSON_NAMES[field.name]
            if json_name in obj:
                kind = type(field.default) if field.default is not dataclasses.MISSING else str
                kwargs[field.name] = kind(obj[json_name])
        return cls(**kwargs)


# the least each number of a group config may be (whichBrokerWhenConsumeSlowly and brokerId: broker ids)
_MINIMUM = {"retry_queue_nums": 1, "retry_max_times": 0, "broker_id": MASTER_ID, "which_broker_when_consume_slowly": 0}


def parse_subscription_group(obj: Any) -> SubscriptionGroupConfig:
    """The config an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body states, as 4.x decodes it (a field it
    leaves out takes its default, fields of later versions are ignored), but strict about what it
    does state: ValueError naming the field, its value and what was expected."""
    if not isinstance(obj, dict):
        raise ValueError(f"the body must be a SubscriptionGroupConfig JSON object, not {type(obj).__name__}")
    group = obj.get("groupName")
    if not isinstance(group, str):
        raise ValueError(f"groupName is {group!r}: expected the group's name")
    reason = group_error(group)
    if reason is not None:
        raise ValueError(reason)
    kwargs: dict[str, Any] = {"group_name": group}
    for field in dataclasses.fields(SubscriptionGroupConfig):
        json_name = _JSON_NAMES[field.name]
        if field.name == "group_name" or json_name not in obj:
            continue
        value = obj[json_name]
        # bool is an int in Python: neither stands in for the other here, as in Java
        if type(value) is not type(field.default):
            expected = "true or false" if isinstance(field.default, bool) else "an integer"
            raise ValueError(f"{json_name} is {value!r}: expected {expected}")
        least = _MINIMUM.get(field.name)
        if least is not None and obj[json_name] < least:
            raise ValueError(f"{json_name} is {value}: expected at least {least}")
        kwargs[field.name] = value
    return SubscriptionGroupConfig(**kwargs)


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


class SubscriptionGroupManager(VersionedTableManager[SubscriptionGroupConfig]):
    """Consumer group configs; unknown groups are auto-created when autoCreateSubscriptionGroup."""

    file_name = "subscriptionGroup.json"
    table_key = "subscriptionGroupTable"

    def __init__(self, broker_config: BrokerConfig, store_path_root_dir: str | os.PathLike[str]):
        super().__init__(store_path_root_dir)
        self.broker_config = broker_config
        for name in SYSTEM_GROUPS:
            self._table[name] = self._new_group(name)

    def _new_group(self, group: str) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig(
            group, which_broker_when_consume_slowly=self.broker_config.which_broker_when_consume_slowly
        )

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with the defaults when missing and auto-creation is on (or
        the group is a broker-internal one). None when it does not exist and may not be created;
        an illegal group name is never created."""
        with self._lock:
            config = self._table.get(group)
            if config is not None:
                return config
            if not (self.broker_config.auto_create_subscription_group or is_sys_consumer_group(group)):
                return None
            reason = group_error(group)
            if reason is not None:
                log.warning("subscription group not auto-created: %s", reason)
                return None
            config = self._new_group(group)
            self._put(config.group_name, config)
        log.info("auto-created subscription group %s", group)
        self.persist()
        return config

    def subscription_group_table(self) -> dict[str, SubscriptionGroupConfig]:
        with self._lock:
            return dict(self._table)

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        with self._lock:
            old = self._table.get(config.group_name)
            self._put(config.group_name, config)
        log.info("%s subscription group %s", "updated" if old else "created", config)
        self.persist()

    def disable_consume(self, group: str) -> None:
        with self._lock:
            config = self._table.get(group)
            if config is None:
                return
            config.consume_enable = False
            self._put(config.group_name, config)
        self.persist()

    def delete_subscription_group_config(self, group: str) -> bool:
        with self._lock:
            if self._remove(group) is None:
                return False
        log.info("deleted subscription group %s", group)
        self.persist()
        return True

    def item_from_json(self, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig.from_json(obj)
