"""Message constants shared by store, broker and clients: property keys, sysFlag bits, system
topics, name rules and size limits.

Stored properties are ``key\\x01value\\x02`` repeated (docs/store-format.md#properties). The compiled store scans
them in C on the hot path (its ``.pxd`` repeats the few keys and limits it needs, and a test checks
they agree); this module is the single definition of the keys and limits and the pure-Python
encode/decode everyone else uses.
"""

from __future__ import annotations

import re

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "


class MessageProperty:
    """Property keys RocketMQ 4.x clients and brokers put in a message's properties."""

    TAGS = "TAGS"
    KEYS = "KEYS"
    UNIQ_KEY = "UNIQ_KEY"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    # on the copy of a half message kept back for its CHECK_IMMUNITY time: the original's queue offset
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    # the transaction id (the half message's UNIQ_KEY): Java's producer puts it on the message it hands
    # its local transaction; rmq's broker on its op records, to know the ended transactions at restart
    TRANSACTION_ID = "__transactionId__"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    BUYER_ID = "BUYER_ID"
    # RocketMQ 5.x timed delivery: what a producer sets (one of the three) ...
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"  # epoch ms to deliver at
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"  # seconds after the broker receives it
    TIMER_DELAY_MS = "TIMER_DELAY_MS"  # ms after the broker receives it
    # ... and what the broker adds: the due time (epoch ms) while it waits in rmq_sys_wheel_timer,
    # then, on the delivered message, when it was stored there and when it was taken out.
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    # RocketMQ 5.x: a FIFO message's group (a 5.x client's message_group), what makes it FIFO
    SHARDING_KEY = "__SHARDINGKEY"
    # a message moved between clusters by a replicator: its type is not checked against its topic's
    TRANSFER_FLAG = "TRANSFER_FLAG"
    # when a 5.x client made the message (epoch ms); 4.x clients carry it in the send header only
    BORN_TIMESTAMP = "BORN_TIMESTAMP"


# The common prefix of TIMER_DELIVER_MS, TIMER_DELAY_SEC and TIMER_DELAY_MS: one cheap test on a send's
# hot path (the broker's processor and its compiled lane), the timer store decides the rest.
TIMER_PROPERTY_MARK = "TIMER_DEL"


class MessageSysFlag:
    """Bits of a stored record's SYSFLAG field."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    TRANSACTION_MASK = 0xC
    # bits 4-5 mark IPv6 born/store hosts; rmq never sets them (clients assume IPv4)
    BORNHOST_V6 = 0x10
    STOREHOSTADDRESS_V6 = 0x20
    # RocketMQ 5.x: with COMPRESSED, bits 8-10 say how (CompressionType); 0 is zlib, as 4.x
    # clients (which know only zlib and never set these bits) compress
    COMPRESSION_TYPE_SHIFT = 8
    COMPRESSION_TYPE_MASK = 0x7 << 8


class CompressionType:
    """RocketMQ 5.x's CompressionType values, as sysFlag bits 8-10 carry them."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3
    NAMES = {"lz4": LZ4, "zstd": ZSTD, "zlib": ZLIB}

    @staticmethod
    def of_sys_flag(sys_flag: int) -> int:
        """The type of a COMPRESSED body: ZLIB when the bits are 0 (RocketMQ 4.x clients), else
        the bits' value, which may be one no codec has (5.x reserves 4-7)."""
        value = (sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK) >> MessageSysFlag.COMPRESSION_TYPE_SHIFT
        return value or CompressionType.ZLIB


# Topic names: at most 127 bytes of [A-Za-z0-9_%|-] (the retry/DLQ prefixes use % ); a stored
# record keeps the topic behind an int8 length. The pattern must cover the whole name (fullmatch,
# as Java's matches()): re's ``$`` also matches before a trailing newline, which let "Trail\n" in.
TOPIC_MAX_LENGTH = 127
VALID_NAME_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")
# Properties are stored behind an int16 length.
PROPERTIES_MAX_LENGTH = 32767
# Group names follow the topic rules but may be 255 long.
GROUP_MAX_LENGTH = 255
# The largest body a broker stores by default (maxMessageSize); producers refuse bigger ones first.
MAX_MESSAGE_SIZE = 4 * 1024 * 1024

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
# Where a half message goes once it has been checked transactionCheckMax times.
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
# Topics the broker makes for itself (POP's revive logs, the timer's) start with this.
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
# Where a timed message (TIMER_* properties) waits for its time, queue 0 (RocketMQ 5.x's TIMER_TOPIC).
TIMER_TOPIC = SYSTEM_TOPIC_PREFIX + "wheel_timer"
# Topics only the broker writes to (RocketMQ's TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, TIMER_TOPIC}
)


# Topics a broker makes at start besides those (RocketMQ's TopicConfigManager): the self test's, the
# benchmark's, offset-moved events, and <cluster>_REPLY_TOPIC for request-reply
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
# The prefix of RocketMQ's own topics besides rmq_sys_ (message traces, transactions)
RMQ_SYS_TOPIC_PREFIX = "RMQ_SYS_"
SYSTEM_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX, SYSTEM_TOPIC_PREFIX, RMQ_SYS_TOPIC_PREFIX)
# Topics RocketMQ's TopicValidator counts as the system's besides the prefixed ones
OTHER_SYSTEM_TOPICS = frozenset({AUTO_CREATE_TOPIC_KEY_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, BENCHMARK_TOPIC})

# Groups RocketMQ's tools and internal services use (MixAll's); they exist on every broker.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
# Groups with this prefix are the broker's own (transactions): always auto-created.
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
)


def is_system_topic(topic: str) -> bool:
    """A topic of the broker's own or of a group's (retries, dead letters), which a topic list
    hides unless asked (rocketmq-dashboard's "system topics" toggle). A cluster's and a broker's
    own topics (named after them) are system topics too, which only the name server's tables tell."""
    return (
        topic in NOT_ALLOWED_SEND_TOPICS
        or topic in OTHER_SYSTEM_TOPICS
        or topic.endswith("_" + REPLY_TOPIC_POSTFIX)
        or topic.startswith(SYSTEM_TOPIC_PREFIXES)
    )


def is_system_group(group: str) -> bool:
    """A group of RocketMQ's tools and services, or the broker's own (rocketmq-dashboard hides them
    unless asked)."""
    return group in SYSTEM_GROUPS or group.startswith(CID_RMQ_SYS_PREFIX)


def retry_topic(group: str) -> str:
    """The topic a consumer group's failed messages are re-delivered from: ``%RETRY%<group>``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """The dead-letter topic of a consumer group: ``%DLQ%<group>``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def topic_error(topic: str) -> str | None:
    """Why ``topic`` is not a legal topic name, or None when it is."""
    if not topic:
        return "topic name is empty"
    if not VALID_NAME_PATTERN.fullmatch(topic):
        return f"topic name {topic!r} has characters outside [A-Za-z0-9_%|-]"
    if len(topic.encode()) > TOPIC_MAX_LENGTH:
        return f"topic name is {len(topic.encode())} bytes, more than {TOPIC_MAX_LENGTH}"
    return None


def group_error(group: str) -> str | None:
    """Why ``group`` is not a legal group name, or None when it is."""
    if not group:
        return "group name is empty"
    if not VALID_NAME_PATTERN.fullmatch(group):
        return f"group name {group!r} has characters outside [A-Za-z0-9_%|-]"
    if len(group) > GROUP_MAX_LENGTH:
        return f"group name is {len(group)} characters, more than {GROUP_MAX_LENGTH}"
    return None


def encode_properties(properties: dict[str, str]) -> bytes:
    """``{k: v}`` -> ``k\\x01v\\x02...`` as UTF-8 (empty dict -> b"")."""
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items()).encode()


def decode_properties(data: bytes | str) -> dict[str, str]:
    """Inverse of encode_properties; tolerates a missing trailing separator and empty pairs."""
    text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray, memoryview)) else data
    result: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        key, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep:
            result[key] = value
    return result


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (signed 32-bit), the hash RocketMQ uses for tags codes and index keys.

    Pure-Python reference of the compiled ``rmq.includes.hash.java_string_hash``.
    """
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h
