"""UPDATE_AND_CREATE_TOPIC (17): create or change a topic, then register with every name server at
once so the route is visible without waiting for the 30 s tick (docs/protocol.md#topics).
GET_TOPIC_CONFIG (351, RocketMQ 5.x's): one topic's config, its attributes included.

Fields: topic, readQueueNums, writeQueueNums, perm, topicFilterType, topicSysFlag, order, and 5.x's
attributes ("+message.type=FIFO", rmq.protocol.topic_attributes: applied to the topic's current
ones). An illegal name, setting or attribute, or a system topic, is refused with MESSAGE_ILLEGAL and
the reason. GET_TOPIC_CONFIG {topic} answers the config's JSON (topics.json's object of the topic),
or TOPIC_NOT_EXIST.
"""

from __future__ import annotations

import orjson

from rmq.broker.processor.base import Processor, answer_once_registered, success
from rmq.broker.services import TopicServices
from rmq.broker.topic_config import DEFAULT_QUEUE_NUMS, SINGLE_TAG, TopicConfig
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import bool_field, int_field, str_field
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.topic_attributes import parse_attribute_changes


class TopicProcessor(Processor[TopicServices]):
    def handlers(self):
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
        }

    def get_topic_config(self, channel, request: RemotingCommand):
        topic = str_field(request.ext_fields, "topic")
        config = self.controller.topic_config_manager.select_topic_config(topic)
        if config is None:
            raise RequestRefused(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist on this broker")
        return success(request, body=orjson.dumps(config.to_json()))

    def update_and_create_topic(self, channel, request: RemotingCommand):
        ext = request.ext_fields
        topic = str_field(ext, "topic")
        existing = self.controller.topic_config_manager.select_topic_config(topic)
        attributes = dict(existing.attributes) if existing is not None else {}
        try:
            added, deleted = parse_attribute_changes(ext.get("attributes") or "")
        except ValueError as e:
            raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, str(e)) from None
        attributes.update(added)
        for key in deleted:
            attributes.pop(key, None)
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=int_field(ext, "readQueueNums", DEFAULT_QUEUE_NUMS),
            write_queue_nums=int_field(ext, "writeQueueNums", DEFAULT_QUEUE_NUMS),
            perm=int_field(ext, "perm", PERM_READ | PERM_WRITE),
            topic_filter_type=str_field(ext, "topicFilterType", SINGLE_TAG),
            topic_sys_flag=int_field(ext, "topicSysFlag", 0),
            order=bool_field(ext, "order", False),
            attributes=attributes,
        )
        # update_topic_config persists and calls the controller's on_change, which registers with
        # every name server at once; answer once they took it, so the route is there when the
        # creator asks for it (RocketMQ waits the same way).
        self.controller.topic_config_manager.update_topic_config(config)
        return answer_once_registered(channel, success(request), self.controller.last_registration)
