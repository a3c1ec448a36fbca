"""The decoded headers of the broker requests that name a resource (a topic, a consumer group), one
decode per request, cached on it (``RemotingCommand.cached_header``, RocketMQ's cachedHeader).

The broker's ACL check (``rmq.broker.acl``) runs before the processor and reads what a request
touches from these; the processor then reads the same object. Two readers of raw extFields could
disagree on which field names the topic (SEND_MESSAGE_V2's ``b`` or the long ``topic``), and a
request could be checked against one topic and served on another; with one decode they cannot.

    code                              header                 its resources (read by the ACL)
    SEND_MESSAGE, _V2, SEND_BATCH     SendHeader             topic (send_header.py's field table)
    PULL_MESSAGE                      PullHeader             consumerGroup, topic
    QUERY_/UPDATE_CONSUMER_OFFSET     ConsumerOffsetHeader   consumerGroup, topic
    CONSUMER_SEND_MSG_BACK            SendBackHeader         group (and the found message's topic)
    QUERY_MESSAGE                     QueryMessageHeader     topic
    VIEW_MESSAGE_BY_ID                ViewMessageHeader      (the found message's topic)
    INVOKE_BROKER_TO_RESET_OFFSET     ResetOffsetHeader      group, topic
    UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP  ClientHeader  consumerGroup
    HEART_BEAT                        HeartbeatData (body)   each consumer's group and topics
    LOCK_BATCH_MQ, UNLOCK_BATCH_MQ    LockBatchRequest (body)  consumerGroup, each queue's topic
    POP_MESSAGE                       pop.PopRequest         consumerGroup, topic
    ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME  pop.AckRequest  consumerGroup, topic

A field that cannot be used is refused as ``rmq.protocol.fields`` refuses it (BadRequest naming
the field), whichever reader decodes first.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from rmq.protocol.codes import RequestCode
from rmq.protocol.fields import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    bool_field,
    int_field,
    malformed,
    str_field,
)
from rmq.protocol.heartbeat import HeartbeatData, parse_heartbeat
from rmq.protocol.message_queue import LockBatchRequest, parse_lock_batch_body
from rmq.protocol.pop import AckRequest, PopRequest
from rmq.protocol.request_flags import UNIQUE_MSG_QUERY_FLAG
from rmq.protocol.send_header import LONG_KEYS, SHORT_KEYS

H = TypeVar("H")


class RemotingCommand(Protocol):
    """What a decode reads of ``rmq.net``'s RemotingCommand (protocol is below net: no import)."""

    code: int
    ext_fields: dict[str, str]
    body: Any
    cached_header: object

    def ext_int(self, name: str, default: object = ...) -> int: ...


# What defaultTopicQueueNums is when a producer leaves it out (RocketMQ's producer default).
DEFAULT_TOPIC_QUEUE_NUMS = 4
# PULL_MESSAGE's maxMsgNums when absent (RocketMQ's maxTransferCountOnMessageInMemory).
DEFAULT_PULL_MAX_MSG_NUMS = 32
# QUERY_MESSAGE's maxNum when absent (RocketMQ's defaultQueryMaxNum).
DEFAULT_QUERY_MAX_NUM = 32

(
    _GROUP,
    _TOPIC,
    _DEFAULT_TOPIC,
    _DEFAULT_QUEUE_NUMS,
    _QUEUE_ID,
    _SYS_FLAG,
    _BORN_TIMESTAMP,
    _FLAG,
    _PROPERTIES,
    _RECONSUME_TIMES,
    _UNIT_MODE,
    _MAX_RECONSUME_TIMES,
    _BATCH,
) = range(len(LONG_KEYS))

# Plain ints for the send path: every use of an enum member is a class-attribute lookup.
_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)


def cached_on_request(decode: Callable[[RemotingCommand], H]) -> Callable[[RemotingCommand], H]:
    """``decode(request)`` once per request: later calls answer the header the first one cached."""

    @functools.wraps(decode)
    def header_of(request: RemotingCommand) -> H:
        header = request.cached_header
        if header is None:
            header = request.cached_header = decode(request)
        return cast(H, header)

    return header_of


# -- sends ---------------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class SendHeader:
    """A send's header. ``max_reconsume_times`` None: the client left it to the group's
    retryMaxTimes. ``keys`` is how the request spelled its fields (LONG_KEYS or SHORT_KEYS)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str
    reconsume_times: int
    max_reconsume_times: int | None
    batch: bool
    keys: tuple[str, ...]


@cached_on_request
def send_header(request: RemotingCommand) -> SendHeader:
    """SEND_MESSAGE's long names, SEND_MESSAGE_V2's and SEND_BATCH_MESSAGE's letters, or long names
    under a V2 code (some clients send them): whichever spelling names the topic names every field."""
    ext = request.ext_fields
    code = request.code
    keys = LONG_KEYS if code == _SEND_MESSAGE else SHORT_KEYS
    topic = ext.get(keys[_TOPIC])
    if topic is None and keys is SHORT_KEYS and "topic" in ext:
        keys = LONG_KEYS
        topic = ext.get("topic")
    if not topic:
        raise malformed(keys[_TOPIC], None, "a topic name")
    try:  # the common case in one go; the field-by-field path names what is wrong
        queue_id = request.ext_int(keys[_QUEUE_ID])
        sys_flag = request.ext_int(keys[_SYS_FLAG], 0)
        born_timestamp = request.ext_int(keys[_BORN_TIMESTAMP], 0)
        flag = request.ext_int(keys[_FLAG], 0)
        reconsume_times = request.ext_int(keys[_RECONSUME_TIMES], 0)
        queue_nums = request.ext_int(keys[_DEFAULT_QUEUE_NUMS], DEFAULT_TOPIC_QUEUE_NUMS)
        max_times: int | None = request.ext_int(keys[_MAX_RECONSUME_TIMES], None)
        if not (
            INT32_MIN <= queue_id <= INT32_MAX
            and INT32_MIN <= sys_flag <= INT32_MAX
            and INT32_MIN <= flag <= INT32_MAX
            and INT32_MIN <= reconsume_times <= INT32_MAX
            and INT32_MIN <= queue_nums <= INT32_MAX
            and (max_times is None or INT32_MIN <= max_times <= INT32_MAX)
            and INT64_MIN <= born_timestamp <= INT64_MAX
        ):
            raise ValueError("out of its Java type")  # the path below names the field
    except (KeyError, ValueError):
        queue_id = int_field(ext, keys[_QUEUE_ID])
        sys_flag = int_field(ext, keys[_SYS_FLAG], 0)
        born_timestamp = int_field(ext, keys[_BORN_TIMESTAMP], 0)
        flag = int_field(ext, keys[_FLAG], 0)
        reconsume_times = int_field(ext, keys[_RECONSUME_TIMES], 0)
        queue_nums = int_field(ext, keys[_DEFAULT_QUEUE_NUMS], DEFAULT_TOPIC_QUEUE_NUMS)
        max_times = int_field(ext, keys[_MAX_RECONSUME_TIMES], None)
    return SendHeader(
        ext.get(keys[_GROUP]) or "",
        topic,
        ext.get(keys[_DEFAULT_TOPIC]) or "",
        queue_nums,
        queue_id,
        sys_flag,
        born_timestamp,
        flag,
        ext.get(keys[_PROPERTIES]) or "",
        reconsume_times,
        max_times,
        code == _SEND_BATCH_MESSAGE or ext.get(keys[_BATCH]) == "true",
        keys,
    )


# -- consuming -----------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class PullHeader:
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    subscription: str | None
    expression_type: str | None


# PULL_MESSAGE's extFields, in PullHeader's order (the broker's compiled pull lane reads these names).
PULL_KEYS = (
    "consumerGroup",
    "topic",
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subscription",
    "expressionType",
)


@cached_on_request
def pull_header(request: RemotingCommand) -> PullHeader:
    ext = request.ext_fields
    group, topic, queue_id, queue_offset, max_msg_nums, sys_flag, commit_offset, suspend, subscription, expression = (
        PULL_KEYS
    )
    return PullHeader(
        str_field(ext, group),
        str_field(ext, topic),
        int_field(ext, queue_id),
        int_field(ext, queue_offset),
        int_field(ext, max_msg_nums, DEFAULT_PULL_MAX_MSG_NUMS),
        int_field(ext, sys_flag, 0),
        int_field(ext, commit_offset, -1),
        int_field(ext, suspend, 0),
        ext.get(subscription) or None,
        ext.get(expression) or None,
    )


@dataclasses.dataclass(slots=True)
class ConsumerOffsetHeader:
    """QUERY_CONSUMER_OFFSET's and UPDATE_CONSUMER_OFFSET's (``commit_offset``: the latter's only)."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int | None


@cached_on_request
def consumer_offset_header(request: RemotingCommand) -> ConsumerOffsetHeader:
    ext = request.ext_fields
    update = request.code == RequestCode.UPDATE_CONSUMER_OFFSET
    return ConsumerOffsetHeader(
        str_field(ext, "consumerGroup"),
        str_field(ext, "topic"),
        int_field(ext, "queueId"),
        int_field(ext, "commitOffset") if update else None,
    )


@dataclasses.dataclass(slots=True)
class SendBackHeader:
    """CONSUMER_SEND_MSG_BACK's: the message at CommitLog ``offset`` handed back by ``group``."""

    group: str
    offset: int
    delay_level: int
    max_reconsume_times: int | None


@cached_on_request
def send_back_header(request: RemotingCommand) -> SendBackHeader:
    ext = request.ext_fields
    return SendBackHeader(
        str_field(ext, "group"),
        int_field(ext, "offset"),
        int_field(ext, "delayLevel", 0),
        int_field(ext, "maxReconsumeTimes", None),
    )


@dataclasses.dataclass(slots=True)
class ClientHeader:
    """UNREGISTER_CLIENT's and GET_CONSUMER_LIST_BY_GROUP's; the groups are None when absent."""

    client_id: str
    producer_group: str | None
    consumer_group: str | None


@cached_on_request
def client_header(request: RemotingCommand) -> ClientHeader:
    ext = request.ext_fields
    return ClientHeader(ext.get("clientID", ""), ext.get("producerGroup") or None, ext.get("consumerGroup") or None)


@cached_on_request
def heartbeat(request: RemotingCommand) -> HeartbeatData:
    """HEART_BEAT's body, parsed once (it is the larger part of a heartbeat's cost)."""
    return parse_heartbeat(_body_bytes(request.body))


@cached_on_request
def lock_batch(request: RemotingCommand) -> LockBatchRequest:
    """LOCK_BATCH_MQ's and UNLOCK_BATCH_MQ's body."""
    return parse_lock_batch_body(_body_bytes(request.body))


@cached_on_request
def pop_header(request: RemotingCommand) -> PopRequest:
    return PopRequest.from_fields(request.ext_fields)


@cached_on_request
def ack_header(request: RemotingCommand) -> AckRequest:
    """ACK_MESSAGE's, or CHANGE_MESSAGE_INVISIBLETIME's (with its invisibleTime)."""
    change = request.code == RequestCode.CHANGE_MESSAGE_INVISIBLETIME
    return AckRequest.from_fields(request.ext_fields, change=change)


def _body_bytes(body: Any) -> bytes:
    # a request read off the wire has bytes; one built in this process may have a list of buffers
    return body if type(body) is bytes else b"".join(bytes(part) for part in body)


# -- messages and offsets, for tools -------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class QueryMessageHeader:
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int
    unique_key_query: bool


@cached_on_request
def query_message_header(request: RemotingCommand) -> QueryMessageHeader:
    ext = request.ext_fields
    return QueryMessageHeader(
        str_field(ext, "topic"),
        str_field(ext, "key"),
        int_field(ext, "maxNum", DEFAULT_QUERY_MAX_NUM),
        int_field(ext, "beginTimestamp", 0),
        int_field(ext, "endTimestamp", INT64_MAX),
        bool_field(ext, UNIQUE_MSG_QUERY_FLAG),
    )


@dataclasses.dataclass(slots=True)
class ViewMessageHeader:
    offset: int


@cached_on_request
def view_message_header(request: RemotingCommand) -> ViewMessageHeader:
    return ViewMessageHeader(int_field(request.ext_fields, "offset"))


@dataclasses.dataclass(slots=True)
class ResetOffsetHeader:
    """INVOKE_BROKER_TO_RESET_OFFSET's: ``timestamp`` ms, or -1 for the end of every queue."""

    topic: str
    group: str
    timestamp: int
    is_force: bool


@cached_on_request
def reset_offset_header(request: RemotingCommand) -> ResetOffsetHeader:
    ext = request.ext_fields
    return ResetOffsetHeader(
        str_field(ext, "topic"), str_field(ext, "group"), int_field(ext, "timestamp"), bool_field(ext, "isForce", True)
    )
