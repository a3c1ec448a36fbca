"""The pieces BrokerController owns, assembled the way it assembles them, serving the extras'
processors on a real RemotingServer: the seam the broker-extras processors and services are
written against, until the controller itself is on main.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rmq.broker.client_manager import ClientManager
from rmq.broker.config import BrokerConfig
from rmq.broker.consumer_offset import ConsumerOffsetManager
from rmq.broker.delay import DelayOffsetManager, schedule_destination
from rmq.broker.processor.admin import AdminProcessor
from rmq.broker.processor.lock import LockProcessor
from rmq.broker.processor.query import QueryMessageProcessor
from rmq.broker.processor.send_back import SendBackProcessor
from rmq.broker.rebalance_lock import RebalanceLockManager
from rmq.broker.schedule import ScheduleMessageService
from rmq.broker.subscription_group import SubscriptionGroupManager
from rmq.broker.topic_config import TopicConfigManager
from rmq.message import encode_properties
from rmq.net.server import RemotingServer
from rmq.store import MessageStore, MessageStoreConfig, PutMessageResult
from tests.conftest import LOOPBACK, free_port

PROCESSORS = [SendBackProcessor, QueryMessageProcessor, LockProcessor, AdminProcessor]


class MiniBroker:
    def __init__(self, root: Path, *, port: int | None = None, schedule_tick: float = 0.02,
                 **store_settings):
        port = port or free_port()
        self.config = BrokerConfig(broker_ip1=LOOPBACK, listen_port=port, namesrv_addr="127.0.0.1:1")
        settings = dict(mapped_file_size_commit_log=4 << 20, mapped_file_size_consume_queue=20 * 1000,
                        max_hash_slot_num=1000, max_index_num=4000)
        settings.update(store_settings)
        self.store = MessageStore(MessageStoreConfig(store_path_root_dir=str(root), broker_ip1=LOOPBACK,
                                                     listen_port=port, **settings))
        self.topic_config_manager = TopicConfigManager(self.config, root)
        self.consumer_offset_manager = ConsumerOffsetManager(root)
        self.subscription_group_manager = SubscriptionGroupManager(self.config, root)
        self.delay_offset_manager = DelayOffsetManager(root)
        self.client_manager = ClientManager()
        self.rebalance_lock_manager = RebalanceLockManager()
        self.server = RemotingServer(LOOPBACK, port)
        self.broker_addr = f"{LOOPBACK}:{port}"
        self.schedule = ScheduleMessageService(self, tick=schedule_tick, persist_interval=0.05)
        self.arrivals: list[tuple[str, int]] = []
        self._arrivals_lock = threading.Lock()
        for cls in PROCESSORS:
            for code, handler in cls(self).handlers().items():
                self.server.register_processor(code, handler)

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        with self._arrivals_lock:
            self.arrivals.append((topic, queue_id))

    def start(self) -> "MiniBroker":
        for manager in (self.topic_config_manager, self.consumer_offset_manager,
                        self.subscription_group_manager, self.delay_offset_manager):
            manager.load()
        self.store.start()
        self.schedule.start()
        self.server.start()
        return self

    def shutdown(self) -> None:
        self.server.shutdown()
        self.schedule.shutdown()
        self.store.shutdown()
        for manager in (self.topic_config_manager, self.consumer_offset_manager,
                        self.subscription_group_manager, self.delay_offset_manager):
            manager.persist()

    # -- what the core's send path does, for the tests ----------------------------------------

    def send(self, topic: str, body: bytes, queue_id: int = 0, **properties: str) -> PutMessageResult:
        """Store a message as a producer's send would, DELAY converted through the shared helper."""
        topic, queue_id, props = schedule_destination(topic, queue_id, properties,
                                                      len(self.store.config.delay_level_ms))
        result = self.store.put_message(topic, queue_id, body, encode_properties(props))
        assert result.ok, result.status
        return result
