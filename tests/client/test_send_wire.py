"""Send requests encoded straight to frames (``rmq.client.send_wire``), both twins: golden bytes, the
same bytes from each, and the fields a broker decodes equal to those of the generic codec's frame."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.client import _send_wire, send_wire_py
from rmq.net import codec_py
from rmq.net.frame import LANGUAGE, VERSION
from rmq.protocol.codes import RequestCode
from tests.helpers.twins import chosen_implementation

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)


@pytest.fixture(params=[send_wire_py, _send_wire], ids=["pure", "compiled"])
def wire(request):
    return request.param


def test_golden_frame(wire):
    fixed = wire.fixed_fields("grp", "TBW102", 4, False)
    fields = wire.message_fields(fixed, "T", 0, 1700000000000, 0, "UNIQ_KEY\x01AB\x02")
    frame = wire.send_frame(RequestCode.SEND_MESSAGE_V2, 9, fields, 3, b"hello")
    header = (
        b'{"code":310,"language":"%s","version":%d,"opaque":9,"flag":0,"extFields":{"a":"grp","c":"TBW102",'
        b'"d":"4","j":"0","k":"false","m":"false","b":"T","f":"0","g":"1700000000000","h":"0",'
        b'"i":"UNIQ_KEY\\u0001AB\\u0002","e":"3"}}'
    ) % (LANGUAGE.encode(), VERSION)
    assert frame == struct.pack(">II", 4 + len(header) + 5, len(header)) + header + b"hello"


def test_a_batch_says_so(wire):
    assert wire.fixed_fields("g", "TBW102", 8, True).endswith(b'"d":"8","j":"0","k":"false","m":"true"')


@settings(max_examples=100, deadline=None)
@given(text=st.text())
def test_strings_escaped_as_orjson_does(text):
    # the generic codec writes headers with orjson: a broker must read both alike
    expected = orjson.dumps(text)
    assert _send_wire.json_string(text) == expected
    assert send_wire_py.json_string(text) == expected


@settings(max_examples=60, deadline=None)
@given(
    group=st.text(min_size=1, max_size=40),
    topic=st.text(min_size=1, max_size=40),
    properties=st.text(max_size=200),
    sys_flag=INT64,
    born=INT64,
    flag=INT64,
    queue_nums=INT32,
    queue_id=INT32,
    opaque=INT32,
    code=INT32,
    body=st.binary(max_size=64),
    batch=st.booleans(),
)
def test_twins_write_the_same_frame_the_generic_codec_reads(
    group, topic, properties, sys_flag, born, flag, queue_nums, queue_id, opaque, code, body, batch
):
    frames = []
    for wire in (send_wire_py, _send_wire):
        fields = wire.message_fields(
            wire.fixed_fields(group, "TBW102", queue_nums, batch), topic, sys_flag, born, flag, properties
        )
        frames.append(wire.send_frame(code, opaque, fields, queue_id, body))
    assert frames[0] == frames[1]
    [cmd] = codec_py.decode_frames(frames[1])
    assert (cmd.code, cmd.opaque, cmd.language, cmd.version, cmd.flag, bytes(cmd.body)) == (
        code, opaque, LANGUAGE, VERSION, 0, body,
    )  # fmt: skip
    assert cmd.ext_fields == {
        "a": group, "b": topic, "c": "TBW102", "d": str(queue_nums), "e": str(queue_id), "f": str(sys_flag),
        "g": str(born), "h": str(flag), "i": properties, "j": "0", "k": "false", "m": "true" if batch else "false",
    }  # fmt: skip


def test_surrogates_are_refused_by_both(wire):
    with pytest.raises(UnicodeEncodeError):
        wire.message_fields(b'"a":"g"', "T\ud800", 0, 0, 0, "")


@pytest.mark.parametrize(("flag", "expected"), [("0", "_send_wire"), ("1", "send_wire_py")])
def test_rmq_no_extensions_picks_the_pure_twin(flag, expected):
    assert chosen_implementation("rmq.client.send_wire", flag) == expected


def test_a_frame_without_its_body_is_the_head_of_the_whole(wire):
    fields = wire.message_fields(wire.fixed_fields("g", "TBW102", 4, True), "T", 0, 1, 0, "")
    body = bytes(range(256)) * 100
    whole = wire.send_frame(RequestCode.SEND_BATCH_MESSAGE, 5, fields, 2, body)
    head = wire.send_frame(RequestCode.SEND_BATCH_MESSAGE, 5, fields, 2, body, with_body=False)
    assert head + body == whole
