"""Golden frames (bytes built here with struct and literal JSON, docs/protocol.md#frame), both directions,
against both codec implementations."""

from __future__ import annotations

import json
import struct

import pytest

from rmq.errors import ProtocolError
from rmq.net import _codec, codec_py
from rmq.net.frame import FLAG_ONEWAY, FLAG_RESPONSE, LANGUAGE, VERSION
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers.frames import raw_frame
from tests.helpers.twins import chosen_implementation

# A GET_ROUTEINFO_BY_TOPIC request the way a Java client writes it: keys sorted, numeric and boolean
# ext values, ACL keys nobody asked for, no remark, a trailing newline after the JSON.
JAVA_HEADER = (
    b'{"code":105,"extFields":{"AccessKey":"ak","Signature":"c2ln","topic":"TopicTest","queueId":3,'
    b'"unitMode":false,"ratio":0.5},"flag":0,"language":"JAVA","opaque":42,'
    b'"serializeTypeCurrentRPC":"JSON","version":399}\n'
)
# A oneway UPDATE_CONSUMER_OFFSET as a JavaScript client writes it: its own key order, a null remark.
NODE_HEADER = (
    b'{"code":15,"language":"JAVA","opaque":7,"flag":2,"version":1,"remark":null,'
    b'"extFields":{"consumerGroup":"g","topic":"T","queueId":"0","commitOffset":128}}  \r\n'
)


def test_layout_constants_agree():
    for name, value in _codec.LAYOUT.items():
        assert getattr(codec_py, name) == value, name


def test_decodes_a_java_request(codec):
    body = b'{"x":1}'
    [cmd] = codec.decode_frames(raw_frame(JAVA_HEADER, body))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.language) == (105, 42, 0, 399, "JAVA")
    assert cmd.remark is None
    assert cmd.ext_fields == {
        "AccessKey": "ak",
        "Signature": "c2ln",
        "topic": "TopicTest",
        "queueId": "3",
        "unitMode": "false",
        "ratio": "0.5",
    }
    assert cmd.body == body
    assert not cmd.is_response and not cmd.is_oneway


def test_decodes_a_node_oneway_request(codec):
    [cmd] = codec.decode_frames(raw_frame(NODE_HEADER))
    assert (cmd.code, cmd.opaque, cmd.flag) == (RequestCode.UPDATE_CONSUMER_OFFSET, 7, FLAG_ONEWAY)
    assert cmd.is_oneway
    assert cmd.remark is None
    assert cmd.ext_fields["commitOffset"] == "128"
    assert cmd.body == b""


def test_minimal_header_gets_defaults(codec):
    [cmd] = codec.decode_frames(raw_frame(b'{"code":0,"flag":1}'))
    assert cmd.is_response
    assert (cmd.opaque, cmd.remark, cmd.ext_fields, cmd.body) == (0, None, {}, b"")


def test_encodes_a_response_with_every_ext_value_a_string(codec):
    request = codec.decode_frames(raw_frame(JAVA_HEADER))[0]
    response = codec.RemotingCommand.response_to(
        request,
        ResponseCode.SUCCESS,
        ext_fields={"nextBeginOffset": 12, "suspend": True, "minOffset": "0", "gone": None},
        body=b"hello",
    )
    header = (
        b'{"code":0,"language":"%s","version":%d,"opaque":42,"flag":1,'
        b'"extFields":{"nextBeginOffset":"12","suspend":"true","minOffset":"0"}}' % (LANGUAGE.encode(), VERSION)
    )
    assert codec.encode(response) == struct.pack(">ii", 4 + len(header) + 5, len(header)) + header + b"hello"


def test_encodes_a_request_with_remark_and_body_parts(codec):
    cmd = codec.RemotingCommand(
        RequestCode.PULL_MESSAGE, opaque=9, remark="why", ext_fields={"queueId": 1}, body=[b"ab", memoryview(b"cde")]
    )
    frame = codec.encode(cmd)
    total, header_length = struct.unpack_from(">ii", frame)
    assert total == len(frame) - 4
    header = json.loads(frame[8 : 8 + header_length])
    assert header == {
        "code": 11,
        "language": LANGUAGE,
        "version": VERSION,
        "opaque": 9,
        "flag": 0,
        "remark": "why",
        "extFields": {"queueId": "1"},
    }
    assert frame[8 + header_length :] == b"abcde"
    assert codec.encode_head(cmd) + b"abcde" == frame
    out = bytearray(b"xx")
    assert codec.encode_into(out, cmd) == len(frame)
    assert out == b"xx" + frame


def without_first(fields: dict) -> dict:
    del fields[next(iter(fields))]
    return fields


@pytest.mark.parametrize(
    "remark, ext_fields, header",
    [
        # plain ASCII strings: the compiled codec writes these itself, byte for byte as orjson would
        (
            None,
            {"msgId": "7F000001", "queueId": "1"},
            b'{"code":%d,"language":"JAVA","version":-1,"opaque":-2147483648,"flag":1,'
            b'"extFields":{"msgId":"7F000001","queueId":"1"}}',
        ),
        (
            "",
            {},
            b'{"code":%d,"language":"JAVA","version":-1,"opaque":-2147483648,"flag":1,"remark":"","extFields":{}}',
        ),
        # a dict with deleted entries (a caller that removed a field before sending)
        (
            None,
            without_first({"brokerName": "b", "brokerId": "0", "topic": "T"}),
            b'{"code":%d,"language":"JAVA","version":-1,"opaque":-2147483648,"flag":1,'
            b'"extFields":{"brokerId":"0","topic":"T"}}',
        ),
        # strings JSON must escape, and UTF-8: orjson writes them
        (
            'say "hi"\\\n',
            {"k\x01": "\x1f"},
            b'{"code":%d,"language":"JAVA","version":-1,"opaque":-2147483648,"flag":1,'
            b'"remark":"say \\"hi\\"\\\\\\n","extFields":{"k\\u0001":"\\u001f"}}',
        ),
        (
            "caf\u00e9",
            {"\u20ac": "x"},
            b'{"code":%d,"language":"JAVA","version":-1,"opaque":-2147483648,"flag":1,'
            b'"remark":"caf\xc3\xa9","extFields":{"\xe2\x82\xac":"x"}}',
        ),
    ],
)
def test_header_strings_are_written_as_json_requires(codec, remark, ext_fields, header):
    cmd = codec.RemotingCommand(
        2147483647, language="JAVA", version=-1, opaque=-2147483648, flag=1, remark=remark, ext_fields=ext_fields
    )
    header = header % 2147483647
    assert codec.encode(cmd) == struct.pack(">ii", 4 + len(header), len(header)) + header


@pytest.mark.parametrize(
    "value, expected",
    [
        ("0", 0),
        ("-12", -12),
        ("1795298485299", 1795298485299),
        ("-123456789012345678", -123456789012345678),
        # beyond the compiled codec's own parser: read as int() reads them
        ("12345678901234567890", 12345678901234567890),
        ("+5", 5),
        (" 7 ", 7),
        ("1_000", 1000),
        ("\u0663", 3),
        (None, "default"),
        ("", "default"),
        ("-", ValueError),
        ("1.5", ValueError),
        ("0x10", ValueError),
        ("--1", ValueError),
    ],
)
def test_ext_int_reads_a_field_as_int_does(codec, value, expected):
    cmd = codec.RemotingCommand(1, ext_fields={} if value is None else {"queueId": value})
    if expected is ValueError:
        with pytest.raises(ValueError):
            cmd.ext_int("queueId", 0)
    elif expected == "default":
        assert cmd.ext_int("queueId", "default") == "default"
        with pytest.raises(KeyError):
            cmd.ext_int("queueId")
    else:
        assert cmd.ext_int("queueId") == expected and type(cmd.ext_int("queueId")) is int


def test_request_opaques_are_fresh_and_responses_echo_them(codec):
    first = codec.RemotingCommand.request(RequestCode.HEART_BEAT)
    second = codec.RemotingCommand.request(RequestCode.HEART_BEAT, {"a": "b"}, b"body")
    assert second.opaque != first.opaque and first.opaque > 0
    response = codec.RemotingCommand.response_to(second, ResponseCode.SYSTEM_ERROR, remark="boom")
    assert (response.opaque, response.flag, response.remark) == (second.opaque, FLAG_RESPONSE, "boom")
    assert response.is_response


def test_round_trip_through_a_split_stream(codec):
    commands = [
        codec.RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T", "e": "1"}, b"x" * 1000),
        codec.RemotingCommand.response_to(codec.RemotingCommand.request(1), 0, remark="ok"),
    ]
    stream = b"".join(codec.encode(c) for c in commands)
    decoder = codec.FrameDecoder()
    decoded = []
    for i in range(0, len(stream), 7):
        decoded += decoder.feed(stream[i : i + 7])
    assert decoder.buffered == 0
    assert [(c.code, c.opaque, c.flag, c.remark, c.ext_fields, c.body) for c in decoded] == [
        (c.code, c.opaque, c.flag, c.remark, c.ext_fields, c.body) for c in commands
    ]


@pytest.mark.parametrize(
    "data, message",
    [
        (struct.pack(">i", 0x7FFFFFFF), "frame length 2147483647 exceeds max 16777216"),
        (struct.pack(">i", 2), "frame length 2 is shorter than its 4-byte header length field"),
        (struct.pack(">ii", 6, 9) + b"{}", "header length 9 larger than the frame (2 bytes after the length fields)"),
        (raw_frame(b"{}", serialize_type=1), "serialize type 1 not supported, expected 0 (JSON)"),
        (raw_frame(b'{"code":'), "header is not valid JSON"),
        (raw_frame(b"\xff\xfe"), "header is not valid JSON"),
        (raw_frame(b"[1,2]"), "header is a JSON array, expected an object"),
        (raw_frame(b'"code"'), "header is a JSON string, expected an object"),
        (raw_frame(b'{"opaque":1}'), "header has no 'code'"),
        (raw_frame(b'{"code":"105"}'), "header 'code' is '105', expected a 32-bit integer"),
        (raw_frame(b'{"code":1,"opaque":4294967296}'), "header 'opaque' is 4294967296, expected a 32-bit integer"),
        (raw_frame(b'{"code":1,"extFields":[1]}'), "header extFields is a JSON array, expected an object"),
    ],
)
def test_bad_frames_raise_protocol_error(codec, data, message):
    decoder = codec.FrameDecoder()
    with pytest.raises(ProtocolError, match=message.replace("(", r"\(").replace(")", r"\)")):
        decoder.feed(data)
    # the stream cannot be trusted past a bad frame: the decoder stays failed
    with pytest.raises(ProtocolError):
        decoder.feed(raw_frame(b'{"code":1}'))


def test_frame_length_is_checked_before_the_frame_arrives(codec):
    decoder = codec.FrameDecoder(max_frame_size=1024)
    with pytest.raises(ProtocolError, match="frame length 1025 exceeds max 1024"):
        decoder.feed(struct.pack(">i", 1025))


def test_incomplete_frame_is_buffered(codec):
    frame = raw_frame(b'{"code":1}', b"body")
    decoder = codec.FrameDecoder()
    assert decoder.feed(frame[:-1]) == []
    assert decoder.buffered == len(frame) - 1
    [cmd] = decoder.feed(frame[-1:])
    assert cmd.body == b"body" and decoder.buffered == 0


@pytest.mark.parametrize("flag, expected", [("1", "codec_py"), ("", "_codec")])
def test_environment_chooses_the_implementation(flag, expected):
    assert chosen_implementation("rmq.net.codec", flag) == expected
