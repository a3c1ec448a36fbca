"""Topic configs of a broker (RocketMQ's TopicConfigManager), persisted as ``config/topics.json``:

    {"topicConfigTable": {"<topic>": {"topicName", "readQueueNums", "writeQueueNums", "perm",
                                      "topicFilterType": "SINGLE_TAG", "topicSysFlag", "order",
                                      "attributes": {"message.type": "FIFO"}}},
     "dataVersion": {"timestamp", "counter"}}

The same object is the ``topicConfigSerializeWrapper`` of REGISTER_BROKER (docs/nameserver.md#registration);
``dataVersion`` moves on every change so name servers know to re-read the table.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Any

from rmq.broker.config import BrokerConfig
from rmq.broker.config_manager import VersionedTableManager
from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    REPLY_TOPIC_POSTFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    topic_error,
)
from rmq.protocol.perm import (
    PERM_ALL,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    is_inherited,
)
from rmq.protocol.topic_attributes import TopicMessageType, topic_message_type

log = logging.getLogger("rmq.broker")

# One queue per delay level (docs/messaging.md#delayed-messages).
SCHEDULE_TOPIC_QUEUE_NUMS = 18
# TopicConfig's defaults in RocketMQ, used by the system topics that do not set their own.
DEFAULT_QUEUE_NUMS = 16
SINGLE_TAG = "SINGLE_TAG"
# Broker-owned topics that may be absent from the table (created on first use, or TBW102 with
# auto-creation off); with the ones created at start they are the system topics.
OTHER_SYSTEM_TOPICS = frozenset(
    {AUTO_CREATE_TOPIC_KEY_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC}
)


@dataclasses.dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    #: RocketMQ 5.x's topic attributes (rmq.protocol.topic_attributes): ``message.type``
    attributes: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }
        if self.attributes:  # as 5.x writes it; a 4.x reader ignores the key
            obj["attributes"] = dict(self.attributes)
        return obj

    @property
    def message_type(self) -> TopicMessageType:
        return topic_message_type(self.attributes)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TopicConfig:
        return cls(
            topic_name=str(obj["topicName"]),
            read_queue_nums=int(obj.get("readQueueNums", DEFAULT_QUEUE_NUMS)),
            write_queue_nums=int(obj.get("writeQueueNums", DEFAULT_QUEUE_NUMS)),
            perm=int(obj.get("perm", PERM_READ | PERM_WRITE)),
            topic_filter_type=str(obj.get("topicFilterType") or SINGLE_TAG),
            topic_sys_flag=int(obj.get("topicSysFlag", 0)),
            order=bool(obj.get("order", False)),
            attributes={str(k): str(v) for k, v in (obj.get("attributes") or {}).items()},
        )


def check_topic_config(config: TopicConfig) -> None:
    """Refuse a config a user asked for that cannot work, with the reason (MESSAGE_ILLEGAL)."""
    reason = topic_error(config.topic_name)
    if reason is None:
        if config.read_queue_nums < 0 or config.write_queue_nums < 0:
            reason = (
                f"queue numbers must not be negative, got read {config.read_queue_nums} write {config.write_queue_nums}"
            )
        elif not 0 <= config.perm <= PERM_ALL:
            reason = f"perm must be a bit set 0-7 (4 read, 2 write, 1 inherit), got {config.perm}"
    if reason is not None:
        raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, reason)


class TopicConfigManager(VersionedTableManager[TopicConfig]):
    """The broker's topic table with RocketMQ's system topics and auto-creation rules.

    ``on_change`` is called (outside the lock) after a topic is created, updated or deleted: the
    broker then registers with every name server at once, so routes change without waiting for the
    30 s tick.
    """

    file_name = "topics.json"
    table_key = "topicConfigTable"

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_path_root_dir: str | os.PathLike[str],
        on_change: Callable[[], None] | None = None,
    ):
        super().__init__(store_path_root_dir)
        self.broker_config = broker_config
        self.on_change = on_change
        for config in self._system_topics():
            self._table[config.topic_name] = config
        self.system_topics = frozenset(self._table) | OTHER_SYSTEM_TOPICS

    def _system_topics(self) -> list[TopicConfig]:
        """The topics RocketMQ 4.9's broker creates at start (TopicConfigManager's constructor).

        The transaction topics are not among them: RocketMQ creates RMQ_SYS_TRANS_HALF_TOPIC and
        RMQ_SYS_TRANS_OP_HALF_TOPIC (1 queue, RW) on first use through
        ``create_topic_in_send_message_back``.
        """
        bc = self.broker_config
        rw = PERM_READ | PERM_WRITE
        topics = [TopicConfig(SELF_TEST_TOPIC, 1, 1)]
        if bc.auto_create_topic_enable:
            n = bc.default_topic_queue_nums
            topics.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PERM_ALL))
        topics.append(TopicConfig(BENCHMARK_TOPIC, 1024, 1024))
        # Producers may address a whole cluster or one broker by these names.
        topics.append(TopicConfig(bc.broker_cluster_name, perm=PERM_INHERIT | (rw if bc.cluster_topic_enable else 0)))
        topics.append(TopicConfig(bc.broker_name, 1, 1, perm=PERM_INHERIT | (rw if bc.broker_topic_enable else 0)))
        topics.append(TopicConfig(OFFSET_MOVED_EVENT, 1, 1))
        topics.append(TopicConfig(SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUMS, SCHEDULE_TOPIC_QUEUE_NUMS))
        if bc.trace_topic_enable:
            topics.append(TopicConfig(bc.msg_trace_topic_name, 1, 1))
        topics.append(TopicConfig(f"{bc.broker_cluster_name}_{REPLY_TOPIC_POSTFIX}", 1, 1))
        return topics

    # -- reads ----------------------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        with self._lock:
            return self._table.get(topic)

    def topic_config_table(self) -> dict[str, TopicConfig]:
        """A copy of the table (topic -> config)."""
        with self._lock:
            return dict(self._table)

    def is_system_topic(self, topic: str) -> bool:
        """A topic the broker owns: users may not create, change or delete it."""
        return topic in self.system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)

    def _refuse_system_topic(self, topic: str) -> None:
        if self.is_system_topic(topic):
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL, f"topic {topic!r} is a system topic of this broker and cannot be changed"
            )

    def is_order_topic(self, topic: str) -> bool:
        config = self.select_topic_config(topic)
        return config is not None and config.order

    def build_serialize_wrapper(self, broker_permission: int = PERM_READ | PERM_WRITE) -> dict[str, Any]:
        """``{"topicConfigTable": {...}, "dataVersion": {...}}`` for REGISTER_BROKER (the file's shape).
        A broker that does not take writes or reads (``broker_permission``) registers every topic
        with that permission, as 4.x's registerBrokerAll: the routes say so."""
        wrapper = self.encode()
        if broker_permission & (PERM_READ | PERM_WRITE) != PERM_READ | PERM_WRITE:
            for topic_config in wrapper["topicConfigTable"].values():
                topic_config["perm"] = broker_permission
        return wrapper

    def routes_changed(self) -> None:
        """What the routes say changed though no topic did (brokerPermission): a new data version,
        so that name servers take the next registration and the send checks look again."""
        with self._lock:
            self.data_version.next_version()
            self.mark_changed()

    # -- creation -------------------------------------------------------------------------------

    def create_topic_in_send_message(
        self,
        topic: str,
        default_topic: str,
        client_default_queue_nums: int,
        topic_sys_flag: int = 0,
        remote_address: str | None = None,
    ) -> TopicConfig:
        """The config of ``topic``, auto-created from ``default_topic`` (TBW102) when missing.

        Creation needs the default topic to exist with the INHERIT perm (and, for TBW102,
        autoCreateTopicEnable). The new topic gets min(client's, default topic's write) queues and
        the default topic's perm without INHERIT. Raises RequestRefused (TOPIC_NOT_EXIST, or
        MESSAGE_ILLEGAL for an illegal name) with the reason.
        """
        with self._lock:
            existing = self._existing_or_check_name(topic)
            if existing is not None:
                return existing
            default_config = self._table.get(default_topic)
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker_config.auto_create_topic_enable:
                why = "autoCreateTopicEnable is false on this broker"
            elif default_config is None:
                why = f"its default topic {default_topic!r} does not exist"
            elif not is_inherited(default_config.perm):
                why = f"its default topic {default_topic!r} has no inherit permission (perm {default_config.perm})"
            else:
                why = None
            if why is not None:
                log.warning("topic %s not auto-created for %s: %s", topic, remote_address or "a producer", why)
                raise RequestRefused(
                    ResponseCode.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist and cannot be auto-created: {why}"
                )
            assert default_config is not None
            queue_nums = max(0, min(client_default_queue_nums, default_config.write_queue_nums))
            created = TopicConfig(
                topic,
                queue_nums,
                queue_nums,
                default_config.perm & ~PERM_INHERIT,
                default_config.topic_filter_type,
                topic_sys_flag,
            )
            self._put(topic, created)
            log.info(
                "auto-created topic %s from %s for %s: %s",
                topic,
                default_topic,
                remote_address or "a producer",
                created,
            )
        self._changed_now()
        return created

    def create_topic_in_send_message_back(
        self, topic: str, client_default_queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """The config of a broker-made topic (``%RETRY%<group>``, ``%DLQ%<group>``, transaction
        topics), created with these settings when missing."""
        with self._lock:
            existing = self._existing_or_check_name(topic)
            if existing is not None:
                return existing
            created = TopicConfig(
                topic, client_default_queue_nums, client_default_queue_nums, perm, SINGLE_TAG, topic_sys_flag
            )
            self._put(topic, created)
            log.info("created topic %s", created)
        self._changed_now()
        return created

    def update_topic_config(self, config: TopicConfig) -> TopicConfig:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC); illegal settings and system topics
        raise MESSAGE_ILLEGAL."""
        check_topic_config(config)
        self._refuse_system_topic(config.topic_name)
        with self._lock:
            old = self._table.get(config.topic_name)
            self._put(config.topic_name, config)
        log.info("%s topic %s", "updated" if old else "created", config)
        self._changed_now()
        return config

    def delete_topic(self, topic: str) -> bool:
        """Forget a topic's config; False when it did not exist. System topics raise MESSAGE_ILLEGAL."""
        self._refuse_system_topic(topic)
        with self._lock:
            old = self._remove(topic)
            if old is None:
                log.warning("delete topic %s: no such topic", topic)
                return False
        log.info("deleted topic %s", old)
        self._changed_now()
        return True

    def _existing_or_check_name(self, topic: str) -> TopicConfig | None:
        """The topic's config; None when it is absent and may be created; raises when illegal."""
        existing = self._table.get(topic)
        if existing is None:
            reason = topic_error(topic)
            if reason is not None:
                raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, reason)
        return existing

    def _changed_now(self) -> None:
        # Topic changes are rare and a lost one means a lost route: write at once, as RocketMQ does.
        self.persist()
        if self.on_change is not None:
            self.on_change()

    # -- file -----------------------------------------------------------------------------------

    def item_from_json(self, obj: dict[str, Any]) -> TopicConfig:
        return TopicConfig.from_json(obj)
