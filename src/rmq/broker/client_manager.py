"""The broker's view of its clients (RocketMQ's ClientManageProcessor bookkeeping and
ClientHousekeepingService): heartbeats in, membership changes out.

    changed = clients.register_heartbeat(parse_heartbeat(body), channel, "JAVA", 399)
    for group in changed: notify(clients.consumers.channels(group))   # NOTIFY_CONSUMER_IDS_CHANGED

Creating ``%RETRY%<group>`` and honouring a group's notifyConsumerIdsChangedEnable stay with the
broker, which owns the topic and subscription-group managers.
"""

from __future__ import annotations

from typing import Any

from rmq._clock import now_ms
from rmq.broker.client_channel import CHANNEL_EXPIRED_MS, ChannelScan, ClientChannelInfo
from rmq.broker.consumer_manager import ConsumerManager
from rmq.broker.producer_manager import ProducerManager
from rmq.protocol.heartbeat import HeartbeatData


class ClientManager:
    """Consumers and producers together, for the events that touch both."""

    def __init__(self, channel_expired_ms: int = CHANNEL_EXPIRED_MS):
        self.consumers = ConsumerManager(channel_expired_ms)
        self.producers = ProducerManager(channel_expired_ms)

    def register_heartbeat(
        self, heartbeat: HeartbeatData, channel: Any, language: str = "", version: int = 0, now: int | None = None
    ) -> set[str]:
        """Record a HEART_BEAT; returns the consumer groups whose membership or topics changed."""
        now = now_ms() if now is None else now
        changed = set()
        for data in heartbeat.consumer_data_set:
            info = ClientChannelInfo(channel, heartbeat.client_id, language, version, now)
            if self.consumers.register_consumer(
                data.group_name,
                info,
                data.consume_type,
                data.message_model,
                data.consume_from_where,
                data.subscriptions,
                now,
            ):
                changed.add(data.group_name)
        for group in heartbeat.producer_groups:
            self.producers.register_producer(
                group, ClientChannelInfo(channel, heartbeat.client_id, language, version, now), now
            )
        return changed

    def unregister_client(
        self, client_id: str, producer_group: str | None = None, consumer_group: str | None = None
    ) -> set[str]:
        """UNREGISTER_CLIENT; returns the consumer group when the client was one of its members."""
        if producer_group:
            self.producers.unregister_producer(producer_group, client_id)
        if consumer_group and self.consumers.unregister_consumer(consumer_group, client_id):
            return {consumer_group}
        return set()

    def on_channel_closed(self, channel: Any) -> set[str]:
        """A connection closed: forget its clients; returns the consumer groups that changed."""
        self.producers.on_channel_closed(channel)
        return self.consumers.on_channel_closed(channel)

    def scan_not_active_channels(self, now: int | None = None) -> ChannelScan:
        """Forget clients silent for 120 s (run it every 10 s): groups to notify, channels to close."""
        now = now_ms() if now is None else now
        scan = self.consumers.scan_not_active_channels(now)
        for channel in self.producers.scan_not_active_channels(now):
            scan.add_channel(channel)
        return scan
