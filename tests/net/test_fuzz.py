"""Property-based fuzzing of the frame decoder (both implementations) and of a live server."""

from __future__ import annotations

import itertools
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.errors import ProtocolError
from rmq.net import _codec, codec_py
from rmq.net.server import ConnectionLimits, RemotingServer
from rmq.protocol.codes import RequestCode
from tests.helpers import LOOPBACK
from tests.helpers.frames import RawConnection, answer_route, raw_frame, route_request_frame

IMPLEMENTATIONS = pytest.mark.parametrize("impl", [codec_py, _codec], ids=["pure", "compiled"])
SMALL_MAX = 4096

ext_values = st.one_of(st.text(max_size=20), st.integers(-(2**63), 2**63 - 1), st.booleans())
commands = st.builds(
    dict,
    code=st.integers(-(2**31), 2**31 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.one_of(st.none(), st.text(max_size=30)),
    ext_fields=st.dictionaries(st.text(max_size=10), ext_values, max_size=5),
    body=st.binary(max_size=200),
)


def command(impl, f: dict):
    """A RemotingCommand of twin ``impl`` from drawn ``commands`` fields."""
    return impl.RemotingCommand(
        f["code"], opaque=f["opaque"], flag=f["flag"], remark=f["remark"], ext_fields=f["ext_fields"], body=f["body"]
    )


@IMPLEMENTATIONS
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(0, 600), max_size=6))
def test_arbitrary_bytes_give_commands_or_protocol_error(impl, data, cuts):
    decoder = impl.FrameDecoder(max_frame_size=SMALL_MAX)
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    try:
        for start, end in itertools.pairwise(bounds):
            for cmd in decoder.feed(data[start:end]):
                assert all(type(v) is str for v in cmd.ext_fields.values())
            assert decoder.buffered <= SMALL_MAX + 4
    except ProtocolError:
        pass


@IMPLEMENTATIONS
@settings(max_examples=200, deadline=None)
@given(fields=st.lists(commands, min_size=1, max_size=4), chunk=st.integers(1, 64))
def test_encoded_commands_decode_to_themselves(impl, fields, chunk):
    sent = [command(impl, f) for f in fields]
    stream = b"".join(impl.encode(cmd) for cmd in sent)
    decoder = impl.FrameDecoder()
    got = []
    for i in range(0, len(stream), chunk):
        got += decoder.feed(stream[i : i + chunk])
    assert len(got) == len(sent)
    for before, after in zip(sent, got, strict=True):
        assert (after.code, after.opaque, after.flag, after.remark, after.body) == (
            before.code,
            before.opaque,
            before.flag,
            before.remark,
            before.body,
        )
        expected_ext = {k: codec_py.ext_value_text(v) for k, v in before.ext_fields.items()}
        assert after.ext_fields == expected_ext
    # the other implementation reads the same bytes the same way
    other = _codec if impl is codec_py else codec_py
    assert [c.opaque for c in other.decode_frames(stream)] == [c.opaque for c in got]


def _decoded(impl, data: bytes):
    """What one twin makes of ``data``: the commands' fields, or the ProtocolError's class."""
    try:
        return [
            (c.code, c.opaque, c.flag, c.remark, c.ext_fields, bytes(c.body or b""))
            for c in impl.FrameDecoder(max_frame_size=SMALL_MAX).feed(data)
        ]
    except ProtocolError:
        return ProtocolError


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=400)
    | st.builds(
        lambda header, body: raw_frame(header, body),
        st.one_of(
            st.binary(max_size=80),
            st.dictionaries(st.sampled_from(["code", "opaque", "flag", "remark", "extFields", "x"]), ext_values).map(
                lambda d: json.dumps(d).encode()
            ),
        ),
        st.binary(max_size=40),
    )
)
def test_both_twins_read_any_bytes_alike(data):
    assert _decoded(codec_py, data) == _decoded(_codec, data)


@settings(max_examples=200, deadline=None)
@given(fields=commands)
def test_both_twins_encode_a_command_to_the_same_bytes(fields):
    assert codec_py.encode(command(codec_py, fields)) == _codec.encode(command(_codec, fields))


BAD_INPUTS = st.one_of(
    st.binary(min_size=1, max_size=300),  # random bytes
    st.builds(lambda n: route_request_frame(1)[:n], st.integers(1, 40)),  # a truncated frame
    st.integers(SMALL_MAX + 1, 2**32 - 1).map(lambda n: struct.pack(">I", n)),  # oversized length
    st.integers(5, 2**24 - 1).map(lambda n: struct.pack(">ii", 4, n)),  # header length > frame
    st.binary(min_size=1, max_size=40).map(lambda b: raw_frame(b"{" + b)),  # invalid JSON
    st.sampled_from([b"[]", b"1", b'"x"', b"null", b"true"]).map(raw_frame),  # not an object
    st.integers(1000, 2**31 - 1).map(lambda c: raw_frame(b'{"code":%d,"opaque":9}' % c)),  # unknown code
)


@pytest.fixture(scope="module")
def fuzz_server():
    srv = RemotingServer(LOOPBACK, 0, max_frame_size=SMALL_MAX, limits=ConnectionLimits(idle_timeout=5.0))
    srv.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, answer_route)
    srv.start()
    good = RawConnection(srv.port)
    # One round trip, so the server has accepted this connection before any test counts descriptors.
    good.send(route_request_frame(1))
    good.read_commands(1)
    yield srv, good
    good.close()
    srv.shutdown()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=BAD_INPUTS, hang_up=st.booleans())
def test_server_keeps_serving_after_bad_input(fuzz_server, bad, hang_up):
    srv, good = fuzz_server
    with RawConnection(srv.port) as offender:
        offender.send(bad)
        if not hang_up:
            good.send(route_request_frame(77))
            [answer] = good.read_commands(1)
            assert answer.opaque == 77
    good.send(route_request_frame(78))
    [answer] = good.read_commands(1)
    assert (answer.opaque, answer.code) == (78, 0)
