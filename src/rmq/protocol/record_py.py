"""The CommitLog record codec in pure Python: the twin of the compiled ``rmq.protocol._record``
(one API, the same tests). Layout: ``rmq.protocol.layout``.

Used when the compiled codec is not built or ``RMQ_NO_EXTENSIONS=1`` asks for the pure one.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from rmq.protocol import layout
from rmq.protocol.crc import crc32 as body_crc
from rmq.protocol.message import decode_properties

__all__ = ["CHECK_RESULTS", "body_crc", "check_record", "decode_msg_id", "encode_msg_id", "int_to_ipv4", "ipv4_to_int"]

CHECK_RESULTS = layout.CHECK_RESULTS

_INT32 = struct.Struct(">i")
_HEAD = struct.Struct(">iI")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_MSGID = struct.Struct(">4siq")


def check_record(data: bytes | bytearray | memoryview, expected_offset: int = -1, check_crc: bool = True) -> int:
    """Validate the stored record at the start of ``data`` (any buffer).

    Returns its size (> 0) when valid, else a check outcome <= 0 (see CHECK_RESULTS).
    ``expected_offset`` >= 0 also requires the PHYSICALOFFSET field to equal it.
    """
    view = memoryview(data).cast("B")
    avail = len(view)
    if avail < layout.END_FILE_MIN_BLANK_LENGTH:
        return layout.CHECK_EMPTY
    total: int
    total, magic = _HEAD.unpack_from(view, layout.REC_TOTALSIZE)  # 1 TOTALSIZE, 2 MAGIC
    if magic == layout.BLANK_MAGIC_CODE and total == avail:
        return layout.CHECK_END_OF_FILE
    if total == 0 and magic == 0:
        return layout.CHECK_EMPTY
    if magic != layout.MESSAGE_MAGIC_CODE:
        return layout.CHECK_BAD_MAGIC
    if total < layout.REC_FIXED_OVERHEAD or total > avail:
        return layout.CHECK_TRUNCATED
    (body_len,) = _INT32.unpack_from(view, layout.REC_BODYLEN)  # 15 BODYLEN
    if body_len < 0 or layout.REC_FIXED_OVERHEAD + body_len > total:
        return layout.CHECK_BAD_LENGTHS
    topic_len = view[layout.REC_BODY + body_len]  # 16 TOPICLEN
    if layout.REC_FIXED_OVERHEAD + body_len + topic_len > total:
        return layout.CHECK_BAD_LENGTHS
    (props_len,) = _INT16.unpack_from(view, layout.REC_BODY + body_len + 1 + topic_len)  # 17 PROPLEN
    if layout.REC_FIXED_OVERHEAD + body_len + topic_len + props_len != total:
        return layout.CHECK_BAD_LENGTHS
    if expected_offset >= 0 and _INT64.unpack_from(view, layout.REC_PHYSICALOFFSET)[0] != expected_offset:
        return layout.CHECK_BAD_OFFSET  # 7 PHYSICALOFFSET
    if check_crc:
        body = view[layout.REC_BODY : layout.REC_BODY + body_len]
        if body_crc(body) != _INT32.unpack_from(view, layout.REC_BODYCRC)[0]:  # 3 BODYCRC
            return layout.CHECK_BAD_CRC
    return total


def ipv4_to_int(ip: str) -> int:
    """'1.2.3.4' -> the IPv4 address as an unsigned 32-bit int (the byte order of the record)."""
    return int.from_bytes(socket.inet_aton(ip), "big")


def int_to_ipv4(ip: int) -> str:
    return socket.inet_ntoa(ip.to_bytes(4, "big"))


def encode_msg_id(store_ip: str, store_port: int, phy_offset: int) -> str:
    """The broker msgId (offsetMsgId): 32 uppercase hex of store IPv4, int32 port, int64 offset."""
    return _MSGID.pack(socket.inet_aton(store_ip), store_port, phy_offset).hex().upper()


def decode_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Inverse of encode_msg_id: (store ip, store port, physical offset)."""
    if len(msg_id) != layout.MSGID_BYTES * 2:
        raise ValueError(f"msgId {msg_id!r} has {len(msg_id)} characters, expected {layout.MSGID_BYTES * 2} hex")
    ip, port, offset = _MSGID.unpack(bytes.fromhex(msg_id))
    return socket.inet_ntoa(ip), port, offset


def record_fields(data: bytes | bytearray | memoryview) -> tuple[list[tuple[Any, ...]], int, int]:
    """The fields of the stored records back to back in ``data`` (a PULL_MESSAGE answer's body), in
    StoredMessage's order, one tuple per record: ``(tuples, stop, outcome)``; ``stop`` is where the
    bytes stopped being whole records and ``outcome`` why (a CHECK_RESULTS code), or ``len(data)``
    and 1 when they all were."""
    view = memoryview(data).cast("B")
    records: list[tuple[Any, ...]] = []
    pos = 0
    while pos < len(view):
        size = check_record(view[pos:], -1, False)
        if size <= 0:
            return records, pos, size
        head = layout.RECORD_HEAD.unpack_from(view, pos)
        body_len = head[16]
        at = pos + layout.REC_BODY
        body = bytes(view[at : at + body_len])
        at += body_len
        topic_len = view[at]
        topic = bytes(view[at + 1 : at + 1 + topic_len]).decode("utf-8", "replace")
        at += 1 + topic_len
        props_len = int.from_bytes(view[at : at + 2], "big")
        properties = decode_properties(bytes(view[at + 2 : at + 2 + props_len]))
        born = (socket.inet_ntoa(head[9]), head[10])
        store = (socket.inet_ntoa(head[12]), head[13])
        records.append(
            (head[0], head[2], head[3], head[4], head[5], head[6], head[7], head[8], born, head[11], store,
             head[14], head[15], body, topic, properties)
        )  # fmt: skip
        pos += size
    return records, pos, 1
