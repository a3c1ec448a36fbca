"""UPDATE_AND_CREATE_TOPIC (17): create or change a topic, then register with every name server at
once so the route is visible without waiting for the 30 s tick (docs/protocol.md#topics).

Fields: topic, readQueueNums, writeQueueNums, perm, topicFilterType, topicSysFlag, order. An illegal
name or setting, or a system topic, is refused with MESSAGE_ILLEGAL and the reason.
"""

from __future__ import annotations

from rmq.broker.processor.base import Processor, success
from rmq.broker.services import TopicServices
from rmq.broker.topic_config import DEFAULT_QUEUE_NUMS, SINGLE_TAG, TopicConfig
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode
from rmq.protocol.fields import bool_field, int_field, str_field
from rmq.protocol.perm import PERM_READ, PERM_WRITE


class TopicProcessor(Processor[TopicServices]):
    def handlers(self):
        return {RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic}

    def update_and_create_topic(self, channel, request: RemotingCommand):
        ext = request.ext_fields
        config = TopicConfig(
            topic_name=str_field(ext, "topic"),
            read_queue_nums=int_field(ext, "readQueueNums", DEFAULT_QUEUE_NUMS),
            write_queue_nums=int_field(ext, "writeQueueNums", DEFAULT_QUEUE_NUMS),
            perm=int_field(ext, "perm", PERM_READ | PERM_WRITE),
            topic_filter_type=str_field(ext, "topicFilterType", SINGLE_TAG),
            topic_sys_flag=int_field(ext, "topicSysFlag", 0),
            order=bool_field(ext, "order", False),
        )
        # update_topic_config persists and calls the controller's on_change, which registers with
        # every name server at once; answer once they took it, so the route is there when the
        # creator asks for it (RocketMQ waits the same way).
        self.controller.topic_config_manager.update_topic_config(config)
        pending = [f for f in self.controller.last_registration if not f.done()]
        if not pending:
            return success(request)
        remaining = [len(pending)]

        def registered(_future) -> None:
            remaining[0] -= 1
            if remaining[0] == 0:
                channel.send_response(success(request))

        for future in pending:
            future.add_done_callback(registered)
        return None
