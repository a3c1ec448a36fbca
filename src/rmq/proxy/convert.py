"""A 5.x ``Message`` as the remoting send of it (RocketMQ 5.x's SendMessageActivity.buildMessage), with
the proxy's checks of what it carries; and a stored message as a 5.x client receives it
(GrpcConverter.buildMessage: ``grpc_message``).

    system_properties        ->  properties (rmq.protocol.message.MessageProperty)
    tag                          TAGS (no '|', no control character, not blank: ILLEGAL_MESSAGE_TAG)
    keys                         KEYS, space-joined (ILLEGAL_MESSAGE_KEY)
    message_id                   UNIQ_KEY: the id the producer made is the message's id (ILLEGAL_MESSAGE_ID)
    message_type TRANSACTION     TRAN_MSG=true (and the sysFlag's prepared bits);
                                 orphaned_transaction_recovery_duration -> CHECK_IMMUNITY_TIME_IN_SECONDS
    delivery_timestamp           TIMER_DELIVER_MS (the broker's timed delivery; at most a day ahead:
                                 ILLEGAL_DELIVERY_TIME)
    delivery_attempt             RECONSUME_TIME
    message_group                __SHARDINGKEY (a FIFO message; at most 64 bytes: ILLEGAL_MESSAGE_GROUP)
    trace_context, born_host,    TRACE_CONTEXT, __BORNHOST (the client's address when it sends
    born_timestamp               none), BORN_TIMESTAMP
    (the producer group)         PGROUP = the topic: the proxy's producer group, which the broker's
                                 transaction checks look up
    user_properties          ->  as they are, unless a system key (ILLEGAL_MESSAGE_PROPERTY_KEY); at
                                 most 128 of them and 16 KiB with tag and keys (MESSAGE_PROPERTIES_TOO_LARGE)
    body                     ->  the body; empty is MESSAGE_BODY_EMPTY, past maxMessageSize
                                 MESSAGE_BODY_TOO_LARGE. body_encoding GZIP is inflated here (bounded
                                 by maxMessageSize too) and stored plain: a stored COMPRESSED body is
                                 zlib to every 4.x consumer, which a gzip stream is not.
"""

from __future__ import annotations

import hashlib
import logging
import time
import zlib

from google.protobuf.timestamp_pb2 import Timestamp

from rmq.protocol.compression import UndecodableBody, decompress_body
from rmq.protocol.grpc.v2.definition_pb2 import (
    Code,
    DeadLetterQueue,
    Digest,
    DigestType,
    Encoding,
    MessageType,
    Resource,
    SystemProperties,
)
from rmq.protocol.grpc.v2.definition_pb2 import Message as GrpcMessage
from rmq.protocol.message import MessageProperty
from rmq.protocol.receipt_handle import ReceiptHandle
from rmq.protocol.record import StoredMessage
from rmq.protocol.topic_attributes import TopicMessageType, message_type_of
from rmq.proxy.status import ProxyError

log = logging.getLogger("rmq.proxy")

# The proxy's limits (ProxyConfig): maxUserPropertySize, userPropertyMaxNum, maxMessageGroupSize,
# maxDelayTimeMills, maxTransactionRecoverySecond.
MAX_USER_PROPERTY_SIZE = 16 * 1024
MAX_USER_PROPERTIES = 128
MAX_MESSAGE_GROUP_SIZE = 64
MAX_DELAY_MS = 24 * 3600 * 1000
MAX_TRANSACTION_RECOVERY_SECONDS = 3600
KEY_SEPARATOR = " "
CHECK_IMMUNITY_TIME = MessageProperty.CHECK_IMMUNITY_TIME_IN_SECONDS
TRACE_CONTEXT = "TRACE_CONTEXT"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
BORN_HOST = "__BORNHOST"
# gzip's window bits for zlib: a gzip header and trailer
_GZIP_WBITS = 16 + zlib.MAX_WBITS

# Keys a user property may not take (RocketMQ's MessageConst.STRING_HASH_SET): the broker reads them.
SYSTEM_PROPERTY_KEYS = frozenset(
    {
        "1ST_POP_TIME", "ARRIVE_TIME", "BORN_TIMESTAMP", "BUYER_ID", "CLUSTER", "CONSUME_START_TIME",
        "CORRECTION_FLAG", "CORRELATION_ID", "DELAY", "DLQ_ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_TOPIC", "DUP_INFO",
        "EXTEND_UNIQ_INFO", "INNER_MULTI_QUEUE_OFFSET", "INSTANCE_ID", "KEYS", "MAX_OFFSET",
        "MAX_RECONSUME_TIMES", "MIN_OFFSET", "MQ2_FLAG", "MSG_REGION", "MSG_TYPE", "ORIGIN_MESSAGE_ID", "PGROUP",
        "POP_CK", "POP_CK_OFFSET", "PUSH_REPLY_TIME", "REAL_QID", "REAL_TOPIC", "RECONSUME_TIME",
        "REPLY_TO_CLIENT", "RETRY_TOPIC", "TAGS", "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS", "TIMER_DELAY_SEC",
        "TIMER_DELIVER_MS", "TIMER_DEL_UNIQKEY", "TIMER_DEQUEUE_MS", "TIMER_ENQUEUE_MS", "TIMER_OUT_MS",
        "TIMER_ROLL_TIMES", "TRACE_ON", "TRANSFER_FLAG", "TRAN_MSG", "TRAN_PREPARED_QUEUE_OFFSET", "TTL",
        "UNIQ_KEY", "WAIT", "__BORNHOST", "__CRC32#",
    }
)  # fmt: skip


# properties the proxy sets from system properties, not the user's to see again as their own
_NOT_USER_PROPERTIES = frozenset(
    {
        MessageProperty.SHARDING_KEY,
        TRACE_CONTEXT,
        CHECK_IMMUNITY_TIME,
        MessageProperty.TRANSACTION_CHECK_TIMES,
        MessageProperty.TRANSACTION_ID,
        MessageProperty.TRANSACTION_PREPARED_QUEUE_OFFSET,
    }
)


def has_control_character(text: str) -> bool:
    """Java's Character.isISOControl over ``text`` (GrpcValidator.containControlCharacter)."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


def check_tag(tag: str) -> None:
    if tag:
        if not tag.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if has_control_character(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def body_of(message: GrpcMessage, max_size: int) -> bytes:
    """The body to store: the proxy's size checks, a gzip body inflated (never past ``max_size``)."""
    body = message.body
    if not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(body) > max_size:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_size}")
    if message.system_properties.body_encoding != Encoding.GZIP:
        return body
    inflater = zlib.decompressobj(_GZIP_WBITS)
    try:
        plain = inflater.decompress(body, max_size + 1)
    except zlib.error as e:
        raise ProxyError(Code.MESSAGE_CORRUPTED, f"body_encoding GZIP, but the body is no gzip stream: {e}") from None
    if len(plain) > max_size or inflater.unconsumed_tail:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body inflated cannot exceed the max {max_size}")
    return plain


def properties_of(message: GrpcMessage, producer_group: str, remote_address: str) -> dict[str, str]:
    """The remoting properties of a 5.x message (SendMessageActivity.buildMessageProperty)."""
    system = message.system_properties
    user = message.user_properties
    if len(user) > MAX_USER_PROPERTIES:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {MAX_USER_PROPERTIES}")
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_KEYS:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if has_control_character(key) or has_control_character(value):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "a property cannot contain control character")
        size += len(key.encode()) + len(value.encode())
    properties = dict(user)
    check_tag(system.tag)
    if system.tag:
        properties[MessageProperty.TAGS] = system.tag
    size += len(system.tag.encode())
    for key in system.keys:
        if key and not key.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if has_control_character(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")
        size += len(key.encode())
    if system.keys:
        properties[MessageProperty.KEYS] = KEY_SEPARATOR.join(system.keys)
    if size > MAX_USER_PROPERTY_SIZE:
        raise ProxyError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {MAX_USER_PROPERTY_SIZE}",
        )
    if not system.message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    properties[MessageProperty.UNIQ_KEY] = system.message_id
    if system.message_type == MessageType.TRANSACTION:
        properties[MessageProperty.TRANSACTION_PREPARED] = "true"
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = system.orphaned_transaction_recovery_duration.seconds
            if seconds > MAX_TRANSACTION_RECOVERY_SECONDS:
                raise ProxyError(
                    Code.BAD_REQUEST,
                    "the max transaction recovery time of message is too large, "
                    f"max is {MAX_TRANSACTION_RECOVERY_SECONDS}",
                )
            properties[CHECK_IMMUNITY_TIME] = str(seconds)
    if system.HasField("delivery_timestamp"):
        deliver_ms = system.delivery_timestamp.ToMilliseconds()
        if deliver_ms - time.time() * 1000 > MAX_DELAY_MS:
            raise ProxyError(
                Code.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {MAX_DELAY_MS}"
            )
        properties[MessageProperty.TIMER_DELIVER_MS] = str(deliver_ms)
    properties[MessageProperty.RECONSUME_TIME] = str(system.delivery_attempt)
    properties[MessageProperty.PRODUCER_GROUP] = producer_group
    if system.message_group:
        group = system.message_group
        if not group.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        if len(group.encode()) >= MAX_MESSAGE_GROUP_SIZE:
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {MAX_MESSAGE_GROUP_SIZE}")
        if has_control_character(group):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")
        properties[MessageProperty.SHARDING_KEY] = group
    if system.trace_context:
        properties[TRACE_CONTEXT] = system.trace_context
    properties[BORN_HOST] = system.born_host.strip() or remote_address
    if system.HasField("born_timestamp"):
        properties[MessageProperty.BORN_TIMESTAMP] = str(system.born_timestamp.ToMilliseconds())
    return properties


# -- a stored message as a 5.x client receives it -------------------------------------------------------

_TYPES = {
    TopicMessageType.NORMAL: MessageType.NORMAL,
    TopicMessageType.FIFO: MessageType.FIFO,
    TopicMessageType.DELAY: MessageType.DELAY,
    TopicMessageType.TRANSACTION: MessageType.TRANSACTION,
}


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def stored_body(message: StoredMessage) -> bytes:
    """The body as its producer gave it: a COMPRESSED one inflated (zlib as 4.x clients write it,
    lz4 or zstd by the 5.x sysFlag bits; at most maxMessageSize), as the Node client reads nothing
    but plain and gzip; one that does not inflate is passed on as stored."""
    try:
        return decompress_body(message.body, message.sys_flag)
    except UndecodableBody as e:
        log.warning("message %s: %s; passed on as stored", message.msg_id, e)
    return message.body


def grpc_message(message: StoredMessage, topic: str | None = None, handle: ReceiptHandle | None = None) -> GrpcMessage:
    """A stored record as a 5.x ``Message`` (GrpcConverter.buildMessage): system properties from
    the record and its properties, the other properties as user properties, an MD5 body digest
    (upper-case hex, as the Node and Python clients both accept). A popped one (rmq.proxy.consumer)
    carries its receipt handle and invisible duration, and the topic it was asked for, also when it
    was popped from the group's retry topic."""
    props = message.properties
    body = stored_body(message)
    system = SystemProperties(
        message_id=props.get(MessageProperty.UNIQ_KEY) or message.msg_id,
        body_digest=Digest(type=DigestType.MD5, checksum=hashlib.md5(body).hexdigest().upper()),
        body_encoding=Encoding.IDENTITY,
        message_type=_TYPES.get(message_type_of(props), MessageType.NORMAL),
        born_timestamp=_timestamp(message.born_timestamp),
        born_host=props.get(BORN_HOST) or message.born_host[0],
        store_timestamp=_timestamp(message.store_timestamp),
        store_host=f"{message.store_host[0]}:{message.store_host[1]}",
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        delivery_attempt=message.reconsume_times + 1,
    )
    if message.tags:
        system.tag = message.tags
    if message.keys:
        system.keys.extend(message.keys)
    group = props.get(MessageProperty.SHARDING_KEY)
    if group:
        system.message_group = group
    trace = props.get(TRACE_CONTEXT)
    if trace:
        system.trace_context = trace
    delay_sec = props.get(MessageProperty.TIMER_DELAY_SEC)
    deliver_ms = props.get(MessageProperty.TIMER_DELIVER_MS)
    if delay_sec and delay_sec.isdigit():  # GrpcConverter: counted from now
        system.delivery_timestamp.CopyFrom(_timestamp(int(time.time() * 1000) + int(delay_sec) * 1000))
    elif deliver_ms and deliver_ms.isdigit():
        system.delivery_timestamp.CopyFrom(_timestamp(int(deliver_ms)))
    origin_topic, origin_id = props.get(DLQ_ORIGIN_TOPIC), props.get(DLQ_ORIGIN_MESSAGE_ID)
    if origin_topic is not None and origin_id is not None:
        system.dead_letter_queue.CopyFrom(DeadLetterQueue(topic=origin_topic, message_id=origin_id))
    if handle is not None:
        system.receipt_handle = handle.encode()
        system.invisible_duration.FromMilliseconds(handle.extra_info.invisible_time)
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_KEYS and k not in _NOT_USER_PROPERTIES}
    return GrpcMessage(
        topic=Resource(name=topic or message.topic), user_properties=user, system_properties=system, body=body
    )
