"""A pipelined remoting connection for load generation: pre-encoded frames on a raw socket.

The SDK answers one future per request through the client's event loop; a load generator needs far
less per request, so that the broker, not the generator, is what a figure measures. Frames of one
kind are encoded once (``FrameTemplate``); only their opaque changes from request to request, a
10-digit number patched into the header's JSON, so an answer (matched by the opaque it echoes) finds
its request without decoding more than two numbers of its header.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable

from rmq.net.codec import RemotingCommand, encode
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import MessageProperty, encode_properties
from rmq.protocol.request_flags import PullSysFlag

# Opaques of template frames: every one has 10 digits, so a frame's length never changes.
OPAQUE_BASE = 1_000_000_000
OPAQUE_SPAN = 999_999_999
_OPAQUE_MARK = b'"opaque":' + str(OPAQUE_BASE).encode()
BORN_MARK = 1_000_000_000_000
_BORN_FIELD = b'"g":"%d"' % BORN_MARK
_CODE = re.compile(rb'"code":(-?\d+)')
_OPAQUE = re.compile(rb'"opaque":(\d+)')
_OPAQUE_KEY = b'"opaque":'
_DIGITS = re.compile(rb"\d+")
_SUCCESS = int(ResponseCode.SUCCESS)
_SUCCESS_HEAD = b'{"code":%d,' % _SUCCESS


# The producer group and unique key the frames carry: the broker stores them, nothing reads them.
PRODUCER_GROUP = "rmq-perf-producer"
# The group pulls are made for: they commit no offset, so nothing reads it either.
PULL_GROUP = "rmq-perf-consumer"
# PullMessageRequestHeader's sysFlag: SUBSCRIPTION (the request carries its expression), and no
# SUSPEND: a pull past the end is answered at once, not parked
PULL_SYS_FLAG = PullSysFlag.SUBSCRIPTION
# a stored record opens with its int32 totalSize, which counts these 4 bytes too
RECORD_SIZE_FIELD = 4
_UNIQ_KEY = "0A00000100002A9F0000000000000000"


class FrameTemplate:
    """One encoded send whose opaque and born timestamp ``frame(opaque, born_ms)`` replaces
    (OPAQUE_BASE <= opaque < 2e9; a 13-digit millisecond timestamp, as every one until 2286).
    The request must be born at BORN_MARK (``send_request(..., born_ms=BORN_MARK)``)."""

    __slots__ = ("_head", "_middle", "_tail")

    def __init__(self, request: RemotingCommand):
        request.opaque = OPAQUE_BASE
        data = encode(request)
        at = data.index(_OPAQUE_MARK) + len(_OPAQUE_MARK) - 10
        born = data.index(_BORN_FIELD, at) + len(_BORN_FIELD) - 14
        self._head, self._middle, self._tail = data[:at], data[at + 10 : born], data[born + 13 :]

    def frame(self, opaque: int, born_ms: bytes) -> bytes:
        """``born_ms``: ``b"%d" % ms``, made once for all the frames of a burst."""
        return self._head + str(opaque).encode() + self._middle + born_ms + self._tail

    def marked(self) -> tuple[bytes, int, int]:
        """The frame with OPAQUE_BASE and BORN_MARK in it, and where their digits start: what the
        compiled loop patches in place."""
        opaque_at = len(self._head)
        return self.frame(OPAQUE_BASE, b"%d" % BORN_MARK), opaque_at, opaque_at + 10 + len(self._middle)

    def parts(self, opaque: int, born_ms: bytes) -> tuple[bytes, bytes, bytes, bytes, bytes]:
        """``frame``'s pieces, for one ``b"".join`` over a whole burst (one copy of each byte)."""
        return self._head, b"%d" % opaque, self._middle, born_ms, self._tail


def send_request(
    topic: str, queue_id: int, body: bytes, batch: int = 1, tags: str = "", born_ms: int | None = None
) -> RemotingCommand:
    """SEND_MESSAGE_V2 of one message, or SEND_BATCH_MESSAGE of ``batch`` copies of it, waiting for
    the store (WAIT=true), as a RocketMQ producer sends them; born now unless ``born_ms`` (BORN_MARK
    for a FrameTemplate)."""
    ext = {
        "a": PRODUCER_GROUP,
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": str(int(time.time() * 1000) if born_ms is None else born_ms),
        "h": "0",
        "i": "",
        "j": "0",
        "k": "false",
        "m": "false",
    }
    fields = {MessageProperty.UNIQ_KEY: _UNIQ_KEY, MessageProperty.WAIT_STORE_MSG_OK: "true"}
    if tags:
        fields[MessageProperty.TAGS] = tags
    props = encode_properties(fields)
    if batch <= 1:
        ext["i"] = props.decode()
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body)
    ext["m"] = "true"
    # rmq.protocol.batch's body: per message totalSize, magic, bodyCRC, flag, body, properties
    one = bytearray()
    total = 20 + len(body) + 2 + len(props)
    one += total.to_bytes(4, "big") + bytes(8) + bytes(4) + len(body).to_bytes(4, "big") + body
    one += len(props).to_bytes(2, "big") + props
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, bytes(one) * batch)


def pull_request(topic: str, queue_id: int, offset: int, max_nums: int) -> RemotingCommand:
    """PULL_MESSAGE of up to ``max_nums`` messages of every tag from ``offset``, as a RocketMQ push
    consumer's first pull of a queue asks (no commit, not held when there is nothing to pull)."""
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": PULL_GROUP,
            "topic": topic,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_nums),
            "sysFlag": str(PULL_SYS_FLAG),
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
            "expressionType": "TAG",
        },
    )


def marked_pull(request: RemotingCommand) -> tuple[bytes, int, int]:
    """A pull of offset 0 encoded with OPAQUE_BASE, where its opaque's digits start and where its
    queueOffset's "0" is: what the compiled loop writes each request's offset in place of."""
    request.opaque = OPAQUE_BASE
    data = encode(request)
    offset_mark = b'"queueOffset":"0"'
    if request.ext_fields.get("queueOffset") != "0" or data.count(offset_mark) != 1:
        raise ValueError("marked_pull needs a pull of queueOffset 0")
    opaque_at = data.index(_OPAQUE_MARK) + len(_OPAQUE_MARK) - 10
    return data, opaque_at, data.index(offset_mark) + len(offset_mark) - 2


def record_count(body: bytes) -> int:
    """The stored records back to back in a pull's ``body``, by their totalSize; -1 when their sizes
    do not add up to it."""
    n = pos = 0
    while pos < len(body):
        size = int.from_bytes(body[pos : pos + RECORD_SIZE_FIELD], "big")
        if len(body) - pos < RECORD_SIZE_FIELD or not RECORD_SIZE_FIELD <= size <= len(body) - pos:
            return -1
        pos += size
        n += 1
    return n


def answer_code(header: bytes) -> int:
    """The response code in a raw header (-1 when it has none)."""
    m = _CODE.search(header)
    return int(m.group(1)) if m else -1


def answer_opaque(header: bytes) -> int:
    m = _OPAQUE.search(header)
    return int(m.group(1)) if m else -1


def take_answers(buf: bytearray) -> list[tuple[int, int]]:
    """(opaque, code) of the complete frames at the start of ``buf``, removed from it: the two
    numbers read where they are in the header's JSON, nothing copied or decoded besides them
    (-1 for a number the header lacks)."""
    out = []
    pos = 0
    end = len(buf)
    find, starts, digits = buf.find, buf.startswith, _DIGITS.match
    while end - pos >= 8:
        frame_end = pos + 4 + int.from_bytes(buf[pos : pos + 4], "big")
        if frame_end > end:
            break
        header = pos + 8
        header_end = header + (int.from_bytes(buf[pos + 4 : pos + 8], "big") & 0xFFFFFF)
        if starts(_SUCCESS_HEAD, header):  # rmq's answers begin so: no search for the code
            code = _SUCCESS
        else:
            found = _CODE.search(buf, header, header_end)
            code = int(found.group(1)) if found else -1
        at = find(_OPAQUE_KEY, header, header_end)
        number = digits(buf, at + len(_OPAQUE_KEY), header_end) if at >= 0 else None
        out.append((int(number.group()) if number else -1, code))
        pos = frame_end
    del buf[:pos]
    return out


def take_frames(buf: bytearray) -> list[tuple[bytes, bytes]]:
    """The complete frames at the start of ``buf`` as (header, body), removed from it."""
    out = []
    pos = 0
    while len(buf) - pos >= 8:
        total = int.from_bytes(buf[pos : pos + 4], "big")
        if len(buf) - pos - 4 < total:
            break
        header_len = int.from_bytes(buf[pos + 4 : pos + 8], "big") & 0xFFFFFF
        header = bytes(buf[pos + 8 : pos + 8 + header_len])
        body = bytes(buf[pos + 8 + header_len : pos + 4 + total]) if total - 4 - header_len else b""
        out.append((header, body))
        pos += 4 + total
    del buf[:pos]
    return out


class Pipeline:
    """A raw remoting connection that keeps requests outstanding; answers read as (header, body)."""

    def __init__(self, host: str, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answers(self) -> list[tuple[bytes, bytes]]:
        """Read what is there (blocking for at least one byte); the complete frames as (header, body)."""
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the broker closed the connection")
        self.buffer += data
        return take_frames(self.buffer)

    def call(self, request: RemotingCommand) -> tuple[bytes, bytes]:
        """One request, its answer (nothing else may be outstanding)."""
        self.sock.sendall(encode(request))
        while True:
            answers = self.answers()
            if answers:
                return answers[0]

    def run(
        self,
        next_frame: Callable[[], bytes],
        in_flight: int,
        seconds: float,
        on_answer: Callable[[bytes, bytes], int] | None = None,
    ) -> int:
        """Send ``next_frame()`` keeping ``in_flight`` outstanding for ``seconds``; the number of
        answers with code 0 (``on_answer(header, body)`` may count differently and returns the count)."""
        ok = 0
        deadline = time.perf_counter() + seconds
        self.sock.sendall(b"".join(next_frame() for _ in range(in_flight)))
        outstanding = in_flight
        sending = True
        while outstanding:
            answers = self.answers()
            outstanding -= len(answers)
            for header, body in answers:
                if on_answer is not None:
                    ok += on_answer(header, body)
                elif answer_code(header) == _SUCCESS:
                    ok += 1
            if sending and time.perf_counter() >= deadline:
                sending = False
            if sending and answers:
                self.sock.sendall(b"".join(next_frame() for _ in range(len(answers))))
                outstanding += len(answers)
        return ok
