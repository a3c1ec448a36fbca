"""The HA wire format: master -> slave CommitLog replication over a raw TCP connection (SPEC.md §6).

No remoting frames: the slave connects to the master's haListenPort and both sides write bare
big-endian integers.

    slave -> master: an offset report, after connecting, after every append and every
    haSendHeartbeatInterval ms
    +-------------------------------+
    | int64 maxPhyOffset            |   the slave's CommitLog ends here (everything below it is
    +-------------------------------+   byte-identical to the master's)
    0                               8

    master -> slave: a frame of CommitLog bytes, never crossing a CommitLog file
    +-------------------------------+---------------+------------------------------+
    | int64 startOffset             | int32 size    | data: size bytes             |
    +-------------------------------+---------------+------------------------------+
    0                               8               12                     12 + size
    size <= haTransferBatchSize; size 0 is a heartbeat (startOffset: where the master would
    continue). A frame whose startOffset is not the slave's max offset breaks the stream.

The first report decides where the master starts: 0 means "I have nothing", and the master starts at
the beginning of its last CommitLog file (RocketMQ's choice: a new slave copies only the newest file).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "FRAME_HEADER",
    "FRAME_HEADER_SIZE",
    "HEARTBEAT_SIZE",
    "REPORT",
    "REPORT_SIZE",
    "decode_frame_header",
    "decode_report",
    "encode_frame_header",
    "encode_report",
]

REPORT = struct.Struct(">q")
REPORT_SIZE = REPORT.size  # 8
FRAME_HEADER = struct.Struct(">qi")
FRAME_HEADER_SIZE = FRAME_HEADER.size  # 12
HEARTBEAT_SIZE = 0


def encode_report(max_offset: int) -> bytes:
    return REPORT.pack(max_offset)


def decode_report(data: Buffer, position: int = 0) -> int:
    offset: int = REPORT.unpack_from(data, position)[0]
    return offset


def encode_frame_header(start_offset: int, size: int) -> bytes:
    return FRAME_HEADER.pack(start_offset, size)


def decode_frame_header(data: Buffer, position: int = 0) -> tuple[int, int]:
    """(startOffset, size) of the frame at ``position``."""
    start, size = FRAME_HEADER.unpack_from(data, position)
    return start, size
