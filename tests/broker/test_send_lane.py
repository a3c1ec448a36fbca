"""The compiled send lane (rmq.broker._send_lane) and the Python send processor are one semantics:
the same frames, valid, edge and fuzzed, get the same answers and leave the same stored bytes on
twin brokers, one with the lane and one without (under ASYNC_FLUSH, and under SYNC_FLUSH, where
the answers wait for the flush round); and the lane's header scanner reads exactly what
``rmq.protocol.headers.send_header`` reads, or leaves the frame to it."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rmq.broker._send_lane import scan_batch, scan_send_header
from rmq.errors import ProtocolError, RequestRefused
from rmq.net.codec import decode_frames
from rmq.protocol.batch import decode_batch
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers import send_header
from rmq.protocol.send_header import LONG_KEYS, SHORT_KEYS
from tests.helpers import wait_until
from tests.helpers.broker import create_topic
from tests.helpers.frames import RawConnection, raw_frame
from tests.helpers.lanes import (
    Twin,
    assert_scanner_reads_as_decoder,
    close_twins,
    header_bytes,
    needs_lane,
    random_queue_send,
    start_twin_brokers,
)

_TOPICS = {"Lane": 4, "Wide": 8}

_ints = st.one_of(
    st.integers(0, 9).map(str),
    st.sampled_from(["", "x", "1.5", " 1", "+1", "1_0", "007", "-0", "2147483647", "2147483648", "-2147483649"]),
    st.integers(-(2**64), 2**64).map(str),
)
_texts = st.one_of(
    st.sampled_from(["", "Lane", "Wide", "%RETRY%G", "Auto1", "TBW102", "SCHEDULE_TOPIC_XXXX", "bad topic!"]),
    st.text(max_size=12),
)
# A delay level and a timer no test outlives (level 18: 2 h): a message that came due during a test
# would be put again by each twin's own schedule or timer service, at its own moment, with its own
# TIMER_*_MS times, and the twins' CommitLogs would differ by when, not by what the send stored.
_DELAYED = "DELAY\x0118\x02"
_TIMED = "TIMER_DELAY_SEC\x013600\x02"
_property_values = st.sampled_from(
    [
        "",
        "TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC\x02",
        _DELAYED,
        "TRAN_MSG\x01true\x02",
        "TRAN_MSG\x01truex\x02",
        _TIMED,
        "WAIT\x01false\x02",
        'q"uote\\back/slash\x02\x00\t\n',
        "é\x01ü\x02",
        "x" * 40000,
    ]
)


def _fields(spelling):
    return st.fixed_dictionaries(
        {spelling[1]: _texts, spelling[4]: _ints},
        optional={
            spelling[0]: _texts,
            spelling[2]: _texts,
            spelling[3]: _ints,
            spelling[5]: _ints,
            spelling[6]: _ints,
            spelling[7]: _ints,
            spelling[8]: st.one_of(_property_values, st.text(max_size=20)),
            spelling[9]: _ints,
            spelling[10]: _texts,
            spelling[11]: _ints,
            spelling[12]: st.sampled_from(["true", "false", "", "TRUE"]),
            "n": _texts,
        },
    )


# mostly plain sends, each with a few fields drawn from the fuzzed ones
_plain_ext_fields = st.builds(
    lambda topic, queue, extra: {"a": "P", "b": topic, "e": queue, "g": "1700000000000", **extra},
    st.sampled_from(sorted(_TOPICS)),
    st.integers(0, 3).map(str),
    _fields(SHORT_KEYS).map(lambda fields: {k: v for k, v in list(fields.items())[2:4] if k not in "be"}),
)
_ext_fields = st.one_of(
    _plain_ext_fields,
    _plain_ext_fields,
    _fields(SHORT_KEYS),
    _fields(LONG_KEYS),
    st.dictionaries(st.text(max_size=3), _texts),
)
_header_bytes = header_bytes(
    st.sampled_from(
        [RequestCode.SEND_MESSAGE_V2] * 3 + [RequestCode.SEND_MESSAGE, RequestCode.SEND_BATCH_MESSAGE, 105]
    ).map(int),
    _ext_fields,
)


def _decoded_header(header: bytes) -> dict | None:
    """What the codec and send_header read of a send header, or None when either refuses it."""
    try:
        (command,) = decode_frames(raw_frame(header))
        fields = send_header(command)
    except (ProtocolError, RequestRefused):
        return None
    return {
        "code": command.code,
        "opaque": command.opaque,
        "flag": command.flag,
        "topic": fields.topic,
        "queue_id": fields.queue_id,
        "sys_flag": fields.sys_flag,
        "born_timestamp": fields.born_timestamp,
        "message_flag": fields.flag,
        "properties": fields.properties,
        "reconsume_times": fields.reconsume_times,
        "default_topic_queue_nums": fields.default_topic_queue_nums,
        "max_reconsume_times": fields.max_reconsume_times,
        "batch": fields.batch,
    }


@settings(max_examples=400, deadline=None)
@given(header=_header_bytes)
def test_the_scanner_reads_what_send_header_reads(header):
    assert_scanner_reads_as_decoder(scan_send_header, _decoded_header, header)


@settings(max_examples=400, deadline=None)
@given(header=_header_bytes, data=st.data())
def test_the_scanner_takes_any_bytes(header, data):
    """Cut, spliced or flipped, a header is read the way send_header reads it, or left to it."""
    assert_scanner_reads_as_decoder(scan_send_header, _decoded_header, header, data)


def test_the_scanner_reads_both_spellings_and_leaves_the_unusual():
    v2 = b'{"code":310,"opaque":7,"flag":0,"extFields":{"a":"P","b":"Lane","e":"1","i":"TAGS\\u0001t\\u0002"}}'
    assert scan_send_header(v2)["properties"] == "TAGS\x01t\x02"
    long_under_v2 = b'{"code":310,"extFields":{"topic":"Lane","queueId":"2","e":"3"}}'
    assert scan_send_header(long_under_v2)["queue_id"] == 2  # whichever spelling names the topic
    for unusual in (
        b'{"code":310,"extFields":{"b":"Lane","e":"1","b":"Other"}}',  # duplicate key
        b'{"code":310,"extFields":{"b":"Lane","e":"+1"}}',  # only Python's int() reads it
        b'{"code":310,"extFields":{"b":"Lane","e":"1","i":"\\u00e9"}}',  # above ASCII
        b'{"code":310,"opaque":1.0,"extFields":{"b":"Lane","e":"1"}}',  # no int
        b'{"code":310,"extFields":{"b":"Lane","e":"1"}} x',  # trailing bytes
    ):
        assert scan_send_header(unusual) is None, unusual


# -- twin brokers --------------------------------------------------------------------------------


def _answer(command) -> tuple:
    ext = dict(command.ext_fields)
    if "msgId" in ext:  # the store's IPv4 and offset (a batch's: each message's); the port is each twin's own
        ext["msgId"] = ",".join(msg_id[:8] + msg_id[16:] for msg_id in ext["msgId"].split(","))
    return command.code, command.remark, ext, command.body


def _start_twins(start_broker, tmp_path: Path, twin=Twin, topics=_TOPICS, **settings: str):
    lane, python = start_twin_brokers(start_broker, tmp_path, **settings)
    for broker in (lane, python):
        for topic, queues in topics.items():
            create_topic(broker, topic, queues)
    pair = twin(lane), twin(python)
    return pair


@pytest.fixture
def twins(start_broker, tmp_path: Path):
    pair = _start_twins(start_broker, tmp_path)
    yield pair
    close_twins(pair)


# batches at maxMessageSize's edges, in frames a test sends quickly (and a CommitLog file holds)
_BATCH_MAX_MESSAGE_SIZE = 64 * 1024


@pytest.fixture
def batch_twins(start_broker, tmp_path: Path):
    pair = _start_twins(start_broker, tmp_path, maxMessageSize=str(_BATCH_MAX_MESSAGE_SIZE))
    yield pair
    close_twins(pair)


def _assert_twins_agree(twins, frames: list[bytes]) -> None:
    lane, python = twins
    for index, frame in enumerate(frames):
        got = [twin.exchange(frame, 1_000_000 + index) for twin in twins]
        if got[0] is None or got[1] is None:
            assert got[0] is None and got[1] is None, (frame[:200], got)
        else:
            assert [_answer(a) for a in got[0]] == [_answer(a) for a in got[1]], frame[:200]
    assert lane.records() == python.records()
    assert lane.queues() == python.queues()


def _send_frame(code: int, ext: dict, body: bytes = b"body", opaque: int = 1, flag: int = 0) -> bytes:
    header = {"code": code, "language": "JAVA", "version": 399, "opaque": opaque, "flag": flag, "extFields": ext}
    return raw_frame(orjson.dumps(header), body)


@needs_lane
def test_twins_agree_on_plain_and_edge_sends(twins):
    v2 = RequestCode.SEND_MESSAGE_V2
    frames = [
        _send_frame(v2, {"a": "P", "b": "Lane", "e": "1", "i": "TAGS\x01t\x02KEYS\x01k\x02", "g": "1700000000000"}),
        _send_frame(v2, {"a": "P", "b": "Lane", "e": "1", "f": "0", "h": "7", "j": "0", "g": "1"}, b"x" * 5000),
        _send_frame(RequestCode.SEND_MESSAGE, {"topic": "Wide", "queueId": "7", "bornTimestamp": "5"}),
        _send_frame(v2, {"topic": "Wide", "queueId": "3", "bornTimestamp": "5"}),  # long names under V2
        _send_frame(v2, {"b": "Lane", "e": "4", "g": "5"}),  # past the write queues
        _send_frame(v2, {"b": "Lane", "e": "1", "g": "5", "i": _DELAYED}),
        _send_frame(v2, {"b": "Lane", "e": "1", "g": "5", "i": "TRAN_MSG\x01true\x02"}),
        _send_frame(v2, {"b": "Lane", "e": "1", "g": "5", "i": "x" * 40000}),
        _send_frame(v2, {"b": "Lane", "e": "2", "g": "5", "m": "true"}, b""),  # a batch
        _send_frame(v2, {"b": "Auto1", "e": "0", "g": "5"}),  # auto-created
        _send_frame(v2, {"b": "Auto1", "e": "0", "g": "5"}),  # then known
        # TBW102 itself: to the broker, a topic like any other
        _send_frame(v2, {"topic": "TBW102", "queueId": "0", "bornTimestamp": "5"}),
        _send_frame(v2, {"b": "TBW102", "e": "7", "g": "5"}),
        _send_frame(v2, {"b": "Lane", "e": "1", "g": "5"}, flag=2),  # oneway: stored, no answer
        _send_frame(v2, {"b": "Lane", "g": "5"}),  # no queue id
        _send_frame(v2, {"b": "Lane", "e": "1", "g": "5"}, b"y" * (4 * 1024 * 1024 + 1)),  # past maxMessageSize
        raw_frame(b'{"code":310,"opaque":3,"extFields":{"b":"Lane","e":"1"'),  # not JSON: closed
        _send_frame(v2, {"b": "Lane", "e": "0", "g": "5"}) * 3,  # three in one read
    ]
    _assert_twins_agree(twins, frames)
    # the first send to a topic after each change of the topic table is the processor's (it checks
    # the topic); the lane serves the plain ones after it
    assert twins[0].broker.send_lane.served == 6


@needs_lane
def test_a_send_to_a_negative_queue_id_goes_to_one_of_the_write_queues(twins):
    """A negative queueId, in either spelling, asks for any queue (RocketMQ's randomQueueId): the
    lane leaves the send, and each twin's processor stores it in one of the topic's write queues, the
    one it answers. (The fuzzers leave these sends out: the twins may pick different queues.)"""
    v2 = RequestCode.SEND_MESSAGE_V2
    sends = [{"b": "Wide", "e": "-1"}, {"b": "Wide", "e": "-1"}, {"topic": "Wide", "queueId": "-24981"}]
    for twin in twins:
        picked = []
        for opaque, ext in enumerate(sends):
            (answer,) = twin.exchange(_send_frame(v2, ext), opaque)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            picked.append(int(answer.ext_fields["queueId"]))
        store, queues = twin.broker.store, range(_TOPICS["Wide"])
        assert all(queue_id in queues for queue_id in picked)
        assert [store.get_max_offset_in_queue("Wide", q) for q in queues] == [picked.count(q) for q in queues]
    assert twins[0].broker.send_lane.served == 0


# Sends to a random queue (a negative queueId) under long names, then a send to one queue of the
# same topic: the fuzzer once left out only a negative "e", and these sends (drawn in the long
# spelling) made the twins' stores differ by the queues each picked.
_RANDOM_QUEUES_BY_LONG_NAMES = [
    *(b'{"code":%d,"extFields":{"topic":"TBW102","queueId":"-24981"}}' % code for code in (10, 310, 310, 310)),
    b'{"code":310,"extFields":{"topic":"TBW102","queueId":"0"}}',
]


def fuzz_twins(twins, max_examples: int, one_read: bool = False) -> None:
    """Fuzzed send frames to both twins, one after the other (``one_read``: all in one write)."""

    @settings(max_examples=max_examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(headers=st.lists(_header_bytes, min_size=1, max_size=4), body=st.binary(max_size=64))
    @example(headers=_RANDOM_QUEUES_BY_LONG_NAMES, body=b"")
    def fuzz(headers, body):
        frames = [raw_frame(header, body) for header in headers if not random_queue_send(header)]
        _assert_twins_agree(twins, [b"".join(frames)] if one_read else frames)

    for topic in _TOPICS:  # the processor checks a topic first (then the lane knows it)
        _assert_twins_agree(twins, [_send_frame(RequestCode.SEND_MESSAGE_V2, {"b": topic, "e": "0", "g": "1"})])
    fuzz()
    assert twins[0].broker.send_lane.served > 0


@needs_lane
def test_twins_agree_on_fuzzed_sends(twins):
    fuzz_twins(twins, 60)


@needs_lane
def test_a_producer_whose_reads_end_mid_frame_is_not_taken_for_a_stalled_one(start_broker):
    """Every read completes a send the lane serves and starts the next: the connection makes
    progress, though no read hands a request to the processors, and outlives the frame timeout."""
    broker = start_broker(serverFrameTimeoutSeconds="1")
    create_topic(broker, "Lane")
    frame = _send_frame(RequestCode.SEND_MESSAGE_V2, {"b": "Lane", "e": "0", "g": "1"})
    half = len(frame) // 2
    with RawConnection(broker.config.listen_port) as connection:
        connection.send(frame)  # the processor checks the topic first
        connection.read_commands(1)
        served = broker.send_lane.served
        connection.send(frame[:half])
        deadline = time.monotonic() + 2.2
        while time.monotonic() < deadline:
            connection.send(frame[half:] + frame[:half])  # one completed, the next begun
            (answer,) = connection.read_commands(1)
            assert answer.code == ResponseCode.SUCCESS
            time.sleep(0.05)
        connection.send(frame[half:])
        connection.read_commands(1)
    assert broker.send_lane.served - served > 20


@needs_lane
def test_a_producer_that_reads_slowly_gets_every_answer_in_the_order_it_sent(start_broker):
    """The answers to a read the lane serves whole go to the socket at once, and what it does not
    take waits in the output: answers to the processors' requests among them, queued behind it,
    keep their place, and no later read's answers overtake them."""
    # 24,000 sends in ~500 reads: on a loaded machine some would wait past waitTimeMillsInSendQueue
    # and be shed (SYSTEM_BUSY), a refusal in its place, but not what this test is about
    broker = start_broker(waitTimeMillsInSendQueue="60000", osPageCacheBusyTimeOutMills="60000")
    create_topic(broker, "Lane")
    ext = {"b": "Lane", "e": "0", "g": "1"}
    info = b'{"code":%d,"opaque":%%d,"flag":0,"extFields":{}}' % RequestCode.GET_BROKER_RUNTIME_INFO
    # lane sends, then a request for a processor and a delayed send (the processor's), then more:
    # ~5 MB of answers, past what the kernel buffers for a peer that does not read
    kinds = ["lane"] * 12000 + ["info", "delay"] + ["lane"] * 12000
    frames = []
    for opaque, kind in enumerate(kinds, start=1):
        if kind == "info":
            frames.append(raw_frame(info % opaque))
        else:
            props = {"i": "DELAY\x012\x02"} if kind == "delay" else {}
            frames.append(_send_frame(RequestCode.SEND_MESSAGE_V2, ext | props, b"m", opaque=opaque))
    with RawConnection(broker.config.listen_port, receive_buffer=4096) as connection:
        connection.send(_send_frame(RequestCode.SEND_MESSAGE_V2, ext, opaque=0))  # the processor checks the topic
        connection.read_commands(1)
        for start in range(0, len(frames), 50):  # small writes: reads whose answers go at once
            connection.send(b"".join(frames[start : start + 50]))
        answers = connection.read_commands(len(frames), timeout=20)
    assert [a.opaque for a in answers] == list(range(1, len(frames) + 1))
    assert {a.code for a in answers} == {ResponseCode.SUCCESS}
    assert broker.send_lane.served > 12000


# -- batches -------------------------------------------------------------------------------------

_BATCH_PROPERTIES = [
    b"",
    b"TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC\x02",
    b"UNIQ_KEY\x01X",  # no trailing separator: the header's properties are joined with one
    b"DELAY\x013\x02",
    b"TIMER_DELAY_SEC\x015\x02",
    b"TRAN_MSG\x01true\x02",
    b"WAIT\x01false\x02",
]


def _record(body: bytes, props: bytes = b"", flag: int = 0, total: int | None = None, body_len=None, props_len=None):
    """One record of a batch body (rmq.protocol.batch's layout), its lengths forged when given."""
    head = struct.pack(
        ">iiiii",
        20 + len(body) + 2 + len(props) if total is None else total,
        0,
        0,
        flag,
        len(body) if body_len is None else body_len,
    )
    return head + body + struct.pack(">h", len(props) if props_len is None else props_len) + props


def _batch_frame(records: list[bytes], ext: dict | None = None, code=RequestCode.SEND_BATCH_MESSAGE, **kw) -> bytes:
    fields = {"a": "P", "b": "Lane", "e": "1", "g": "1700000000000"} if ext is None else ext
    return _send_frame(code, fields, b"".join(records), **kw)


@needs_lane
def test_twins_agree_on_plain_and_edge_batches(batch_twins):
    twins = batch_twins
    v2 = RequestCode.SEND_MESSAGE_V2
    tagged = [_record(b"m%d" % i, _BATCH_PROPERTIES[1], i) for i in range(32)]
    # the bodies' store records (91 fixed bytes + body + topic "Lane") fill maxMessageSize exactly
    at_limit = _BATCH_MAX_MESSAGE_SIZE - 2 * (91 + 4)
    served = [
        _batch_frame([_record(b"")]),  # the first is the processor's: it checks the topic
        _batch_frame(tagged),
        _batch_frame([_record(b"one", b"TAGS\x01t\x02", -5)]),
        _batch_frame(tagged[:3], {"b": "Lane", "e": "2", "g": "5", "m": "true"}, code=v2),
        _batch_frame(tagged[:2], {"topic": "Wide", "queueId": "6", "batch": "true"}, code=RequestCode.SEND_MESSAGE),
        _batch_frame(tagged[:2], {"topic": "Wide", "queueId": "5", "bornTimestamp": "9"}),  # long names, 320
        _batch_frame(  # the header's properties appended to each message's
            [_record(b"a", p) for p in (b"", b"UNIQ_KEY\x01X", b"TAGS\x01t\x02")],
            {"b": "Lane", "e": "0", "g": "5", "i": "WAIT\x01true\x02"},
        ),
        _batch_frame([_record(b"esc", b"K\x01v\x02")], {"b": "Lane", "e": "0", "i": 'q"\\/\x01\t\x02'}),
        _batch_frame([_record(b"p", b"K\x01" + b"v" * (32767 - 2))]),  # properties at their limit
        _batch_frame([_record(b"x", b"", total=0)]),  # total 0: not checked
        _batch_frame([_record(b"o")], flag=2),  # oneway: stored, no answer
        _batch_frame([_record(b"a" * (at_limit // 2)), _record(b"b" * (at_limit - at_limit // 2))]),
        _batch_frame(tagged[:4]) * 3,  # three in one read
    ]
    refused = [
        _batch_frame([_record(b"a" * (at_limit // 2)), _record(b"b" * (at_limit - at_limit // 2 + 1))]),
        _batch_frame([_record(b"a" * 32768), _record(b"b" * 32769)]),  # the bodies past maxMessageSize
        _batch_frame([_record(b"p", b"K\x01" + b"v" * (32767 - 2))], {"b": "Lane", "e": "0", "i": "W\x01x\x02"}),
        _batch_frame([_record(b"", b"TRAN_MSG\x01true\x02")]),  # the processor's to decide (it stores it plain)
        _batch_frame([_record(b"d", b"DELAY\x013\x02")]),
        _batch_frame([_record(b"t", b"TIMER_DELAY_SEC\x015\x02")]),
        _batch_frame([_record(b"d")], {"b": "Lane", "e": "0", "i": "DELAY\x012\x02"}),
        _batch_frame([]),  # no message
        _batch_frame([_record(b"abc")[:-1]]),  # truncated
        _batch_frame([_record(b"abc", total=99)]),
        _batch_frame([_record(b"abc", body_len=-1)]),
        _batch_frame([_record(b"abc", body_len=2**31 - 1)]),
        _batch_frame([_record(b"abc", b"K\x01v", props_len=-3)]),
        _batch_frame([_record(b"abc", b"K\x01v", props_len=4)]),
        _batch_frame([_record(b"abc")], {"b": "Lane", "e": "4"}),  # past the write queues
        _batch_frame([_record(b"abc")], {"b": "%RETRY%G", "e": "0"}),
    ]
    _assert_twins_agree(twins, served + refused)
    # all but the first to each topic (the processor's), the last frame three times
    assert twins[0].broker.send_lane.served == len(served) - 2 + 2
    answers = twins[0].exchange(_batch_frame(tagged[:3]), 7)
    (answer,) = answers
    assert answer.code == ResponseCode.SUCCESS and len(answer.ext_fields["msgId"].split(",")) == 3


_records = st.lists(
    st.builds(
        lambda body, props, flag: _record(body, props, flag),
        st.binary(max_size=24),
        st.one_of(st.sampled_from(_BATCH_PROPERTIES), st.binary(max_size=12)),
        st.integers(-(2**31), 2**31 - 1),
    ),
    max_size=5,
)


@st.composite
def _batch_frames(draw) -> bytes:
    body = b"".join(draw(_records))
    if draw(st.booleans()):  # a few bytes cut, flipped or spliced in
        at = draw(st.integers(0, len(body)))
        junk = draw(st.binary(min_size=1, max_size=4))
        body = draw(st.sampled_from([body[:at], body[:at] + junk + body[at + len(junk) :], body[:at] + junk]))
    ext = draw(
        st.sampled_from(
            [
                (RequestCode.SEND_BATCH_MESSAGE, {"a": "P", "b": "Lane", "e": "1", "g": "5"}),
                (RequestCode.SEND_BATCH_MESSAGE, {"b": "Wide", "e": "7", "i": "WAIT\x01true\x02"}),
                (RequestCode.SEND_BATCH_MESSAGE, {"topic": "Wide", "queueId": "2"}),
                (RequestCode.SEND_MESSAGE_V2, {"b": "Lane", "e": "3", "m": "true", "i": "TAGS\x01t"}),
                (RequestCode.SEND_MESSAGE, {"topic": "Lane", "queueId": "0", "batch": "true", "sysFlag": "1"}),
            ]
        )
    )
    return _send_frame(ext[0], ext[1], body, opaque=draw(st.integers(0, 2**31 - 1)))


@needs_lane
def test_twins_agree_on_fuzzed_batches(batch_twins):
    twins = batch_twins

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(frames=st.lists(_batch_frames(), min_size=1, max_size=4))
    def fuzz(frames):
        _assert_twins_agree(twins, frames)

    for topic in _TOPICS:  # the processor checks a topic first (then the lane knows it)
        _assert_twins_agree(twins, [_send_frame(RequestCode.SEND_MESSAGE_V2, {"b": topic, "e": "0", "g": "1"})])
    fuzz()
    assert twins[0].broker.send_lane.served > 0


def _decoded_batch(body: bytes) -> list | None:
    try:
        return decode_batch(body)
    except RequestRefused:
        return None


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=64))
def test_the_batch_walker_takes_any_bytes(body):
    assert scan_batch(body) == _decoded_batch(body)


@settings(max_examples=300, deadline=None)
@given(records=_records, data=st.data())
def test_the_batch_walker_reads_what_decode_batch_reads(records, data):
    """Valid bodies, and the same cut, spliced or with a byte flipped: read as decode_batch reads
    them, or refused where it refuses them."""
    body = b"".join(records)
    at = data.draw(st.integers(0, len(body)))
    junk = data.draw(st.binary(min_size=1, max_size=4))
    flipped = bytearray(body)
    if at < len(body):
        flipped[at] ^= data.draw(st.integers(1, 255))
    for mutated in (body, body[:at], body[:at] + junk + body[at:], bytes(flipped)):
        assert scan_batch(mutated) == _decoded_batch(mutated)


@needs_lane
def test_the_broker_runtime_info_counts_what_the_lane_served(start_broker):
    """rmq-admin brokerStatus (and perf/fuzz_broker.py) see how many frames the lane took."""
    broker = start_broker()
    create_topic(broker, "Lane")
    send = _send_frame(RequestCode.SEND_MESSAGE_V2, {"b": "Lane", "e": "0", "g": "1"})
    info = raw_frame(b'{"code":%d,"opaque":9,"flag":0,"extFields":{}}' % RequestCode.GET_BROKER_RUNTIME_INFO)
    with RawConnection(broker.config.listen_port) as connection:
        connection.send(send)  # the processor checks the topic first
        connection.read_commands(1)
        connection.send(send + _batch_frame([_record(b"a"), _record(b"b")], {"b": "Lane", "e": "0"}) + info)
        *sends, answer = connection.read_commands(3)
    assert [a.code for a in sends] == [ResponseCode.SUCCESS] * 2
    table = orjson.loads(answer.body)["table"]
    assert (table["sendLaneServed"], table["sendLaneLeft"]) == ("2", "2")  # the first send, the info request


# -- SYNC_FLUSH: the lane stores a send at once and answers it when the flush round covering it ends,
# as the processor does: same answers, in the same order per connection, same bytes, when the rounds
# succeed and when they time out (FLUSH_DISK_TIMEOUT)

V2 = RequestCode.SEND_MESSAGE_V2
_PROBE_TOPIC = "Probe"


class DurableTwin(Twin):
    """A twin whose probe is itself a send that waits for the disk: its answer comes after the
    answers to every send stored before it on the connection (the rounds complete in put order)."""

    probe_codes = (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT)

    def probe(self, opaque: int) -> bytes:
        return _send_frame(V2, {"b": _PROBE_TOPIC, "e": "0", "g": "1"}, b"probe", opaque=opaque)


def _start_sync_twins(start_broker, tmp_path: Path, **settings: str):
    topics = {**_TOPICS, _PROBE_TOPIC: 1}
    return _start_twins(start_broker, tmp_path, DurableTwin, topics, flushDiskType="SYNC_FLUSH", **settings)


@pytest.fixture
def sync_twins(start_broker, tmp_path: Path):
    pair = _start_sync_twins(start_broker, tmp_path)
    yield pair
    close_twins(pair)


def _plain(queue: int, opaque: int, **ext) -> bytes:
    return _send_frame(V2, {"a": "P", "b": "Lane", "e": str(queue), "g": "1700000000000", **ext}, opaque=opaque)


_SENDS = [
    _plain(1, 1, i="TAGS\x01t\x02KEYS\x01k\x02"),
    _plain(2, 2, i="WAIT\x01false\x02"),  # answered at once, stored alike
    b"".join(_plain(queue % 4, 10 + queue) for queue in range(16)),  # a pipelined burst
    b"".join(_plain(queue % 4, 100 + queue) for queue in range(150)),  # more than the rings held: they grow
    _plain(1, 3, i=_DELAYED) + _plain(1, 4),  # the lane leaves the first: the rest of the read too
    _plain(1, 5) + _plain(1, 6, i=_DELAYED) + _plain(1, 7),  # one stored by each, one round
    _plain(0, 8) + _send_frame(V2, {"b": "Lane", "e": "4", "g": "5"}, opaque=9),  # a refusal answered first
    _send_frame(V2, {"b": "Lane", "e": "1", "g": "5"}, flag=2),  # oneway: stored, waited for, not answered
    _send_frame(RequestCode.SEND_MESSAGE, {"topic": "Wide", "queueId": "7", "bornTimestamp": "5"}, opaque=20),
    _send_frame(V2, {"b": "Auto1", "e": "0", "g": "5"}, opaque=21) * 2,  # auto-created, then known
    _batch_frame([_record(b"a"), _record(b"b")], {"b": "Lane", "e": "0"}),  # a batch that waits: the processor's
    _batch_frame([_record(b"c")], {"b": "Lane", "e": "0", "i": "WAIT\x01false\x02"}),  # one that does not: the lane's
    raw_frame(b'{"code":310,"opaque":3,"extFields":{"b":"Lane","e":"1"'),  # not JSON: closed
]


@needs_lane
def test_sync_flush_sends_are_served_by_the_lane_and_answered_as_the_processor_answers(sync_twins):
    _assert_twins_agree(sync_twins, _SENDS)
    lane = sync_twins[0].broker
    assert lane.send_lane.served >= 20
    assert lane.store.commit_queue_size == 0


@needs_lane
def test_a_oneway_sync_flush_send_is_stored_and_not_answered(sync_twins):
    """RocketMQ answers no oneway request; a oneway send's round completes before the next send's, so
    an answer to it would come first."""
    for twin in sync_twins:
        twin.connection.send(_send_frame(V2, {"b": "Lane", "e": "0", "g": "1"}, flag=2, opaque=77))
        twin.connection.send(_send_frame(V2, {"b": "Lane", "e": "0", "g": "1"}, opaque=78))
        (answer,) = twin.connection.read_commands(1)
        assert (answer.opaque, answer.code) == (78, ResponseCode.SUCCESS)
    assert sync_twins[0].records() == sync_twins[1].records()


@needs_lane
def test_a_sync_flush_send_that_does_not_wait_reaches_the_disk_all_the_same(start_broker):
    """WAIT=false: answered at once, and flushed by the group commit's next timed round, as the
    processor's puts are (nothing waits for a round that would cover it)."""
    broker = start_broker(flushDiskType="SYNC_FLUSH")
    create_topic(broker, "Lane")
    with RawConnection(broker.config.listen_port) as connection:
        connection.send(_plain(0, 1))  # the processor checks the topic first
        connection.read_commands(1)
        served = broker.send_lane.served
        connection.send(_plain(0, 2, i="WAIT\x01false\x02"))
        (answer,) = connection.read_commands(1)
    assert answer.code == ResponseCode.SUCCESS and broker.send_lane.served == served + 1
    end = broker.store.get_max_phy_offset()
    wait_until(lambda: broker.store.commit_log.get_flushed_where() >= end, 3, "the send flushed")


@needs_lane
def test_sync_flush_twins_agree_when_every_round_is_late(start_broker, tmp_path: Path):
    """syncFlushTimeout 0: every waiting send is past its deadline when its round completes, and is
    answered FLUSH_DISK_TIMEOUT (stored, but not flushed in time), its msgId and offsets included."""
    twins = _start_sync_twins(start_broker, tmp_path, syncFlushTimeout="0")
    try:
        _assert_twins_agree(twins, _SENDS[:3])
        twins[0].connection.send(_plain(0, 500))
        (late,) = twins[0].connection.read_commands(1)
        assert late.code == ResponseCode.FLUSH_DISK_TIMEOUT and late.ext_fields["msgId"]
        assert twins[0].broker.send_lane.served > 0
    finally:
        for twin in twins:
            twin.connection.close()


@needs_lane
def test_sync_flush_twins_agree_on_fuzzed_sends(sync_twins):
    fuzz_twins(sync_twins, 30, one_read=True)


@needs_lane
def test_sync_flush_twins_agree_when_the_loop_makes_the_rounds(start_broker, tmp_path: Path):
    """syncFlushInlineMaxMicros above any msync here: once the first rounds were fast, the event loop
    makes the rounds itself and answers at once, in the same order, with the same bytes stored."""
    twins = _start_sync_twins(start_broker, tmp_path, syncFlushInlineMaxMicros="10000000")
    try:
        _assert_twins_agree(twins, [_plain(0, 900 + n) for n in range(10)])  # 20 rounds each, with the probes
        loop_rounds = [twin.broker.store.group_commit_inline_rounds for twin in twins]
        _assert_twins_agree(twins, _SENDS)
        for twin, before in zip(twins, loop_rounds, strict=True):
            assert twin.broker.store.group_commit_inline_rounds > before
    finally:
        close_twins(twins)
