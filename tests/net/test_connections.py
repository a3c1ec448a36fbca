"""What a server allows a connection (``ConnectionLimits``): a frame or TLS handshake trickled in
slower than the frame timeout, connections past the maximum; the clients beside them stay served."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from rmq.net.server import ConnectionLimits, RemotingServer
from rmq.net.tls import TlsServerOptions, server_context
from rmq.protocol.codes import RequestCode
from rmq.protocol.tls import TlsMode
from tests.helpers import LOOPBACK, wait_until
from tests.helpers.frames import RawConnection, answer_route, route_request_frame, trickle_until_closed
from tests.helpers.tls import make_certificate

FRAME_TIMEOUT = 0.5


def serve(limits: ConnectionLimits, tls: TlsServerOptions | None = None) -> RemotingServer:
    srv = RemotingServer(LOOPBACK, 0, limits=limits, tls=tls)
    srv.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, answer_route)
    srv.start()
    return srv


@pytest.fixture
def strict_server() -> Iterator[RemotingServer]:
    """A frame may take FRAME_TIMEOUT seconds; idle connections are left alone for a minute."""
    srv = serve(ConnectionLimits(idle_timeout=60, frame_timeout=FRAME_TIMEOUT))
    yield srv
    srv.shutdown()


class Regular(threading.Thread):
    """A client sending a request every 20 ms on its own connection and reading each answer."""

    def __init__(self, port: int):
        super().__init__(name="regular-client")
        self.conn = RawConnection(port)
        self.answered = 0
        self.error: BaseException | None = None
        self._done = threading.Event()

    def run(self) -> None:
        try:
            while not self._done.is_set():
                self.conn.send(route_request_frame(self.answered))
                assert self.conn.read_commands(1, timeout=3.0)[0].opaque == self.answered
                self.answered += 1
                time.sleep(0.02)
        except BaseException as exc:
            self.error = exc

    def stop(self) -> int:
        self._done.set()
        self.join(10)
        self.conn.close()
        assert self.error is None, f"the regular client failed: {self.error!r}"
        return self.answered


def test_a_frame_trickled_in_is_closed_after_the_frame_timeout_beside_a_served_client(strict_server):
    regular = Regular(strict_server.port)
    regular.start()
    try:
        frame = route_request_frame(1) + b" " * 4000  # a byte every 20 ms never finishes it in time
        with socket.create_connection((LOOPBACK, strict_server.port), timeout=5) as loris:
            took = trickle_until_closed(loris, frame, interval=0.02, limit=10.0)
        # bytes kept coming (the idle timeout is a minute): it is the frame's age that closed it
        assert FRAME_TIMEOUT <= took, took
    finally:
        answered = regular.stop()
    assert answered >= 5  # answered all along


def test_slow_frames_that_each_finish_in_time_keep_their_connection(strict_server):
    """Each frame takes 60 % of the frame timeout, for several timeouts: the clock starts per frame."""
    with RawConnection(strict_server.port) as slow:
        for opaque in range(4):
            frame = route_request_frame(opaque)
            slow.send(frame[:10])
            time.sleep(FRAME_TIMEOUT * 0.6)
            slow.send(frame[10:])
            assert slow.read_commands(1)[0].opaque == opaque


def test_a_tls_handshake_trickled_in_is_closed_after_the_frame_timeout(tmp_path):
    certificate = make_certificate(tmp_path)
    tls = TlsServerOptions(server_context(str(certificate.cert), str(certificate.key)), TlsMode.PERMISSIVE)
    srv = serve(ConnectionLimits(idle_timeout=60, frame_timeout=FRAME_TIMEOUT), tls=tls)
    try:
        # a TLS record header announcing a 4000-byte ClientHello, then its bytes one by one
        hello = bytes([0x16, 0x03, 0x01, 0x0F, 0xA0, 0x01]) + bytes(4000)
        with socket.create_connection((LOOPBACK, srv.port), timeout=5) as loris:
            took = trickle_until_closed(loris, hello, interval=0.02, limit=10.0)
        assert FRAME_TIMEOUT <= took, took
        with RawConnection(srv.port) as plain:  # the server serves on
            plain.send(route_request_frame(7))
            assert plain.read_commands(1)[0].opaque == 7
    finally:
        srv.shutdown()


def test_connections_past_the_maximum_are_closed_at_once_and_those_inside_served(caplog):
    srv = serve(ConnectionLimits(max_connections=3))
    inside: list[RawConnection] = []
    try:
        for opaque in range(3):
            conn = RawConnection(srv.port)
            inside.append(conn)
            conn.send(route_request_frame(opaque))
            assert conn.read_commands(1)[0].opaque == opaque
        with caplog.at_level(logging.WARNING, logger="rmq.net.server"):
            for _ in range(20):
                with RawConnection(srv.port) as surplus:
                    assert surplus.is_closed_by_peer(timeout=3.0)
        assert srv.connections_refused == 20
        refusal_lines = [r for r in caplog.records if "maximum of 3 connections" in r.getMessage()]
        assert len(refusal_lines) == 1, [r.getMessage() for r in refusal_lines]  # a flood logs one line
        for opaque, conn in enumerate(inside):
            conn.send(route_request_frame(100 + opaque))
            assert conn.read_commands(1)[0].opaque == 100 + opaque
        # a place that frees up is taken by the next connection
        inside.pop().close()
        wait_until(lambda: len(srv.channels) == 2, 5, "the server saw the connection close")
        with RawConnection(srv.port) as later:
            later.send(route_request_frame(9))
            assert later.read_commands(1)[0].opaque == 9
    finally:
        for conn in inside:
            conn.close()
        srv.shutdown()
