"""QUERY_MESSAGE (12): messages by key through the IndexFile; VIEW_MESSAGE_BY_ID (33): one message
by CommitLog offset (the offset a broker msgId carries). Both answer with whole stored records,
back to back, as a pull does; clients decode them themselves.

Under aclEnable, as RocketMQ 5.x's ACL 2.0 scopes them: a query needs SUB on its topic (checked
before, ``rmq.broker.acl``) and answers only that topic's messages; a view needs SUB on the topic
of the message it finds, checked before any of it is answered.
"""

from __future__ import annotations

from typing import Any

from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.services import QueryServices
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers import DEFAULT_QUERY_MAX_NUM, query_message_header, view_message_header
from rmq.protocol.record import decode_record

# RocketMQ's maxMsgsNumBatch: no query returns more, whatever maxNum asks.
QUERY_MAX_NUM_LIMIT = 64


class QueryMessageProcessor(Processor[QueryServices]):
    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.QUERY_MESSAGE: self.query_message, RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id}

    def query_message(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """{topic, key, maxNum, beginTimestamp, endTimestamp} -> the matching records, newest first;
        QUERY_NOT_FOUND when none. The index's hash collisions are weeded out by the store."""
        header = query_message_header(request)  # the one the ACL check read
        max_num = DEFAULT_QUERY_MAX_NUM if header.unique_key_query else header.max_num
        # the store answers only messages of this topic: a key of another topic is not leaked
        result = self.controller.store.query_message(
            header.topic,
            header.key,
            max(1, min(max_num, QUERY_MAX_NUM_LIMIT)),
            header.begin_timestamp,
            header.end_timestamp,
        )
        index = {
            "indexLastUpdateTimestamp": str(result.index_last_update_timestamp),
            "indexLastUpdatePhyoffset": str(result.index_last_update_phy_offset),
        }
        if not result.messages:
            return RemotingCommand.response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                ext_fields=index,
                remark="can not find message, maybe time range not correct",
            )
        return success(request, index, list(result.messages))

    def view_message_by_id(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """{offset} (a CommitLog offset) -> the record stored there."""
        offset = view_message_header(request).offset
        record = self.controller.store.look_message_by_offset(offset) if offset >= 0 else None
        if record is None:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"can not find message by the offset, {offset}: no stored record starts there",
            )
        acl = self.controller.acl
        if acl is not None:
            acl.require_sub(channel, request, decode_record(record, check_crc=False).topic)
        return success(request, body=record)
