"""Message body compression, as RocketMQ producers and consumers do it (and the gRPC endpoint, which
inflates a compressed body for 5.x consumers: rmq.proxy.convert).

    sysFlag bit 0      COMPRESSED: the body is compressed
    sysFlag bits 8-10  how (RocketMQ 5.x CompressionType): 0 or 3 zlib, 1 LZ4, 2 ZSTD; 4-7 unassigned

A producer compresses a single message's body from ``compress_msg_body_over_howmuch`` bytes on
(4 KiB, RocketMQ's compressMsgBodyOverHowmuch); batches are never compressed (neither 4.x nor 5.x
compresses a MessageBatch). The default codec, zlib at level 5 (RocketMQ's compressLevel), sets
only bit 0, exactly as 4.x clients do, so every 4.x and 5.x consumer reads it. ``"lz4"`` (LZ4 frame
format, independent blocks, as lz4-java's LZ4FrameOutputStream writes) and ``"zstd"`` (a zstd frame,
at the same level) also set the type bits: RocketMQ 5.x consumers read them, 4.x consumers cannot
(they would inflate them as zlib and fail), so they are opt-in.

A body a consumer cannot restore (an unassigned type, bytes that do not decompress) is not handed
on as if it were the message: ``decompress_body`` raises ``UndecodableBody`` and the caller reports
the message and skips it (RocketMQ 5.x's decoder drops it, and silently the rest of the pull too).
Nor is one that would inflate past the client's maxMessageSize (a few KiB of zeros deflate to
gigabytes): every codec inflates by steps and stops one byte past the cap (``BodyTooLarge``).

The lz4 and zstandard packages are imported on first use: a client that never meets those codecs
does not load them.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable

from rmq.errors import ClientError
from rmq.protocol.message import MAX_MESSAGE_SIZE, CompressionType, MessageSysFlag

# Bodies from this size on are compressed (RocketMQ's compressMsgBodyOverHowmuch).
COMPRESS_OVER = 4 * 1024
# The level of RocketMQ's producer (its compressLevel default), for zlib and zstd.
COMPRESS_LEVEL = 5
DEFAULT_COMPRESSION = "zlib"


class UndecodableBody(ClientError):
    """A COMPRESSED body this client cannot restore."""


class BodyTooLarge(UndecodableBody):
    """A COMPRESSED body that inflates past the client's maxMessageSize."""


def _lz4_compress(body: bytes, level: int) -> bytes:
    import lz4.frame  # type: ignore[import-untyped]  # lz4 ships no type hints

    # lz4-java's LZ4FrameInputStream refuses linked blocks; no content size, as Java writes none
    return bytes(lz4.frame.compress(body, block_linked=False, store_size=False))


# Each decompressor returns at most ``limit`` + 1 bytes: one past the cap tells a body that is too big.


def _zlib_decompress(data: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, limit + 1)
    if len(out) <= limit and not inflater.eof:
        raise zlib.error("incomplete or truncated stream")
    return out


def _lz4_decompress(data: bytes, limit: int) -> bytes:
    import lz4.frame

    decompressor = lz4.frame.LZ4FrameDecompressor()
    out = bytes(decompressor.decompress(data, max_length=limit + 1))
    if len(out) <= limit and not decompressor.eof:
        raise RuntimeError("the LZ4 frame is incomplete")
    return out


# zstd contexts are costly to make (a fresh one per ~8 KiB body halved compression and cut
# decompression to a fifth: perf/bench_compression.py) and may not be shared between threads: one
# of each per thread, a compressor per level
_zstd_local = threading.local()


def _zstd_compress(body: bytes, level: int) -> bytes:
    compressors = getattr(_zstd_local, "compressors", None)
    if compressors is None:
        compressors = _zstd_local.compressors = {}
    compressor = compressors.get(level)
    if compressor is None:
        import zstandard

        compressor = compressors[level] = zstandard.ZstdCompressor(level=level)
    return bytes(compressor.compress(body))


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    decompressor = getattr(_zstd_local, "decompressor", None)
    if decompressor is None:
        import zstandard

        decompressor = _zstd_local.decompressor = zstandard.ZstdDecompressor()
    # a streaming decoder: Java's ZstdOutputStream writes no content size into the frame header
    with decompressor.stream_reader(data) as reader:
        return bytes(reader.read(limit + 1))


_COMPRESSORS: dict[str, tuple[Callable[[bytes, int], bytes], int]] = {
    # zlib keeps the type bits 0, as 4.x clients do (5.x reads 0 as zlib)
    "zlib": (lambda body, level: zlib.compress(body, level), MessageSysFlag.COMPRESSED),
    "lz4": (_lz4_compress, MessageSysFlag.COMPRESSED | CompressionType.LZ4 << MessageSysFlag.COMPRESSION_TYPE_SHIFT),
    "zstd": (_zstd_compress, MessageSysFlag.COMPRESSED | CompressionType.ZSTD << MessageSysFlag.COMPRESSION_TYPE_SHIFT),
}

_DECOMPRESSORS: dict[int, tuple[str, Callable[[bytes, int], bytes]]] = {
    CompressionType.ZLIB: ("zlib", _zlib_decompress),
    CompressionType.LZ4: ("lz4", _lz4_decompress),
    CompressionType.ZSTD: ("zstd", _zstd_decompress),
}


def check_compression(name: str) -> str:
    """``name`` as a codec name ("zlib", "lz4", "zstd"); ClientError otherwise."""
    key = str(name).strip().lower()
    if key not in _COMPRESSORS:
        raise ClientError(f"compression {name!r} is not one of {', '.join(_COMPRESSORS)}")
    return key


def compress_body(
    body: bytes, over: int = COMPRESS_OVER, level: int = COMPRESS_LEVEL, compression: str = DEFAULT_COMPRESSION
) -> tuple[bytes, int]:
    """``(body to send, sysFlag bits)``: compressed with COMPRESSED (and the 5.x type bits of
    lz4/zstd) set from ``over`` bytes on."""
    if len(body) < over:
        return body, 0
    compress, flags = _COMPRESSORS[compression]
    return compress(body, level), flags


def decompress_body(body: bytes, sys_flag: int, max_size: int = MAX_MESSAGE_SIZE) -> bytes:
    """The body as the producer gave it; UndecodableBody for a type no codec has or bytes that
    do not decompress, BodyTooLarge for a body that inflates past ``max_size`` bytes (never
    inflated further than one byte past it)."""
    if not sys_flag & MessageSysFlag.COMPRESSED:
        return body
    kind = CompressionType.of_sys_flag(sys_flag)
    found = _DECOMPRESSORS.get(kind)
    if found is None:
        raise UndecodableBody(
            f"compression type {kind} (sysFlag {sys_flag:#x}, bits 8-10) is unknown; this client reads "
            f"{', '.join(f'{n} ({k})' for k, (n, _) in sorted(_DECOMPRESSORS.items()))}"
        )
    name, decompress = found
    try:
        out = decompress(body, max_size)
    except Exception as exc:  # each codec has errors of its own (zlib.error, ZstdError, RuntimeError)
        raise UndecodableBody(f"the body is flagged {name}-compressed but does not decompress: {exc}") from None
    if len(out) > max_size:
        raise BodyTooLarge(
            f"the {name}-compressed body ({len(body)} bytes) inflates past {max_size} bytes, the maximum "
            "message size of this client (maxMessageSize)"
        )
    return out
