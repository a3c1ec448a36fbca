"""The remoting frame codec rmq uses: the compiled ``rmq.net._codec`` unless ``RMQ_NO_EXTENSIONS=1``
asks for the pure-Python twin ``rmq.net.codec_py`` (same API, same tests; the frame layout table
opens both).
"""

from __future__ import annotations

import os

from rmq.net.codec_py import body_bytes

if os.environ.get("RMQ_NO_EXTENSIONS") == "1":
    from rmq.net import codec_py as implementation
else:
    from rmq.net import _codec as implementation  # type: ignore[no-redef]

RemotingCommand = implementation.RemotingCommand
FrameDecoder = implementation.FrameDecoder
encode = implementation.encode
encode_into = implementation.encode_into
encode_head = implementation.encode_head
decode_frames = implementation.decode_frames

__all__ = [
    "RemotingCommand",
    "FrameDecoder",
    "body_bytes",
    "encode",
    "encode_into",
    "encode_head",
    "decode_frames",
    "implementation",
]
