"""The epoll server against raw sockets: answers in any order, oneway, bad input, idle connections,
peers that never read, shutdown."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

from rmq.net.codec import RemotingCommand
from rmq.net.server import ConnectionLimits, RemotingServer
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import LOOPBACK, wait_until
from tests.helpers.frames import RawConnection, raw_frame, route_body, route_request_frame


def test_answers_a_route_request(server):
    with RawConnection(server.port) as conn:
        conn.send(route_request_frame(5))
        [answer] = conn.read_commands(1)
    assert (answer.code, answer.opaque, answer.is_response, answer.body) == (0, 5, True, route_body())


def test_answers_out_of_order_matched_by_opaque(server):
    parked = []
    server.register_processor(RequestCode.PULL_MESSAGE, lambda channel, request: parked.append((channel, request)))
    pull = raw_frame(b'{"code":11,"opaque":1,"flag":0,"extFields":{"queueId":0}}')
    with RawConnection(server.port) as conn:
        conn.send(pull + route_request_frame(2))
        [first] = conn.read_commands(1)
        assert first.opaque == 2  # the route answer overtook the parked pull
        channel, request = parked[0]
        # answered later from another thread, as the store's flush thread will
        threading.Thread(
            target=channel.send_response,
            args=(RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields={"nextBeginOffset": 3}),),
        ).start()
        [second] = conn.read_commands(1)
    assert (second.opaque, second.code, second.ext_fields) == (1, 0, {"nextBeginOffset": "3"})


def test_oneway_gets_no_answer(server):
    seen = []
    server.register_processor(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        lambda channel, request: seen.append(request) or RemotingCommand.response_to(request, 0),
    )
    with RawConnection(server.port) as conn:
        conn.send(raw_frame(b'{"code":15,"opaque":1,"flag":2}') + route_request_frame(2))
        [answer] = conn.read_commands(1)
    assert answer.opaque == 2
    assert len(seen) == 1 and seen[0].is_oneway


def test_unknown_code_and_failing_handler_keep_the_connection(server, caplog):
    def fail(channel, request):
        raise ValueError("no such topic table")

    server.register_processor(RequestCode.HEART_BEAT, fail)
    with RawConnection(server.port) as conn:
        conn.send(
            raw_frame(b'{"code":4242,"opaque":1}') + raw_frame(b'{"code":34,"opaque":2}') + route_request_frame(3)
        )
        unknown, failed, route = conn.read_commands(3)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert unknown.remark == "request code 4242 not supported"
    assert failed.code == ResponseCode.SYSTEM_ERROR and "no such topic table" in failed.remark
    assert route.code == ResponseCode.SUCCESS
    assert "processor for request code 34" in caplog.text


def test_default_processor_takes_unregistered_codes(server):
    server.register_default_processor(
        lambda channel, request: RemotingCommand.response_to(request, 0, remark="default")
    )
    with RawConnection(server.port) as conn:
        conn.send(raw_frame(b'{"code":4242,"opaque":1}'))
        [answer] = conn.read_commands(1)
    assert answer.remark == "default"


def test_bad_frame_closes_only_its_connection(server, caplog):
    with RawConnection(server.port) as good, RawConnection(server.port) as bad:
        bad.send(struct.pack(">i", 0x7FFFFFFF))
        assert bad.is_closed_by_peer()
        good.send(route_request_frame(1))
        assert good.read_commands(1)[0].opaque == 1
    assert "frame length 2147483647 exceeds max 16777216" in caplog.text


def test_idle_connection_is_closed():
    srv = RemotingServer(LOOPBACK, 0, limits=ConnectionLimits(idle_timeout=0.3))
    srv.start()
    try:
        with RawConnection(srv.port) as silent:
            started = time.monotonic()
            assert silent.is_closed_by_peer(timeout=3.0)
            assert 0.25 < time.monotonic() - started  # not before its idle time
    finally:
        srv.shutdown()


def test_peer_that_never_reads_is_held_back():
    limit = 256 * 1024
    answer = b"x" * 32 * 1024
    srv = RemotingServer(LOOPBACK, 0, max_pending_output=limit)
    srv.register_processor(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        lambda channel, request: RemotingCommand.response_to(request, 0, body=answer),
    )
    srv.start()
    try:
        greedy = socket.socket()
        greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        greedy.connect((LOOPBACK, srv.port))
        greedy.settimeout(0.2)
        requests = b"".join(route_request_frame(i) for i in range(3000))  # ~100 MB of answers if unchecked
        try:
            greedy.sendall(requests)
        except TimeoutError:
            pass  # the server stopped reading us: exactly the point
        [channel] = wait_until(lambda: srv.channels, 10, "the server accepted the greedy peer")
        # past the limit the server pauses the peer's input: the backlog stops there. Once paused it
        # flushes what the kernel takes and stays paused above half the limit (its resume mark), so
        # the backlog is seen above the limit only for a moment: wait for it above half of it.
        wait_until(
            lambda: channel.pending_output > limit // 2, 10, "the greedy peer's unsent answers past the resume mark"
        )
        assert channel.pending_output <= limit + len(answer) + 1024
        with RawConnection(srv.port) as polite:
            polite.send(route_request_frame(1))
            assert polite.read_commands(1)[0].opaque == 1
        # the loop went round since: had it kept reading the greedy peer, the backlog would have grown
        assert channel.pending_output <= limit + len(answer) + 1024
        # once the greedy peer reads, it gets every answer
        greedy.settimeout(5.0)
        decoder_bytes = 0
        wanted = 3000 * (len(answer) + 8)
        while decoder_bytes < wanted:
            chunk = greedy.recv(1 << 20)
            assert chunk, "server closed the slow reader"
            decoder_bytes += len(chunk)
        greedy.close()
    finally:
        srv.shutdown()


def test_channel_closed_hook_and_remote_address(server):
    closed = threading.Event()
    seen = []
    server.on_channel_closed(lambda channel: (seen.append(channel.remote_address), closed.set()))
    with RawConnection(server.port) as conn:
        local = "{}:{}".format(*conn.sock.getsockname())
        conn.send(route_request_frame(1))
        conn.read_commands(1)
        assert [c.remote_address for c in server.channels] == [local]
    assert closed.wait(2.0)
    assert seen == [local]


def test_shutdown_closes_connections_and_joins_its_thread():
    srv = RemotingServer(LOOPBACK, 0)
    srv.start()
    port = srv.port
    conn = RawConnection(port)
    srv.shutdown()
    assert conn.is_closed_by_peer(1.0)
    conn.close()
    assert not [t for t in threading.enumerate() if t.name == srv.loop.name]
    with pytest.raises(OSError):
        socket.create_connection((LOOPBACK, port), timeout=1.0).close()


def test_serve_forever_runs_in_the_calling_thread():
    srv = RemotingServer(LOOPBACK, 0)
    srv.register_processor(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, lambda channel, request: RemotingCommand.response_to(request, 0)
    )
    thread = threading.Thread(target=srv.serve_forever)
    thread.start()
    wait_until(lambda: srv._listener is not None, 10, "the server listening")
    with RawConnection(srv.port) as conn:
        conn.send(route_request_frame(1))
        assert conn.read_commands(1)[0].opaque == 1
    srv.shutdown()
    thread.join(5)
    assert not thread.is_alive()


def test_response_ext_fields_are_strings_on_the_wire(server):
    server.register_processor(
        RequestCode.QUERY_CONSUMER_OFFSET,
        lambda channel, request: RemotingCommand.response_to(request, 0, ext_fields={"offset": 0}),
    )
    with RawConnection(server.port) as conn:
        conn.send(raw_frame(b'{"code":14,"opaque":1}'))
        conn.sock.settimeout(5)
        data = b""
        while len(data) < 8 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            data += conn.sock.recv(4096)
    header_length = struct.unpack_from(">i", data, 4)[0]
    assert json.loads(data[8 : 8 + header_length])["extFields"] == {"offset": "0"}


def test_large_body_parts_are_written_whole(server):
    records = [bytes(range(256)) * 400, b"y" * 300_000, b"z" * 10]
    server.register_processor(
        RequestCode.PULL_MESSAGE,
        lambda channel, request: RemotingCommand.response_to(request, 0, body=[memoryview(r) for r in records]),
    )
    with RawConnection(server.port) as conn:
        conn.send(raw_frame(b'{"code":11,"opaque":1}') + route_request_frame(2))
        pulled, route = conn.read_commands(2)
    assert pulled.body == b"".join(records)
    assert route.opaque == 2


def test_unencodable_answer_is_dropped_and_the_connection_kept(server, caplog):
    server.register_processor(
        RequestCode.HEART_BEAT, lambda channel, request: RemotingCommand.response_to(request, 0, body=object())
    )
    with RawConnection(server.port) as conn:
        conn.send(raw_frame(b'{"code":34,"opaque":1}') + route_request_frame(2))
        [answer] = conn.read_commands(1)
    assert answer.opaque == 2
    assert "cannot encode" in caplog.text
