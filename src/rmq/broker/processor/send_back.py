"""CONSUMER_SEND_MSG_BACK (36): a consumer could not consume a message and hands it back.

The message (found by its CommitLog offset) is stored again for the group, as RocketMQ's
SendMessageProcessor does:

    reconsumeTimes < max and delayLevel >= 0
        -> %RETRY%<group> (retryQueueNums queues), through SCHEDULE_TOPIC_XXXX at level
           delayLevel, or 3 + reconsumeTimes when the client left it 0 (10 s, 30 s, 1 m, ...)
    reconsumeTimes >= max, or delayLevel < 0
        -> %DLQ%<group> (1 queue), at once

max is the request's maxReconsumeTimes, else the group's retryMaxTimes (16). The copy carries
reconsumeTimes + 1, RETRY_TOPIC (the topic it was first sent to) and ORIGIN_MESSAGE_ID (the msgId
of the first copy), so consumers see the original topic and id again.

Under aclEnable (RocketMQ 5.x's ACL 2.0): SUB on the group, checked before (``rmq.broker.acl``), and
SUB on the message's original topic (its RETRY_TOPIC, else its topic), checked once it is found.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from rmq.broker.processor.base import (
    Handler,
    Processor,
    require_writeable_broker,
    success,
)
from rmq.broker.processor.send import DLQ_NUMS_PER_GROUP
from rmq.broker.services import SendBackServices
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers import send_back_header
from rmq.protocol.message import MessageProperty, dlq_topic, retry_topic
from rmq.protocol.perm import PERM_READ, PERM_WRITE, is_writeable
from rmq.protocol.record import decode_record

log = logging.getLogger("rmq.broker")

# The level a first retry waits at when the client asks for "the broker's choice" (delayLevel 0):
# level 3 + reconsumeTimes, so 10 s, 30 s, 1 m, 2 m, ... as retries accumulate.
RETRY_BASE_DELAY_LEVEL = 3


class SendBackProcessor(Processor[SendBackServices]):
    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.consumer_send_msg_back}

    def consumer_send_msg_back(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        c = self.controller
        busy = c.send_processor.busy_answer(channel, request)
        if busy is not None:
            return busy
        header = send_back_header(request)  # the one the ACL check read
        group, offset, delay_level = header.group, header.offset, header.delay_level
        group_config = c.subscription_group_manager.find_subscription_group_config(group)
        if group_config is None:
            raise RequestRefused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group {group!r} does not exist on this broker"
            )
        require_writeable_broker(c)
        if group_config.retry_queue_nums <= 0:
            # RocketMQ: a group without retry queues drops what its consumers hand back
            return success(request)

        record = c.store.look_message_by_offset(offset) if offset >= 0 else None
        if record is None:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}: no stored message starts there"
            )
        message = decode_record(record, check_crc=False)
        if c.acl is not None:
            # ACL 2.0 scoping: handing a message back reads it again, as its group, from its topic
            origin = message.properties.get(MessageProperty.RETRY_TOPIC) or message.topic
            c.acl.require_sub(channel, request, origin)

        properties = dict(message.properties)
        properties.setdefault(MessageProperty.RETRY_TOPIC, message.topic)
        properties.setdefault(MessageProperty.ORIGIN_MESSAGE_ID, message.msg_id)
        properties.pop(MessageProperty.WAIT_STORE_MSG_OK, None)
        max_reconsume_times = header.max_reconsume_times
        if max_reconsume_times is None:
            max_reconsume_times = group_config.retry_max_times

        if message.reconsume_times >= max_reconsume_times or delay_level < 0:
            topic = dlq_topic(group)
            c.topic_config_manager.create_topic_in_send_message_back(topic, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
            queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            properties.pop(MessageProperty.DELAY_TIME_LEVEL, None)
            log.info(
                "message %s of group %s goes to %s after %d deliveries",
                properties[MessageProperty.ORIGIN_MESSAGE_ID],
                group,
                topic,
                message.reconsume_times + 1,
            )
        else:
            topic = retry_topic(group)
            config = c.topic_config_manager.create_topic_in_send_message_back(
                topic, group_config.retry_queue_nums, PERM_READ | PERM_WRITE
            )
            if not is_writeable(config.perm):
                raise RequestRefused(ResponseCode.NO_PERMISSION, f"topic {topic!r} does not accept writes")
            queue_id = random.randrange(group_config.retry_queue_nums)
            if delay_level == 0:
                delay_level = RETRY_BASE_DELAY_LEVEL + message.reconsume_times
            properties[MessageProperty.DELAY_TIME_LEVEL] = str(delay_level)

        # a DELAY makes put_inner store it in SCHEDULE_TOPIC_XXXX first
        result = c.put_again(message, topic, queue_id, properties, reconsume_times=message.reconsume_times + 1)
        if not result.ok:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR, f"storing the message in {topic} failed: {result.status.name}"
            )
        return success(request)
