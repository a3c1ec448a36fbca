"""The SEND_BATCH_MESSAGE body (code 320, or 310 with ``m=true``): RocketMQ's
``MessageDecoder.encodeMessages``, one record per message, back to back, big-endian (docs/protocol.md#sends)::

    offset  size  field
    0       4     total     int32 = 20 + bodyLen + 2 + propsLen (counts itself)
    4       4     magic     int32: producers write 0, the broker does not check it
    8       4     bodyCRC   int32: producers write 0, the broker computes its own
    12      4     flag      int32, the message's user flag
    16      4     bodyLen   int32
    20      B     body
    20+B    2     propsLen  int16
    22+B    P     properties ``key\\x01value\\x02`` ...

The producer encodes it, the broker decodes it. A body that does not decode is refused with
MESSAGE_ILLEGAL, naming the record and what does not add up.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode

Buffer = bytes | bytearray | memoryview

RECORD_HEAD = struct.Struct(">iiiii")  # total, magic, bodyCRC, flag, bodyLen
PROPS_LEN = struct.Struct(">h")
FIXED_OVERHEAD = RECORD_HEAD.size + PROPS_LEN.size


def encode_batch(messages: Iterable[tuple[bytes, bytes, int]]) -> bytes:
    """The body of ``(body, encoded properties, flag)`` messages."""
    out = bytearray()
    for body, props, flag in messages:
        out += RECORD_HEAD.pack(FIXED_OVERHEAD + len(body) + len(props), 0, 0, flag, len(body))
        out += body
        out += PROPS_LEN.pack(len(props))
        out += props
    return bytes(out)


def decode_batch(body: Buffer) -> list[tuple[bytes, bytes, int]]:
    """The records of a batch body as ``(body, properties, flag)``; RequestRefused (MESSAGE_ILLEGAL)
    when the body is malformed."""
    view = memoryview(body)
    size = len(view)
    out: list[tuple[bytes, bytes, int]] = []
    pos = 0
    while pos < size:
        if pos + RECORD_HEAD.size > size:
            raise _illegal(f"record {len(out)} at byte {pos} is truncated")
        total, _magic, _crc, flag, body_len = RECORD_HEAD.unpack_from(view, pos)
        start = pos + RECORD_HEAD.size
        props_at = start + body_len
        if body_len < 0 or props_at + PROPS_LEN.size > size:
            raise _illegal(f"record {len(out)} body length {body_len} overruns the body")
        (props_len,) = PROPS_LEN.unpack_from(view, props_at)
        end = props_at + PROPS_LEN.size + props_len
        if props_len < 0 or end > size or (total and total != end - pos):
            raise _illegal(
                f"record {len(out)} sizes do not add up (total {total}, body {body_len}, properties {props_len})"
            )
        out.append((bytes(view[start:props_at]), bytes(view[props_at + PROPS_LEN.size : end]), flag))
        pos = end
    if not out:
        raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, "batch body holds no message")
    return out


def _illegal(what: str) -> RequestRefused:
    return RequestRefused(ResponseCode.MESSAGE_ILLEGAL, f"batch body: {what}")
