"""QUERY_MESSAGE (12): messages by key through the IndexFile; VIEW_MESSAGE_BY_ID (33): one message
by CommitLog offset (the offset a broker msgId carries). Both answer with whole stored records,
back to back, as a pull does; clients decode them themselves.
"""

from __future__ import annotations

from typing import Any

from rmq.broker.processor.base import Handler, Processor, success
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import bool_field, int_field, str_field

# RocketMQ's maxMsgsNumBatch: no query returns more, whatever maxNum asks.
QUERY_MAX_NUM_LIMIT = 64
# defaultQueryMaxNum: what a query by client msgId (UNIQ_KEY) returns at most.
DEFAULT_QUERY_MAX_NUM = 32
# ext field a client sets when the key is a client msgId (MixAll.UNIQUE_MSG_QUERY_FLAG)
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
INT64_MAX = 2**63 - 1


class QueryMessageProcessor(Processor):
    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.QUERY_MESSAGE: self.query_message, RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id}

    def query_message(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """{topic, key, maxNum, beginTimestamp, endTimestamp} -> the matching records, newest first;
        QUERY_NOT_FOUND when none. The index's hash collisions are weeded out by the store."""
        ext = request.ext_fields
        max_num = int_field(ext, "maxNum", DEFAULT_QUERY_MAX_NUM)
        if bool_field(ext, UNIQUE_MSG_QUERY_FLAG):
            max_num = DEFAULT_QUERY_MAX_NUM
        result = self.controller.store.query_message(
            str_field(ext, "topic"),
            str_field(ext, "key"),
            max(1, min(max_num, QUERY_MAX_NUM_LIMIT)),
            int_field(ext, "beginTimestamp", 0),
            int_field(ext, "endTimestamp", INT64_MAX),
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
        offset = int_field(request.ext_fields, "offset")
        record = self.controller.store.look_message_by_offset(offset) if offset >= 0 else None
        if record is None:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"can not find message by the offset, {offset}: no stored record starts there",
            )
        return success(request, body=record)
