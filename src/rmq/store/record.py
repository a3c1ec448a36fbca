"""Decode a stored CommitLog record into a Python object (tools, tests, the broker's slow paths).

The layout is in ``rmq.store.layout``; validation with CRC is the compiled ``check_record``.
"""

from __future__ import annotations

import dataclasses
import socket

from rmq._store import CHECK_RESULTS, check_record, encode_msg_id
from rmq.errors import StoreError
from rmq.message import decode_properties
from rmq.store import layout


@dataclasses.dataclass
class StoredMessage:
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
        return self.properties.get("TAGS")

    @property
    def keys(self) -> list[str]:
        return self.properties.get("KEYS", "").split()


def decode_record(data, check_crc: bool = True) -> StoredMessage:
    """Decode the record at the start of ``data``; StoreError if it is not a valid record."""
    size = check_record(data, -1, check_crc)
    if size <= 0:
        raise StoreError(f"not a valid stored record: {CHECK_RESULTS.get(size, size)}")
    mv = memoryview(data)[:size]
    (total, _magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_ip, born_port,  # 1-10
     store_ts, store_ip, store_port, reconsume, prepared, body_len) = layout.RECORD_HEAD.unpack_from(mv)  # 11-15
    pos = layout.REC_BODY
    body = bytes(mv[pos:pos + body_len])                                          # 15 body
    pos += body_len
    topic_len = mv[pos]                                                           # 16 TOPICLEN
    topic = bytes(mv[pos + 1:pos + 1 + topic_len]).decode("utf-8", "replace")
    pos += 1 + topic_len
    props_len = int.from_bytes(mv[pos:pos + 2], "big")                            # 17 PROPLEN
    properties = decode_properties(bytes(mv[pos + 2:pos + 2 + props_len]))
    return StoredMessage(total, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts,
                         (socket.inet_ntoa(born_ip), born_port), store_ts,
                         (socket.inet_ntoa(store_ip), store_port), reconsume, prepared, body, topic, properties)
