"""Consumer offsets and group membership: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
GET_CONSUMER_LIST_BY_GROUP (38), as RocketMQ's ConsumerManageProcessor serves them.

QUERY_CONSUMER_OFFSET's rule for a group that never committed (docs/protocol.md): while the queue
still holds offset 0 (its min offset is 0), answer SUCCESS with "0" rather than QUERY_NOT_FOUND, or
clients that start "from the last offset" would skip everything sent before they started.
"""

from __future__ import annotations

import orjson

from rmq.broker.processor.base import Processor, success
from rmq.broker.services import ConsumerManageServices
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import malformed
from rmq.protocol.headers import client_header, consumer_offset_header


class ConsumerManageProcessor(Processor[ConsumerManageServices]):
    def handlers(self):
        return {
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
        }

    def query_consumer_offset(self, channel, request: RemotingCommand):
        header = consumer_offset_header(request)
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        offset = self.controller.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return success(request, {"offset": str(offset)})
        if self.controller.store.get_min_offset_in_queue(topic, queue_id) <= 0:
            return success(request, {"offset": "0"})
        return RemotingCommand.response_to(
            request,
            ResponseCode.QUERY_NOT_FOUND,
            remark=f"group {group!r} has no committed offset on {topic}/{queue_id}, and the queue no longer "
            "starts at 0: start from the min or max offset",
        )

    def update_consumer_offset(self, channel, request: RemotingCommand):
        header = consumer_offset_header(request)
        group, topic, queue_id, offset = header.consumer_group, header.topic, header.queue_id, header.commit_offset
        assert offset is not None, "UPDATE_CONSUMER_OFFSET's header has commitOffset"
        if queue_id < 0:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"cannot commit on queue {queue_id}: must be >= 0")
        if offset < 0:
            # ali-ons commits -1 for every assigned queue it has not consumed from yet. RocketMQ stores
            # it, and -1 reads back as "no offset"; keeping what is stored means the same to clients
            # and cannot clobber a real offset.
            return success(request)
        self.controller.consumer_offset_manager.commit_offset(group, topic, queue_id, offset, channel.remote_address)
        return success(request)

    def get_consumer_list_by_group(self, channel, request: RemotingCommand):
        group = client_header(request).consumer_group
        if group is None:
            raise malformed("consumerGroup", None, "a value")
        ids = self.controller.client_manager.consumers.consumer_ids(group)
        if not ids:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, remark=f"no consumer of group {group!r} is online"
            )
        return success(request, body=orjson.dumps({"consumerIdList": ids}))
