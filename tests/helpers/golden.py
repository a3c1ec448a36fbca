"""Golden bytes: records laid out from docs/store-format.md field by field, with nothing from rmq."""

from __future__ import annotations

import socket
import struct
import zlib

MESSAGE_MAGIC = 0xDAA320A7


def spec_record(
    *,
    topic: str = "T",
    body: bytes = b"",
    props: bytes = b"",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    phy_offset: int = 0,
    sys_flag: int = 0,
    born_ts: int = 1_700_000_000_123,
    born_host: tuple[str, int] = ("10.0.0.7", 40001),
    store_ts: int = 1_700_000_000_456,
    store_host: tuple[str, int] = ("127.0.0.1", 10911),
    reconsume: int = 0,
    prepared: int = 0,
) -> bytes:
    """A stored CommitLog record laid out from docs/store-format.md, field by field, with nothing from rmq."""
    topic_b = topic.encode()
    total = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + len(body) + 1 + len(topic_b) + 2 + len(props)
    out = b"".join(
        [
            struct.pack(">i", total),  # 1 TOTALSIZE
            struct.pack(">I", MESSAGE_MAGIC),  # 2 MAGIC
            struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),  # 3 BODYCRC
            struct.pack(">i", queue_id),  # 4 QUEUEID
            struct.pack(">i", flag),  # 5 FLAG
            struct.pack(">q", queue_offset),  # 6 QUEUEOFFSET
            struct.pack(">q", phy_offset),  # 7 PHYSICALOFFSET
            struct.pack(">i", sys_flag),  # 8 SYSFLAG
            struct.pack(">q", born_ts),  # 9 BORNTIMESTAMP
            socket.inet_aton(born_host[0]) + struct.pack(">i", born_host[1]),  # 10 BORNHOST
            struct.pack(">q", store_ts),  # 11 STORETIMESTAMP
            socket.inet_aton(store_host[0]) + struct.pack(">i", store_host[1]),  # 12 STOREHOST
            struct.pack(">i", reconsume),  # 13 RECONSUMETIMES
            struct.pack(">q", prepared),  # 14 PREPARED_TX_OFFSET
            struct.pack(">i", len(body)) + body,  # 15 BODYLEN + body
            struct.pack(">b", len(topic_b)) + topic_b,  # 16 TOPICLEN + topic
            struct.pack(">h", len(props)) + props,  # 17 PROPLEN + properties
        ]
    )
    assert len(out) == total == 91 + len(body) + len(topic_b) + len(props)
    return out
