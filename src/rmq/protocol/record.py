"""Stored CommitLog records and broker msgIds, as the store writes them and clients, brokers and
admin tools read them (docs/store-format.md#commitlog-record; layout in ``rmq.protocol.layout``).

The codec is the compiled ``rmq.protocol._record`` unless it is not built or ``RMQ_NO_EXTENSIONS=1``
asks for the pure-Python twin ``rmq.protocol.record_py`` (same API, same tests, as aiokafka does).
Neither loads the store: a producer or consumer process never imports ``rmq.store._store``.
"""

from __future__ import annotations

import dataclasses
import os
import socket

from rmq.errors import RecordError
from rmq.protocol import layout
from rmq.protocol.message import MessageProperty, decode_properties, encode_properties

if os.environ.get("RMQ_NO_EXTENSIONS") == "1":
    from rmq.protocol import record_py as implementation
else:
    try:
        from rmq.protocol import _record as implementation  # type: ignore[no-redef]
    except ImportError:  # a checkout whose extensions are not built
        from rmq.protocol import record_py as implementation

CHECK_RESULTS = implementation.CHECK_RESULTS
body_crc = implementation.body_crc
check_record = implementation.check_record
decode_msg_id = implementation.decode_msg_id
encode_msg_id = implementation.encode_msg_id
int_to_ipv4 = implementation.int_to_ipv4
ipv4_to_int = implementation.ipv4_to_int
record_fields = implementation.record_fields

Buffer = bytes | bytearray | memoryview

__all__ = [
    "CHECK_RESULTS",
    "StoredMessage",
    "body_crc",
    "check_record",
    "decode_msg_id",
    "decode_record",
    "decode_records",
    "encode_msg_id",
    "encode_record",
    "implementation",
    "int_to_ipv4",
    "ipv4_to_int",
    "record_fields",
]


@dataclasses.dataclass
class StoredMessage:
    """One stored record, every field decoded (the body as stored: still deflated when COMPRESSED)."""

    total_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]

    @property
    def msg_id(self) -> str:
        """The broker msgId (offsetMsgId) a client rebuilds from this record."""
        return encode_msg_id(self.store_host[0], self.store_host[1], self.physical_offset)

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageProperty.TAGS)

    @property
    def keys(self) -> list[str]:
        return self.properties.get(MessageProperty.KEYS, "").split()

    @property
    def uniq_key(self) -> str | None:
        """The client-side message id the producer set (UNIQ_KEY), if any."""
        return self.properties.get(MessageProperty.UNIQ_KEY)


def decode_record(data: Buffer, check_crc: bool = True) -> StoredMessage:
    """Decode the record at the start of ``data``; RecordError if it is not a valid record."""
    size = check_record(data, -1, check_crc)
    if size <= 0:
        raise RecordError(f"not a valid stored record: {CHECK_RESULTS.get(size, size)}")
    mv = memoryview(data)[:size]
    (
        total,
        _magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        phy,
        sys_flag,
        born_ts,
        born_ip,
        born_port,  # 1-10
        store_ts,
        store_ip,
        store_port,
        reconsume,
        prepared,
        body_len,
    ) = layout.RECORD_HEAD.unpack_from(mv)  # 11-15
    pos = layout.REC_BODY
    body = bytes(mv[pos : pos + body_len])  # 15 body
    pos += body_len
    topic_len = mv[pos]  # 16 TOPICLEN
    topic = bytes(mv[pos + 1 : pos + 1 + topic_len]).decode("utf-8", "replace")
    pos += 1 + topic_len
    props_len = int.from_bytes(mv[pos : pos + 2], "big")  # 17 PROPLEN
    properties = decode_properties(bytes(mv[pos + 2 : pos + 2 + props_len]))
    return StoredMessage(
        total,
        crc,
        queue_id,
        flag,
        queue_offset,
        phy,
        sys_flag,
        born_ts,
        (socket.inet_ntoa(born_ip), born_port),
        store_ts,
        (socket.inet_ntoa(store_ip), store_port),
        reconsume,
        prepared,
        body,
        topic,
        properties,
    )


def decode_records(data: Buffer, check_crc: bool = False) -> list[StoredMessage]:
    """Stored records back to back (the body of a PULL_MESSAGE, QUERY_MESSAGE or VIEW_MESSAGE_BY_ID
    answer); RecordError naming the byte where the bytes stop being whole records."""
    view = memoryview(data)
    if not check_crc:  # every record's fields read in one compiled pass
        fields, stop, outcome = record_fields(view)
        if outcome <= 0:
            raise RecordError(
                f"not stored records at byte {stop} of {len(view)}: {CHECK_RESULTS.get(outcome, outcome)}"
            )
        return [StoredMessage(*f) for f in fields]
    messages = []
    pos = 0
    while pos < len(view):
        size = check_record(view[pos:], -1, check_crc)
        if size <= 0:
            raise RecordError(f"not stored records at byte {pos} of {len(view)}: {CHECK_RESULTS.get(size, size)}")
        messages.append(decode_record(view[pos : pos + size], check_crc=False))
        pos += size
    return messages


def encode_record(message: StoredMessage) -> bytes:
    """``message`` as one stored record (RocketMQ's MessageDecoder.encode): the body of a
    CHECK_TRANSACTION_STATE. TOTALSIZE is computed from the fields; the others go as they are."""
    topic = message.topic.encode()
    properties = encode_properties(message.properties)
    born_ip, born_port = message.born_host
    store_ip, store_port = message.store_host
    total = layout.REC_FIXED_OVERHEAD + len(message.body) + len(topic) + len(properties)
    head = layout.RECORD_HEAD.pack(
        total,  # 1 TOTALSIZE
        layout.MESSAGE_MAGIC_CODE,  # 2 MAGIC
        message.body_crc,  # 3 BODYCRC
        message.queue_id,  # 4 QUEUEID
        message.flag,  # 5 FLAG
        message.queue_offset,  # 6 QUEUEOFFSET
        message.physical_offset,  # 7 PHYSICALOFFSET
        message.sys_flag,  # 8 SYSFLAG
        message.born_timestamp,  # 9 BORNTIMESTAMP
        socket.inet_aton(born_ip),  # 10 BORNHOST
        born_port,
        message.store_timestamp,  # 11 STORETIMESTAMP
        socket.inet_aton(store_ip),  # 12 STOREHOST
        store_port,
        message.reconsume_times,  # 13 RECONSUMETIMES
        message.prepared_transaction_offset,  # 14 PREPARED_TX_OFFSET
        len(message.body),  # 15 BODYLEN
    )
    return b"".join((head, message.body, bytes((len(topic),)), topic, len(properties).to_bytes(2, "big"), properties))
