"""Messages as a client sees them: ``Message`` to send, ``MessageExt`` as consumed.

A PULL_MESSAGE body is stored CommitLog records back to back (docs/store-format.md#commitlog-record), decoded with
``rmq.protocol.record``, the one reader of that layout; a SEND_BATCH_MESSAGE body is
``rmq.protocol.batch``'s. Bodies are compressed and restored by ``rmq.protocol.compression``; a
pulled message whose body cannot be restored is logged and not handed on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone

from rmq.errors import ClientError
from rmq.protocol import batch
from rmq.protocol.compression import UndecodableBody, decompress_body
from rmq.protocol.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    KEY_SEPARATOR,
    MAX_MESSAGE_SIZE,
    NOT_ALLOWED_SEND_TOPICS,
    PROPERTIES_MAX_LENGTH,
    MessageProperty,
    MessageSysFlag,
    encode_properties,
    topic_error,
)
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.record import CHECK_RESULTS, encode_msg_id, record_fields

__all__ = [
    "Message",
    "MessageExt",
    "MessageQueue",
    "decode_messages",
    "encode_batch",
    "validate_message",
]

log = logging.getLogger("rmq.client")


class Message:
    """A message to send.

        msg = Message("OrderTopic", b'{"id": 7}', tags="created", keys=["order-7"])
        msg.put_property("region", "eu")

    ``keys`` are indexed by the broker (query by key); several keys travel space-separated.
    ``delay_level`` 1-18 delays delivery (1s 5s 10s 30s 1m ... 2h by default). Any other time, as
    RocketMQ 5.x's timer messages: ``deliver_at=datetime`` (TIMER_DELIVER_MS; a naive datetime is
    local time) or ``delay=timedelta`` from the broker's receipt (TIMER_DELAY_MS), at most the
    broker's timerMaxDelaySec (3 days by default) ahead::

        Message("OrderTopic", b"remind", delay=timedelta(minutes=30))
        Message("OrderTopic", b"open", deliver_at=datetime(2030, 1, 1, tzinfo=timezone.utc))
    """

    __slots__ = ("topic", "body", "flag", "properties")

    def __init__(
        self,
        topic: str,
        body: bytes | bytearray | memoryview | str,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
        flag: int = 0,
        *,
        deliver_at: datetime | None = None,
        delay: timedelta | None = None,
    ):
        self.topic = topic
        self.body = body.encode() if isinstance(body, str) else bytes(body)
        self.flag = flag
        self.properties: dict[str, str] = dict(properties or {})
        if tags:
            self.tags = tags
        if keys:
            self.keys = keys
        if delay_level:
            self.delay_level = delay_level
        if deliver_at is not None and delay is not None:
            raise ValueError("give deliver_at or delay, not both")
        if deliver_at is not None:
            self.deliver_at = deliver_at
        if delay is not None:
            self.delay = delay

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageProperty.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set(MessageProperty.TAGS, value)

    @property
    def keys(self) -> list[str]:
        return self.properties.get(MessageProperty.KEYS, "").split()

    @keys.setter
    def keys(self, value: str | Iterable[str] | None) -> None:
        if value is not None and not isinstance(value, str):
            value = KEY_SEPARATOR.join(value)
        self._set(MessageProperty.KEYS, value)

    @property
    def delay_level(self) -> int:
        return int(self.properties.get(MessageProperty.DELAY_TIME_LEVEL, 0))

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        self._set(MessageProperty.DELAY_TIME_LEVEL, str(level) if level > 0 else None)

    @property
    def deliver_at(self) -> datetime | None:
        """When the broker delivers the message (TIMER_DELIVER_MS), as an aware UTC datetime."""
        ms = self.properties.get(MessageProperty.TIMER_DELIVER_MS)
        return None if ms is None else datetime.fromtimestamp(int(ms) / 1000, timezone.utc)

    @deliver_at.setter
    def deliver_at(self, when: datetime | None) -> None:
        self._set(MessageProperty.TIMER_DELIVER_MS, None if when is None else str(round(when.timestamp() * 1000)))

    @property
    def delay(self) -> timedelta | None:
        """How long after the broker receives it the message is delivered (TIMER_DELAY_MS or _SEC)."""
        ms = self.properties.get(MessageProperty.TIMER_DELAY_MS)
        if ms is not None:
            return timedelta(milliseconds=int(ms))
        sec = self.properties.get(MessageProperty.TIMER_DELAY_SEC)
        return None if sec is None else timedelta(seconds=int(sec))

    @delay.setter
    def delay(self, delay: timedelta | None) -> None:
        if delay is not None and delay < timedelta(0):
            raise ValueError(f"delay must not be negative, got {delay}")
        self.properties.pop(MessageProperty.TIMER_DELAY_SEC, None)
        ms = None if delay is None else str(delay // timedelta(milliseconds=1))
        self.properties.pop(MessageProperty.TIMER_DELAY_MS, None)
        if ms is not None:
            self.properties[MessageProperty.TIMER_DELAY_MS] = ms

    @property
    def uniq_key(self) -> str | None:
        """The client-side message id (UNIQ_KEY), set by the producer when the message is sent."""
        return self.properties.get(MessageProperty.UNIQ_KEY)

    def put_property(self, key: str, value: str) -> None:
        self.properties[key] = str(value)

    def get_property(self, key: str, default: str | None = None) -> str | None:
        return self.properties.get(key, default)

    def _set(self, key: str, value: str | None) -> None:
        if value:
            self.properties[key] = value
        else:
            self.properties.pop(key, None)

    def __repr__(self) -> str:
        return f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, body={len(self.body)} bytes)"


class MessageExt(Message):
    """A message as stored and consumed: the stored record's fields next to the message's own.

    ``msg_id`` is the client-side id (UNIQ_KEY) when the producer set one, as in RocketMQ;
    ``offset_msg_id`` is the broker's id (store host + commit-log offset).
    """

    __slots__ = (
        "queue_id",
        "queue_offset",
        "commit_log_offset",
        "sys_flag",
        "born_timestamp",
        "born_host",
        "store_timestamp",
        "store_host",
        "reconsume_times",
        "body_crc",
        "store_size",
        "prepared_transaction_offset",
        "broker_name",
    )

    def __init__(
        self,
        topic: str,
        body: bytes,
        properties: Mapping[str, str] | None = None,
        *,
        flag: int = 0,
        queue_id: int = 0,
        queue_offset: int = 0,
        commit_log_offset: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("0.0.0.0", 0),
        store_timestamp: int = 0,
        store_host: tuple[str, int] = ("0.0.0.0", 0),
        reconsume_times: int = 0,
        body_crc: int = 0,
        store_size: int = 0,
        prepared_transaction_offset: int = 0,
        broker_name: str | None = None,
    ):
        super().__init__(topic, body, properties=properties, flag=flag)
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_timestamp = store_timestamp
        self.store_host = store_host
        self.reconsume_times = reconsume_times
        self.body_crc = body_crc
        self.store_size = store_size
        self.prepared_transaction_offset = prepared_transaction_offset
        self.broker_name = broker_name

    @property
    def offset_msg_id(self) -> str:
        """The broker's message id: 32 hex chars of store ip, port and commit-log offset."""
        return encode_msg_id(self.store_host[0], self.store_host[1], self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        return self.uniq_key or self.offset_msg_id

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name or "", self.queue_id)

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, msg_id={self.msg_id!r}, queue_id={self.queue_id}, "
            f"queue_offset={self.queue_offset}, tags={self.tags!r}, body={len(self.body)} bytes)"
        )


def decode_messages(
    data: bytes | memoryview, broker_name: str | None = None, max_body_size: int = MAX_MESSAGE_SIZE
) -> list[MessageExt]:
    """The messages of a PULL_MESSAGE body: stored records back to back, bodies decompressed.

    Raises ClientError when the bytes are not whole records. A message whose body cannot be
    restored (a compression type this client does not know, bytes that do not decompress, a body
    that inflates past ``max_body_size``) is logged as an error, with what finds it again (its
    broker id, topic, queue and offset), and left out.
    """
    view = memoryview(data)
    records, stop, outcome = record_fields(view)
    if outcome <= 0:
        raise ClientError(
            f"pulled body is not stored records at byte {stop} of {len(view)}: {CHECK_RESULTS.get(outcome, outcome)}"
        )
    messages: list[MessageExt] = []
    append = messages.append
    new = MessageExt.__new__
    for fields in records:
        sys_flag = fields[6]
        body = fields[13]
        if sys_flag & MessageSysFlag.COMPRESSED:
            try:
                body = decompress_body(body, sys_flag, max_body_size)
            except UndecodableBody as exc:
                store_host = fields[10]
                log.error(
                    "message %s (%s queue %d offset %d) not delivered: %s",
                    encode_msg_id(store_host[0], store_host[1], fields[5]),
                    fields[14],
                    fields[2],
                    fields[4],
                    exc,
                )
                continue
        # MessageExt(...) without its __init__: the record's fields straight into the slots
        msg = new(MessageExt)
        (
            msg.store_size,
            msg.body_crc,
            msg.queue_id,
            msg.flag,
            msg.queue_offset,
            msg.commit_log_offset,
            msg.sys_flag,
            msg.born_timestamp,
            msg.born_host,
            msg.store_timestamp,
            msg.store_host,
            msg.reconsume_times,
            msg.prepared_transaction_offset,
            _,
            msg.topic,
            msg.properties,
        ) = fields
        msg.body = body
        msg.broker_name = broker_name
        append(msg)
    return messages


def encode_properties_checked(properties: dict[str, str]) -> bytes:
    """encode_properties, refusing what does not fit the int16 length a record stores it behind."""
    data = encode_properties(properties)
    if len(data) > PROPERTIES_MAX_LENGTH:
        raise ClientError(f"message properties are {len(data)} bytes encoded, more than {PROPERTIES_MAX_LENGTH}")
    return data


def encode_batch(messages: Iterable[Message]) -> bytes:
    """The SEND_BATCH_MESSAGE body of ``messages`` (layout in ``rmq.protocol.batch``)."""
    return batch.encode_batch((msg.body, encode_properties_checked(msg.properties), msg.flag) for msg in messages)


# Topics the broker keeps for itself: a producer may not send to them directly (nor to the
# auto-creation template, as RocketMQ's Validators refuse).
_NOT_ALLOWED_SEND_TOPICS = NOT_ALLOWED_SEND_TOPICS | {AUTO_CREATE_TOPIC_KEY_TOPIC}


# Topic names found legal: a producer sends to a few topics many times, and matching the pattern
# again was a tenth of send_async's own work. Bounded: emptied when full.
_legal_topics: set[str] = set()
_LEGAL_TOPICS_MAX = 1024


def validate_message(msg: Message, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
    """Refuse, before anything is sent, what the broker would refuse (RocketMQ's Validators)."""
    if not isinstance(msg, Message):
        raise ClientError(f"expected a Message, got {type(msg).__name__}")
    if msg.topic not in _legal_topics:
        error = topic_error(msg.topic)
        if error:
            raise ClientError(f"cannot send: {error}")
        if len(_legal_topics) >= _LEGAL_TOPICS_MAX:
            _legal_topics.clear()
        _legal_topics.add(msg.topic)
    if msg.topic in _NOT_ALLOWED_SEND_TOPICS:
        raise ClientError(f"cannot send to {msg.topic!r}: it is a system topic of the broker")
    if not msg.body:
        raise ClientError(f"cannot send to {msg.topic!r}: the message body is empty")
    if len(msg.body) > max_message_size:
        raise ClientError(
            f"cannot send to {msg.topic!r}: the body is {len(msg.body)} bytes, "
            f"more than the maximum message size {max_message_size}"
        )
