"""A popped message as a 5.x consumer receives it: RocketMQ's GrpcConverter#buildMessage, over the
stored record a POP_MESSAGE answer carries (rmq.protocol.record) and the receipt handle made of its
POP_CK (rmq.protocol.receipt_handle).

==========================  ===================================================================
SystemProperties            from
==========================  ===================================================================
tag, keys                   TAGS, KEYS (split on " ")
message_id                  UNIQ_KEY, else the broker msgId
body_digest                 MD5 of the body as delivered, upper-case hex (the Node client throws
                            on a message without one)
body_encoding               IDENTITY: a COMPRESSED body (zlib, lz4, zstd by sysFlag) is inflated
                            here, as neither 5.x client reads anything but IDENTITY and GZIP
message_type                TRAN_MSG=true TRANSACTION; DELAY / TIMER_DELIVER_MS / TIMER_DELAY_SEC
                            DELAY; __SHARDINGKEY FIFO; else NORMAL
born_timestamp, born_host   the record's (``__BORNHOST`` first)
store_timestamp, store_host the record's
delivery_timestamp          TIMER_DELAY_SEC after now, else TIMER_DELIVER_MS
message_group               __SHARDINGKEY
receipt_handle              POP_CK + " " + the record's CommitLog offset
invisible_duration          the handle's invisible time
queue_id, queue_offset      the record's
delivery_attempt            reconsume times + 1 (a FIFO pop's too: the broker counts them there)
trace_context               TRACE_CONTEXT
dead_letter_queue           DLQ_ORIGIN_TOPIC and DLQ_ORIGIN_MESSAGE_ID
==========================  ===================================================================

Every other property (not one of RocketMQ's system keys, SYSTEM_PROPERTY_KEYS) is a user property.
The topic is the one the consumer asked for, also for a message popped from the group's retry topic.
"""

from __future__ import annotations

import hashlib
import time

from google.protobuf import timestamp_pb2

from rmq.protocol.compression import decompress_body
from rmq.protocol.grpc.v2 import definition_pb2
from rmq.protocol.message import (
    BORN_HOST,
    DLQ_ORIGIN_MESSAGE_ID,
    DLQ_ORIGIN_TOPIC,
    KEY_SEPARATOR,
    SHARDING_KEY,
    SYSTEM_PROPERTY_KEYS,
    TRACE_CONTEXT,
    MessageProperty,
)
from rmq.protocol.receipt_handle import ReceiptHandle
from rmq.protocol.record import StoredMessage

_DELAY_KEYS = (MessageProperty.DELAY_TIME_LEVEL, MessageProperty.TIMER_DELIVER_MS, MessageProperty.TIMER_DELAY_SEC)


def _timestamp(ms: int) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def _message_type(properties: dict[str, str]) -> int:
    if properties.get(MessageProperty.TRANSACTION_PREPARED) == "true":
        return definition_pb2.TRANSACTION
    if any(key in properties for key in _DELAY_KEYS):
        return definition_pb2.DELAY
    if SHARDING_KEY in properties:
        return definition_pb2.FIFO
    return definition_pb2.NORMAL


def _delivery_timestamp(properties: dict[str, str]) -> int | None:
    try:
        if MessageProperty.TIMER_DELAY_SEC in properties:
            return int(time.time() * 1000) + int(properties[MessageProperty.TIMER_DELAY_SEC]) * 1000
        if MessageProperty.TIMER_DELIVER_MS in properties:
            return int(properties[MessageProperty.TIMER_DELIVER_MS])
    except ValueError:  # a 4.x producer may have set anything; the message is delivered without it
        return None
    return None


def build_message(record: StoredMessage, topic: str, handle: ReceiptHandle | None) -> definition_pb2.Message:
    """The 5.x Message for ``record``, popped from ``topic`` (or its retry topic); UndecodableBody
    when a COMPRESSED body cannot be inflated."""
    properties = record.properties
    body = decompress_body(record.body, record.sys_flag)
    system = definition_pb2.SystemProperties(
        message_id=properties.get(MessageProperty.UNIQ_KEY) or record.msg_id,
        body_digest=definition_pb2.Digest(type=definition_pb2.MD5, checksum=hashlib.md5(body).hexdigest().upper()),
        body_encoding=definition_pb2.IDENTITY,
        message_type=_message_type(properties),  # type: ignore[arg-type]
        born_timestamp=_timestamp(record.born_timestamp),
        born_host=properties.get(BORN_HOST) or "{}:{}".format(*record.born_host),
        store_timestamp=_timestamp(record.store_timestamp),
        store_host="{}:{}".format(*record.store_host),
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
        delivery_attempt=record.reconsume_times + 1,
    )
    tag = properties.get(MessageProperty.TAGS)
    if tag is not None:
        system.tag = tag
    keys = properties.get(MessageProperty.KEYS)
    if keys is not None:
        system.keys.extend(keys.split(KEY_SEPARATOR))
    delivery = _delivery_timestamp(properties)
    if delivery is not None:
        system.delivery_timestamp.CopyFrom(_timestamp(delivery))
    group = properties.get(SHARDING_KEY)
    if group is not None:
        system.message_group = group
    if handle is not None:
        system.receipt_handle = handle.encode()
        system.invisible_duration.FromMilliseconds(handle.extra_info.invisible_time)
    trace = properties.get(TRACE_CONTEXT)
    if trace is not None:
        system.trace_context = trace
    origin_topic, origin_id = properties.get(DLQ_ORIGIN_TOPIC), properties.get(DLQ_ORIGIN_MESSAGE_ID)
    if origin_topic is not None and origin_id is not None:
        system.dead_letter_queue.CopyFrom(definition_pb2.DeadLetterQueue(topic=origin_topic, message_id=origin_id))
    return definition_pb2.Message(
        topic=definition_pb2.Resource(name=topic),
        user_properties={k: v for k, v in properties.items() if k not in SYSTEM_PROPERTY_KEYS},
        system_properties=system,
        body=body,
    )
