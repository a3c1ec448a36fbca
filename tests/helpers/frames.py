"""Remoting frames built by hand (docs/protocol.md#frame), independently of the codec under test, and a
blocking socket that reads whole frames."""

from __future__ import annotations

import socket
import struct
import time

from rmq.net import codec_py
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import ResponseCode
from tests.helpers import LOOPBACK


def route_body() -> bytes:
    """A GET_ROUTEINFO_BY_TOPIC answer body as docs/nameserver.md#routes shows it (~300 bytes)."""
    return (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
        b'"perm":6,"readQueueNums":4,"writeQueueNums":4,"topicSysFlag":0}]}'
    )


def answer_route(channel, request):
    """A GET_ROUTEINFO_BY_TOPIC processor that always answers ``route_body()``."""
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=route_body())


def raw_frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame built by hand, independently of the codec under test (docs/protocol.md#frame)."""
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def route_request_frame(opaque: int) -> bytes:
    header = b'{"code":105,"language":"JAVA","version":399,"opaque":%d,"flag":0,"extFields":{"topic":"T"}}' % opaque
    return raw_frame(header)


class RawConnection:
    """A plain blocking socket to the server that reads whole frames (decoded by the pure codec)."""

    def __init__(self, port: int, timeout: float = 5.0, receive_buffer: int | None = None):
        """``receive_buffer``: the socket's SO_RCVBUF, set before it connects (the window it offers)."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect((LOOPBACK, port))
        except OSError:
            self.sock.close()
            raise
        self.decoder = codec_py.FrameDecoder()
        self.received: list = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_commands(self, count: int, timeout: float = 5.0) -> list:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            self.received.extend(self.decoder.feed(data))
        taken, self.received = self.received[:count], self.received[count:]
        return taken

    def is_closed_by_peer(self, timeout: float = 3.0) -> bool:
        """True once the server closes this connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def trickle_until_closed(sock: socket.socket, data: bytes, interval: float, limit: float) -> float:
    """Send ``data`` a byte every ``interval`` seconds until the server closes ``sock``; the seconds
    that took (AssertionError past ``limit``)."""
    started = time.monotonic()
    sock.settimeout(interval)
    for byte in data:
        try:
            sock.send(bytes([byte]))
            if sock.recv(1) == b"":
                return time.monotonic() - started
        except TimeoutError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
        assert time.monotonic() - started < limit, f"still open after {limit} s of trickling"
    raise AssertionError("the whole frame went through: make it longer")


def refused(port: int, payload: bytes) -> bool:
    """Send ``payload`` to a master's HA port; True once the master closed the connection."""
    with socket.create_connection((LOOPBACK, port), timeout=5) as s:
        s.sendall(payload)
        s.settimeout(5)
        try:
            while s.recv(65536):
                pass
        except (TimeoutError, ConnectionResetError):
            return False
        return True
