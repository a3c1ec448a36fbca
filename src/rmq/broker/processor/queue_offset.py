"""Where a queue starts and ends, and where a time falls in it: SEARCH_OFFSET_BY_TIMESTAMP (29),
GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32). Reply ext ``offset`` (or
``timestamp``), as RocketMQ's AdminBrokerProcessor answers them; an unknown queue answers 0.
"""

from __future__ import annotations

from rmq.broker.processor.base import Processor, success
from rmq.broker.services import QueueOffsetServices
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode
from rmq.protocol.fields import int_field, str_field


class QueueOffsetProcessor(Processor[QueueOffsetServices]):
    def handlers(self):
        return {
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
        }

    @staticmethod
    def _queue(request: RemotingCommand) -> tuple[str, int]:
        ext = request.ext_fields
        return str_field(ext, "topic"), int_field(ext, "queueId")

    def search_offset_by_timestamp(self, channel, request: RemotingCommand):
        topic, queue_id = self._queue(request)
        timestamp = int_field(request.ext_fields, "timestamp")
        offset = self.controller.store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
        return success(request, {"offset": str(offset)})

    def get_max_offset(self, channel, request: RemotingCommand):
        topic, queue_id = self._queue(request)
        return success(request, {"offset": str(self.controller.store.get_max_offset_in_queue(topic, queue_id))})

    def get_min_offset(self, channel, request: RemotingCommand):
        topic, queue_id = self._queue(request)
        return success(request, {"offset": str(self.controller.store.get_min_offset_in_queue(topic, queue_id))})

    def get_earliest_msg_storetime(self, channel, request: RemotingCommand):
        topic, queue_id = self._queue(request)
        timestamp = self.controller.store.get_earliest_message_time(topic, queue_id)
        return success(request, {"timestamp": str(timestamp)})
