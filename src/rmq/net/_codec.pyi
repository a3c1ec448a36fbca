# Stub of the compiled frame codec; codec_py.py is the same API in pure Python.

from collections.abc import Callable

from typing_extensions import disjoint_base

from rmq.net.codec_py import Body
from rmq.net.frame import LANGUAGE as LANGUAGE
from rmq.net.frame import MAX_FRAME_SIZE_DEFAULT as MAX_FRAME_SIZE_DEFAULT
from rmq.net.frame import VERSION as VERSION

LAYOUT: dict[str, int]

@disjoint_base
class RemotingCommand:
    code: int
    language: str
    version: int
    opaque: int
    flag: int
    remark: str | None
    ext_fields: dict[str, str]
    body: Body
    cached_header: object
    def __init__(
        self,
        code: int = 0,
        *,
        language: str = ...,
        version: int = ...,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
    ) -> None: ...
    @classmethod
    def request(cls, code: int, ext_fields: dict | None = None, body: Body = b"") -> RemotingCommand: ...
    @classmethod
    def response_to(
        cls,
        request: RemotingCommand,
        code: int,
        remark: str | None = None,
        ext_fields: dict | None = None,
        body: Body = b"",
    ) -> RemotingCommand: ...
    def ext_int(self, name: str, default: object = ...) -> int: ...
    @property
    def is_response(self) -> bool: ...
    @property
    def is_oneway(self) -> bool: ...

@disjoint_base
class FastLane:
    def connect(self, remote_address: str, deliver: Callable[[bytearray], object] | None = None) -> object: ...

@disjoint_base
class FrameDecoder:
    max_frame_size: int
    lane_served: int
    def __init__(self, max_frame_size: int = ...) -> None: ...
    @property
    def buffered(self) -> int: ...
    def feed(
        self,
        data: bytes | bytearray | memoryview,
        lane: FastLane | None = None,
        peer: object = None,
        out: bytearray | None = None,
        out_limit: int = ...,
    ) -> list[RemotingCommand]: ...

def encode_head(cmd: RemotingCommand, body_length: int | None = None) -> bytes: ...
def encode_into(out: bytearray, cmd: RemotingCommand) -> int: ...
def encode(cmd: RemotingCommand) -> bytes: ...
def decode_frames(data: bytes | bytearray | memoryview, max_frame_size: int = ...) -> list[RemotingCommand]: ...
