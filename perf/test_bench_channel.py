"""pytest-benchmark view of one connection's request path on the loop (``python -m pytest
perf/test_bench_channel.py --benchmark-only``): 64 decoded requests handed to their processor, the
64 answers queued and written to a socket, and read by the peer. What the unsent-output accounting
(``rmq.net.channel.OutputAccount``: a sum on each queue and write, a comparison per request) costs is
this figure against the same on the revision before it."""

from __future__ import annotations

import socket

from bench_net import FRAMES_PER_BATCH, ROUTE_BODY

from rmq.net.channel import Channel, Endpoint
from rmq.net.codec import FrameDecoder, RemotingCommand, encode
from rmq.net.loop import EventLoop
from rmq.protocol.codes import RequestCode


def test_handle_and_write_64_requests(benchmark):
    loop = EventLoop("bench")
    endpoint = Endpoint()
    endpoint.register_processor(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        lambda channel, request: RemotingCommand.response_to(request, 0, body=ROUTE_BODY),
    )
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    channel = Channel(loop, ours, endpoint, "bench-peer")
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    commands = FrameDecoder().feed(encode(request) * FRAMES_PER_BATCH)
    answer_bytes = len(encode(RemotingCommand.response_to(request, 0, body=ROUTE_BODY))) * FRAMES_PER_BATCH

    def serve() -> int:
        channel._handle(commands)
        loop._dirty.clear()  # the loop would flush once at the end of its pass: so do we
        channel._flush()
        received = 0
        while received < answer_bytes:
            received += len(peer.recv(1 << 20))
        return received

    try:
        assert benchmark(serve) == answer_bytes
    finally:
        channel._close(None)
        peer.close()
        loop.close()
