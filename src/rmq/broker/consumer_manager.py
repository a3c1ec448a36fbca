"""Online consumers by group (RocketMQ's ConsumerManager and ConsumerGroupInfo).

Fed by HEART_BEAT and UNREGISTER_CLIENT, emptied by channel closes and by the scan for clients
silent for 120 s. Each change that alters a group's membership (a client joins or leaves) or its
set of subscribed topics is reported to the caller, which then sends NOTIFY_CONSUMER_IDS_CHANGED
to the group's channels so they rebalance at once instead of at their next 20 s tick.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from rmq._clock import now_ms
from rmq.broker.client_channel import (
    CHANNEL_EXPIRED_MS,
    ChannelScan,
    ClientChannelInfo,
    remove_clients,
)
from rmq.protocol.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rmq.protocol.subscription import SubscriptionData

log = logging.getLogger("rmq.broker")


@dataclasses.dataclass
class ConsumerGroupInfo:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    # Keyed by clientId: a client that reconnects replaces its old channel instead of counting twice.
    channels: dict[str, ClientChannelInfo] = dataclasses.field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = dataclasses.field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        return sorted(self.channels)

    def all_channels(self) -> list[Any]:
        return [info.channel for info in self.channels.values()]

    def update_channel(
        self,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        now: int,
    ) -> bool:
        """Record a heartbeat of ``info``; True when the client is new to the group."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.last_update_ms = now
        old = self.channels.get(info.client_id)
        if old is not None and old.channel is info.channel:
            old.last_update_ms = now
            return False
        info.last_update_ms = now
        self.channels[info.client_id] = info
        if old is not None:
            log.info("consumer %s of group %s reconnected on a new channel", info.client_id, self.group_name)
            return False
        log.info(
            "consumer %s joined group %s (%s, %s)",
            info.client_id,
            self.group_name,
            consume_type.name,
            message_model.name,
        )
        return True

    def update_subscription(self, subscriptions: Iterable[SubscriptionData], now: int) -> bool:
        """Take the heartbeat's subscriptions; True when the set of subscribed topics changed.

        A newer subVersion of a topic replaces the old expression without counting as a change.
        """
        changed = False
        incoming = {sub.topic: sub for sub in subscriptions}
        for topic, sub in incoming.items():
            old = self.subscriptions.get(topic)
            if old is None:
                self.subscriptions[topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[topic] = sub
        for topic in [t for t in self.subscriptions if t not in incoming]:
            log.info("group %s no longer subscribes to %s", self.group_name, topic)
            del self.subscriptions[topic]
            changed = True
        self.last_update_ms = now
        return changed


class ConsumerManager:
    """consumer group -> ConsumerGroupInfo. Thread-safe; every method returns plain data."""

    def __init__(self, channel_expired_ms: int = CHANNEL_EXPIRED_MS):
        self.channel_expired_ms = channel_expired_ms
        self._lock = threading.RLock()
        self._groups: dict[str, ConsumerGroupInfo] = {}

    def register_consumer(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: Iterable[SubscriptionData],
        now: int | None = None,
    ) -> bool:
        """Record a consumer's heartbeat. True when the group changed: a new member, or a topic
        subscribed or dropped (notify the group's channels)."""
        now = now_ms() if now is None else now
        with self._lock:
            group_info = self._groups.get(group)
            if group_info is None:
                group_info = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
                self._groups[group] = group_info
            joined = group_info.update_channel(info, consume_type, message_model, consume_from_where, now)
            resubscribed = group_info.update_subscription(subscriptions, now)
            return joined or resubscribed

    def unregister_consumer(self, group: str, client_id: str) -> bool:
        """A client leaves the group (UNREGISTER_CLIENT); True when it was a member."""
        with self._lock:
            group_info = self._groups.get(group)
            if group_info is None or group_info.channels.pop(client_id, None) is None:
                return False
            log.info("consumer %s left group %s", client_id, group)
            self._drop_if_empty(group)
            return True

    def on_channel_closed(self, channel: Any) -> set[str]:
        """Forget every consumer on a closed connection; returns the groups that lost a member."""
        removed = self._remove_where(lambda info: info.channel is channel)
        for group, info in removed:
            log.info("consumer %s of group %s disconnected", info.client_id, group)
        return {group for group, _ in removed}

    def scan_not_active_channels(self, now: int | None = None) -> ChannelScan:
        """Drop consumers silent for longer than the expiry (RocketMQ scans every 10 s)."""
        now = now_ms() if now is None else now
        scan = ChannelScan()
        for group, info in self._remove_where(lambda info: info.expired(now, self.channel_expired_ms)):
            log.warning(
                "consumer %s of group %s silent for %d ms: removed", info.client_id, group, now - info.last_update_ms
            )
            scan.changed_groups.add(group)
            scan.add_channel(info.channel)
        return scan

    def _remove_where(self, predicate: Callable[[ClientChannelInfo], bool]) -> list[tuple[str, ClientChannelInfo]]:
        with self._lock:
            removed = remove_clients(((g, info.channels) for g, info in self._groups.items()), predicate)
            for group in {group for group, _ in removed}:
                self._drop_if_empty(group)
        return removed

    def _drop_if_empty(self, group: str) -> None:
        group_info = self._groups.get(group)
        if group_info is not None and not group_info.channels:
            del self._groups[group]
            log.info("consumer group %s has no consumer online", group)

    # -- reads ----------------------------------------------------------------------------------

    def consumer_ids(self, group: str) -> list[str]:
        """The clientIds of the group's online consumers (GET_CONSUMER_LIST_BY_GROUP), sorted."""
        with self._lock:
            group_info = self._groups.get(group)
            return group_info.client_ids() if group_info else []

    def channels(self, group: str) -> list[Any]:
        """The connections of the group's consumers (where NOTIFY_CONSUMER_IDS_CHANGED goes)."""
        with self._lock:
            group_info = self._groups.get(group)
            return group_info.all_channels() if group_info else []

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        with self._lock:
            group_info = self._groups.get(group)
            return (
                dataclasses.replace(
                    group_info, channels=dict(group_info.channels), subscriptions=dict(group_info.subscriptions)
                )
                if group_info
                else None
            )

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        with self._lock:
            group_info = self._groups.get(group)
            return group_info.channels.get(client_id) if group_info else None

    def find_subscription_data(self, group: str, topic: str) -> SubscriptionData | None:
        with self._lock:
            group_info = self._groups.get(group)
            return group_info.subscriptions.get(topic) if group_info else None

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        """Groups with an online consumer subscribed to ``topic``."""
        with self._lock:
            return {g for g, info in self._groups.items() if topic in info.subscriptions}

    def groups(self) -> list[str]:
        with self._lock:
            return sorted(self._groups)
