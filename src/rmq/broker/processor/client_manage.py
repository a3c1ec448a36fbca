"""Client heartbeats and departures: HEART_BEAT (34), UNREGISTER_CLIENT (35), and CHECK_CLIENT_CONFIG
(46), as RocketMQ's ClientManageProcessor serves them. Membership changes are told to the group's consumers with
NOTIFY_CONSUMER_IDS_CHANGED (the controller's ``notify_consumer_ids_changed``).

A consumer's heartbeat creates its group's config (autoCreateSubscriptionGroup) and its retry topic
``%RETRY%<group>`` (retryQueueNums queues, 1 by default), which it subscribes to implicitly.

CHECK_CLIENT_CONFIG's body is ``{"clientId", "group", "subscriptionData": {...}}``; a Java consumer
with an SQL92 subscription sends it to every broker before it starts, and does not start unless
each answers SUCCESS. A TAG subscription always passes; SQL92 without enablePropertyFilter is
SYSTEM_ERROR, an expression that does not parse SUBSCRIPTION_PARSE_FAILED (the remark names where).
The expression is compiled off the event loop, into the cache pulls use (``rmq.broker.subscription_filter``),
and the answer goes out when it is; a heartbeat body over HEARTBEAT_INLINE_BYTES is parsed there too.
"""

from __future__ import annotations

import json
from functools import partial

from rmq.broker.processor.base import Processor, success
from rmq.broker.services import ClientManageServices
from rmq.broker.subscription_filter import NOT_BUILT, Built, Key
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol import headers
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.heartbeat import HeartbeatData
from rmq.protocol.message import retry_topic
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.subscription import ExpressionType

# A heartbeat body bigger than this is parsed off the loop (its tags are hashed one by one: a 1 MB
# body takes ~0.25 s); a usual one, a few KB, is parsed where it is read.
HEARTBEAT_INLINE_BYTES = 64 * 1024


class ClientManageProcessor(Processor[ClientManageServices]):
    def handlers(self):
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    def heart_beat(
        self,
        channel,
        request: RemotingCommand,
        parsed: tuple[HeartbeatData | None, Exception | None] | None = None,
    ):
        """``parsed``: the body parsed off the loop (a big one), when that hands the request back."""
        controller = self.controller
        if parsed is None:
            body_size = len(body_bytes(request.body))
            if body_size <= HEARTBEAT_INLINE_BYTES or request.cached_header is not None:
                heartbeat = headers.heartbeat(request)  # parsed once, the ACL check's too
            else:
                controller.subscription_filters.run_later(
                    body_size,
                    partial(headers.heartbeat, request),
                    lambda result, error: controller.server.answer_later(
                        channel, request, partial(self.heart_beat, parsed=(result, error))
                    ),
                )
                return None
        else:
            result, error = parsed
            if error is not None:
                raise error
            assert result is not None
            heartbeat = result
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
        header = headers.client_header(request)
        changed = self.controller.client_manager.unregister_client(
            header.client_id, header.producer_group, header.consumer_group
        )
        for group in changed:
            self.controller.notify_consumer_ids_changed(group)
        return success(request)

    def check_client_config(self, channel, request: RemotingCommand, built: tuple[Key, Built] | None = None):
        """``built``: the subscription's filter, when its compile hands the request back."""
        try:
            body = json.loads(body_bytes(request.body) or b"{}")
        except (ValueError, UnicodeDecodeError) as e:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"CHECK_CLIENT_CONFIG body is not JSON ({e})") from None
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        if not isinstance(sub, dict):
            return success(request)
        expression_type = str(sub.get("expressionType") or ExpressionType.TAG).strip().upper()
        if expression_type == ExpressionType.TAG:
            return success(request)
        if not self.controller.config.enable_property_filter:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {expression_type} "
                "(set enablePropertyFilter=true)",
            )
        found = self.controller.subscription_filters.find(
            str(sub.get("topic") or ""),
            str(sub.get("subString") or ""),
            expression_type,
            built,
            lambda built: self.controller.server.answer_later(
                channel, request, partial(self.check_client_config, built=built)
            ),
        )
        return None if found is NOT_BUILT else success(request)
