"""Client heartbeats and departures: HEART_BEAT (34), UNREGISTER_CLIENT (35), as RocketMQ's
ClientManageProcessor serves them. Membership changes are told to the group's consumers with
NOTIFY_CONSUMER_IDS_CHANGED (the controller's ``notify_consumer_ids_changed``).

A consumer's heartbeat creates its group's config (autoCreateSubscriptionGroup) and its retry topic
``%RETRY%<group>`` (retryQueueNums queues, 1 by default), which it subscribes to implicitly.
"""

from __future__ import annotations

from rmq.broker.processor.base import Processor, success
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode
from rmq.protocol.heartbeat import parse_heartbeat
from rmq.protocol.message import retry_topic
from rmq.protocol.perm import PERM_READ, PERM_WRITE


class ClientManageProcessor(Processor):
    def handlers(self):
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
        }

    def heart_beat(self, channel, request: RemotingCommand):
        controller = self.controller
        heartbeat = parse_heartbeat(body_bytes(request.body))
        for consumer in heartbeat.consumer_data_set:
            group_config = controller.subscription_group_manager.find_subscription_group_config(consumer.group_name)
            if group_config is not None:
                controller.topic_config_manager.create_topic_in_send_message_back(
                    retry_topic(consumer.group_name), group_config.retry_queue_nums, PERM_READ | PERM_WRITE
                )
        changed = controller.client_manager.register_heartbeat(heartbeat, channel, request.language, request.version)
        for group in changed:
            controller.notify_consumer_ids_changed(group)
        return success(request)

    def unregister_client(self, channel, request: RemotingCommand):
        ext = request.ext_fields
        changed = self.controller.client_manager.unregister_client(
            ext.get("clientID", ""), ext.get("producerGroup") or None, ext.get("consumerGroup") or None
        )
        for group in changed:
            self.controller.notify_consumer_ids_changed(group)
        return success(request)
