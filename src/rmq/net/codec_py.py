"""Remoting frame codec, pure Python: the twin of the compiled ``rmq.net._codec`` (one API).

Frame layout (docs/protocol.md#frame; every integer big-endian)::

    offset  size  field
    0       4     total_length    int32 = 4 + header_length + body_length (does not count itself)
    4       1     serialize_type  high byte of the int32 at 4: 0 = JSON, the only type read or written
    5       3     header_length   low 24 bits of the int32 at 4
    8       H     header          UTF-8 JSON object:
                                  {"code","language","version","opaque","flag","remark","extFields"}
    8+H     B     body            raw bytes (B = total_length - 4 - H)

    flag bit0 (FLAG_RESPONSE): a response, echoing the request's opaque
    flag bit1 (FLAG_ONEWAY):   a request that gets no answer

Real clients send extFields values of mixed JSON types (ints, bools, strings): they are decoded as
strings. Some clients read a response field only if it is a JSON string, so every extFields value is
written as a string. Unknown header keys, a missing remark or extFields, any key order and trailing
whitespace after the JSON are tolerated.

The helpers below that are not hot (coercion of unusual values, error messages) are shared with the
compiled twin, which imports them from here.
"""

from __future__ import annotations

import itertools
import struct
import sys
from typing import Union

import orjson

from rmq.errors import ProtocolError
from rmq.net.frame import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LANGUAGE,
    MAX_FRAME_SIZE_DEFAULT,
    SERIALIZE_JSON,
    VERSION,
)

# Offsets and sizes of the layout above; _codec.pxd declares the same enum and a test compares them.
TOTAL_LENGTH_SIZE = 4
HEADER_LENGTH_SIZE = 4
PREFIX_SIZE = TOTAL_LENGTH_SIZE + HEADER_LENGTH_SIZE
HEADER_LENGTH_MASK = 0xFFFFFF
SERIALIZE_TYPE_SHIFT = 24

# The language a decoded header without one is given (a name of RocketMQ's LanguageCode enum).
LANGUAGE_UNKNOWN = "OTHER"

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

Body = Union[bytes, bytearray, memoryview, "list[bytes | bytearray | memoryview]"]

_PREFIX = struct.Struct(">II")
_LENGTH = struct.Struct(">I")

# Java clients count opaque with an AtomicInteger; ours stays positive so it never collides with 0.
_opaque_counter = itertools.count(1)
# ext_int's default when the field is required
REQUIRED = object()


def next_opaque() -> int:
    """A fresh request opaque from the process-wide counter (shared by both codec implementations)."""
    return next(_opaque_counter) & INT32_MAX


# ---------------------------------------------------------------------------------------------
# Helpers shared with the compiled twin


def ext_value_text(value: object) -> str | None:
    """The string a JSON ext value stands for (None: drop the key). JSON true -> "true", 12 -> "12"."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return repr(value)
    return orjson.dumps(value).decode()


def ext_fields_from_json(obj: object) -> dict[str, str]:
    """extFields as decoded from a header, every value coerced to a string."""
    if obj is None:
        return {}
    if type(obj) is not dict:
        raise ProtocolError(f"header extFields is a JSON {json_type_name(obj)}, expected an object")
    for value in obj.values():
        if type(value) is not str:
            break
    else:
        return obj
    out = {}
    for key, value in obj.items():
        text = ext_value_text(value)
        if text is not None:
            out[key] = text
    return out


def ext_fields_for_wire(ext: dict) -> dict[str, str]:
    """extFields as written: keys and values strings, None values left out."""
    out = {}
    for key, value in ext.items():
        text = ext_value_text(value)
        if text is not None:
            out[str(key)] = text
    return out


def json_type_name(obj: object) -> str:
    if isinstance(obj, list):
        return "array"
    if isinstance(obj, str):
        return "string"
    if isinstance(obj, bool):
        return "boolean"
    if isinstance(obj, (int, float)):
        return "number"
    if obj is None:
        return "null"
    return "object"


def header_int(header: dict, key: str, default: int | None) -> int:
    """A 32-bit integer field of a decoded header (``default`` when absent; None: required)."""
    value = header.get(key)
    if value is None:
        if default is None:
            raise ProtocolError(f"header has no {key!r}, expected an integer")
        return default
    if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
        raise ProtocolError(f"header {key!r} is {value!r}, expected a 32-bit integer")
    return value


def text_or_none(value: object) -> str | None:
    if value is None or type(value) is str:
        return value
    return ext_value_text(value)


def parse_header(data) -> dict:
    """The JSON object of a header; ProtocolError for anything else."""
    try:
        header = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"header is not valid JSON ({exc})") from None
    if type(header) is not dict:
        raise ProtocolError(f"header is a JSON {json_type_name(header)}, expected an object")
    return header


def frame_length_error(total_length: int, max_frame_size: int) -> ProtocolError | None:
    if total_length > max_frame_size:
        return ProtocolError(f"frame length {total_length} exceeds max {max_frame_size}")
    if total_length < HEADER_LENGTH_SIZE:
        return ProtocolError(
            f"frame length {total_length} is shorter than its {HEADER_LENGTH_SIZE}-byte header length field"
        )
    return None


def header_length_error(word: int, total_length: int) -> ProtocolError | None:
    serialize_type = word >> SERIALIZE_TYPE_SHIFT
    if serialize_type != SERIALIZE_JSON:
        return ProtocolError(f"serialize type {serialize_type} not supported, expected {SERIALIZE_JSON} (JSON)")
    header_length = word & HEADER_LENGTH_MASK
    if header_length > total_length - HEADER_LENGTH_SIZE:
        return ProtocolError(
            f"header length {header_length} larger than the frame "
            f"({total_length - HEADER_LENGTH_SIZE} bytes after the length fields)"
        )
    return None


def body_parts(body) -> tuple[list, int]:
    """The buffers of a body (bytes or a list of buffers) and their total size in bytes."""
    if isinstance(body, (list, tuple)):
        parts = [part if isinstance(part, bytes) else memoryview(part).cast("B") for part in body]
        return parts, sum(len(part) for part in parts)
    if body is None:
        return [], 0
    if not isinstance(body, bytes):
        body = memoryview(body).cast("B")
    return [body], len(body)


def body_bytes(body: Body | None) -> bytes:
    """``body`` as one bytes object: a decoded command's body already is one (returned as is); the
    parts of a command built to be sent are joined."""
    if type(body) is bytes:
        return body
    return b"".join(body_parts(body)[0])


# ---------------------------------------------------------------------------------------------


class RemotingCommand:
    """One remoting request or response: the header fields plus a body.

    ``body`` is ``bytes`` or a list of buffers (written without copying, e.g. memoryviews of stored
    records). ``ext_fields`` maps strings to strings. ``cached_header`` (RocketMQ's cachedHeader) is
    the request's header as decoded by whoever read it first, never sent: on a broker, its ACL check
    and its processor read that one decode (``rmq.protocol.headers``).
    """

    __slots__ = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body", "cached_header")

    def __init__(
        self,
        code: int = 0,
        *,
        language: str = LANGUAGE,
        version: int = VERSION,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
    ):
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = {} if ext_fields is None else ext_fields
        self.body = body
        self.cached_header: object = None

    @classmethod
    def request(cls, code: int, ext_fields: dict | None = None, body: Body = b"") -> RemotingCommand:
        """A new request with a fresh opaque."""
        return cls(code, opaque=next_opaque(), ext_fields=ext_fields, body=body)

    @classmethod
    def response_to(
        cls,
        request: RemotingCommand,
        code: int,
        remark: str | None = None,
        ext_fields: dict | None = None,
        body: Body = b"",
    ) -> RemotingCommand:
        """The response to ``request``: same opaque, the response flag set."""
        return cls(code, opaque=request.opaque, flag=FLAG_RESPONSE, remark=remark, ext_fields=ext_fields, body=body)

    def ext_int(self, name: str, default: object = REQUIRED) -> int:
        """The ext field ``name`` as ``int(value)``: ``default`` when it is missing or empty (without
        one: KeyError); ValueError when it is no integer."""
        value = self.ext_fields.get(name)
        if value is None or value == "":
            if default is REQUIRED:
                raise KeyError(name)
            return default  # type: ignore[return-value]
        return int(value)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def __repr__(self) -> str:
        kind = "response" if self.flag & FLAG_RESPONSE else "request"
        return (
            f"<RemotingCommand {kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext_fields={self.ext_fields!r} body={body_parts(self.body)[1]} bytes>"
        )


def command_from_header(header: dict, body: bytes) -> RemotingCommand:
    cmd = RemotingCommand.__new__(RemotingCommand)
    cmd.code = header_int(header, "code", None)
    language = header.get("language", LANGUAGE_UNKNOWN)
    cmd.language = language if type(language) is str else str(language)
    cmd.version = header_int(header, "version", 0)
    cmd.opaque = header_int(header, "opaque", 0)
    cmd.flag = header_int(header, "flag", 0)
    cmd.remark = text_or_none(header.get("remark"))
    cmd.ext_fields = ext_fields_from_json(header.get("extFields"))
    cmd.body = body
    cmd.cached_header = None
    return cmd


def header_json(cmd: RemotingCommand) -> bytes:
    header = {
        "code": cmd.code,
        "language": cmd.language,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    ext = cmd.ext_fields
    if ext:
        for value in ext.values():
            if type(value) is not str:
                ext = ext_fields_for_wire(ext)
                break
    header["extFields"] = ext if ext is not None else {}
    return orjson.dumps(header)


def encode_head(cmd: RemotingCommand, body_length: int | None = None) -> bytes:
    """The length fields and JSON header of ``cmd``'s frame; its body is to be written right after."""
    if body_length is None:
        body_length = body_parts(cmd.body)[1]
    header = header_json(cmd)
    return _PREFIX.pack(HEADER_LENGTH_SIZE + len(header) + body_length, len(header)) + header


def encode_into(out: bytearray, cmd: RemotingCommand) -> int:
    """Append the whole frame of ``cmd`` (body copied) to ``out``; its length."""
    parts, size = body_parts(cmd.body)
    head = encode_head(cmd, size)
    out += head
    for part in parts:
        out += part
    return len(head) + size


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame of ``cmd`` as one bytes object."""
    out = bytearray()
    encode_into(out, cmd)
    return bytes(out)


class FrameDecoder:
    """Cuts a byte stream into RemotingCommands.

    ``feed(data)`` returns the commands completed by ``data``; at most one incomplete frame stays
    buffered (never more than ``max_frame_size + 4`` bytes). A ProtocolError leaves the decoder
    failed: the stream cannot be trusted past it, so every later feed raises the same error.
    """

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE_DEFAULT):
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._error: ProtocolError | None = None
        # frames a fast lane served (the compiled decoder's count; this twin takes no lane)
        self.lane_served = 0

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of their frame."""
        return len(self._buffer)

    def feed(
        self,
        data: bytes | bytearray | memoryview,
        lane: object = None,
        peer: object = None,
        out: object = None,
        out_limit: int = sys.maxsize,
    ) -> list[RemotingCommand]:
        """The commands completed by ``data``. (A fast lane is compiled: this twin takes none.)"""
        if lane is not None:
            raise TypeError("the pure-Python decoder has no fast lane")
        if self._error is not None:
            raise self._error
        buf = self._buffer
        buf += data
        commands = []
        pos = 0
        end = len(buf)
        try:
            while end - pos >= TOTAL_LENGTH_SIZE:
                (total_length,) = _LENGTH.unpack_from(buf, pos)
                error = frame_length_error(total_length, self.max_frame_size)
                if error is not None:
                    raise error
                frame_end = pos + TOTAL_LENGTH_SIZE + total_length
                if frame_end > end:
                    break
                (word,) = _LENGTH.unpack_from(buf, pos + TOTAL_LENGTH_SIZE)
                error = header_length_error(word, total_length)
                if error is not None:
                    raise error
                header_start = pos + PREFIX_SIZE
                body_start = header_start + (word & HEADER_LENGTH_MASK)
                with memoryview(buf) as view:
                    header = parse_header(view[header_start:body_start])
                commands.append(command_from_header(header, bytes(buf[body_start:frame_end])))
                pos = frame_end
        except ProtocolError as exc:
            self._error = exc
            self._buffer = bytearray()
            raise
        del buf[:pos]
        return commands


def decode_frames(data: bytes, max_frame_size: int = MAX_FRAME_SIZE_DEFAULT) -> list[RemotingCommand]:
    """Every command in ``data``, which must hold whole frames only."""
    decoder = FrameDecoder(max_frame_size)
    commands = decoder.feed(data)
    if decoder.buffered:
        raise ProtocolError(f"{decoder.buffered} bytes left after the last whole frame")
    return commands
