"""RocketMQ's CRC (UtilAll.crc32): zlib's IEEE CRC-32 masked to a non-negative int32.

It is a stored record's BODYCRC and a REGISTER_BROKER body's ``bodyCrc32``. The compiled record
codec computes the same value in C (ISA-L) on the put path.
"""

from __future__ import annotations

import zlib


def crc32(data: bytes | bytearray | memoryview) -> int:
    """``crc32(data) & 0x7FFFFFFF``."""
    return zlib.crc32(data) & 0x7FFFFFFF
