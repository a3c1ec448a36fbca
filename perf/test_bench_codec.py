"""pytest-benchmark view of the frame codec (``python -m pytest perf/ --benchmark-only``): decode a
batch of 64 GET_ROUTEINFO requests and encode their answers, with each implementation.
perf/bench_net.py prints the same as frames/s, plus round trips over loopback."""

from __future__ import annotations

import pytest
from bench_net import FRAMES_PER_BATCH, ROUTE_BODY

from rmq.net import _codec, codec_py
from rmq.protocol.codes import RequestCode


@pytest.mark.parametrize("impl", [codec_py, _codec], ids=["pure", "compiled"])
def test_decode_and_encode_64_frames(benchmark, impl):
    request = impl.RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    stream = impl.encode(request) * FRAMES_PER_BATCH

    def round_trip() -> bytearray:
        out = bytearray()
        for cmd in impl.FrameDecoder().feed(stream):
            impl.encode_into(out, impl.RemotingCommand.response_to(cmd, 0, body=ROUTE_BODY))
        return out

    assert len(impl.decode_frames(bytes(benchmark(round_trip)))) == FRAMES_PER_BATCH
