"""The compiled pull lane (rmq.broker._pull_lane) and the Python pull processor are one semantics:
the same pull frames, valid, edge and fuzzed, get the same answers (code, remark, extFields, body)
and commit the same consumer offsets on twin brokers holding the same messages, one with the lane
and one without; and the lane's header scanner reads exactly what ``pull_header`` reads, or leaves
the frame to it."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.broker._pull_lane import scan_pull_header
from rmq.errors import ProtocolError, RequestRefused
from rmq.net.codec import decode_frames, encode
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers import PULL_KEYS, pull_header
from rmq.protocol.record import decode_record
from rmq.protocol.request_flags import PullSysFlag
from rmq.store._store import LAYOUT
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
from tests.helpers.requests import heartbeat_request

_PULL = int(RequestCode.PULL_MESSAGE)
# what differs between the twins' copies of a record: when it was stored, by which broker, from
# which connection (the fuzzed sends among the pulls)
_MASKED = [(LAYOUT["REC_BORNHOST"], 8), (LAYOUT["REC_STORETIMESTAMP"], 8), (LAYOUT["REC_STOREHOST"], 8)]
_TOPIC = "Pulled"
_GROUPS = ("G1", "G2")
# queue 0: 40 small tagged messages; 1: three; 2: none; 3: big ones (the 256 KiB transfer bound)
_QUEUES = 4
_BORN = 1_700_000_000_000
_SUBSCRIBED = PullSysFlag.SUBSCRIPTION
_COMMIT = PullSysFlag.COMMIT_OFFSET


def _store_messages(broker) -> None:
    create_topic(broker, _TOPIC, _QUEUES)
    create_topic(broker, "Unreadable", 1)
    for i in range(40):
        tags = ("TagA", "TagB", "TagC")[i % 3]
        properties = f"TAGS\x01{tags}\x02KEYS\x01k{i}\x02"
        broker.put_inner(_TOPIC, 0, b"m%d" % i * (1 + i % 7), properties, born_timestamp=_BORN)
    for i in range(3):
        broker.put_inner(_TOPIC, 1, b"one%d" % i, "TAGS\x01TagA\x02", born_timestamp=_BORN)
    for i in range(5):
        broker.put_inner(_TOPIC, 3, bytes([65 + i]) * 100_000, b"", born_timestamp=_BORN)


def _start_twins(start_broker, root: Path, **settings: str) -> tuple[Twin, Twin]:
    lane, python = start_twin_brokers(start_broker, root, **settings)
    assert lane.send_lane.pull_lane is not None
    for broker in (lane, python):
        _store_messages(broker)
    # a topic no one may read (perm 2: write only)
    for broker in (lane, python):
        config = broker.topic_config_manager.select_topic_config("Unreadable")
        config.perm = 2
        broker.topic_config_manager.update_topic_config(config)
    pair = Twin(lane), Twin(python)
    # G2's consumers subscribe to TagB by heartbeat (a pull without the subscription bit reads it)
    for twin in pair:
        answers = twin.exchange(encode(heartbeat_request("c1", "G2", _TOPIC, sub="TagB")), 1)
        assert [a.code for a in answers if a.flag & 1] == [ResponseCode.SUCCESS]  # (and the consumer-ids notice)
    return pair


@pytest.fixture
def twins(start_broker, tmp_path: Path):
    pair = _start_twins(start_broker, tmp_path)
    yield pair
    close_twins(pair)


def _masked(body: bytes) -> list[bytes]:
    out = []
    pos = 0
    while pos + 4 <= len(body):
        (size,) = struct.unpack_from(">i", body, pos)
        record = bytearray(body[pos : pos + size])
        born, stored = LAYOUT["REC_BORNTIMESTAMP"], LAYOUT["REC_STORETIMESTAMP"]
        if record[born : born + 8] == record[stored : stored + 8]:
            record[born : born + 8] = bytes(8)  # a send without bornTimestamp: the store's time
        for start, length in _MASKED:
            record[start : start + length] = bytes(length)
        out.append(bytes(record))
        pos += max(size, 4)
    return out


def _answer(command) -> tuple:
    ext = dict(command.ext_fields)
    if "msgId" in ext:  # a send among the fuzzed frames: the store's IPv4 and offset, each twin's port
        ext["msgId"] = ext["msgId"][:8] + ext["msgId"][16:]
    return command.code, command.remark, ext, _masked(bytes(command.body or b""))


def _offsets(broker) -> dict:
    manager = broker.consumer_offset_manager
    return {(group, queue): manager.query_offset(group, _TOPIC, queue) for group in _GROUPS for queue in range(_QUEUES)}


def _assert_twins_agree(twins, frames: list[bytes]) -> None:
    lane, python = twins
    for index, frame in enumerate(frames):
        got = [twin.exchange(frame, 2_000_000 + index) for twin in twins]
        if got[0] is None or got[1] is None:
            assert got[0] is None and got[1] is None, (frame[:200], got)
        else:
            assert [_answer(a) for a in got[0]] == [_answer(a) for a in got[1]], frame[:300]
    assert _offsets(lane.broker) == _offsets(python.broker)
    assert lane.broker.get_counts.snapshot() == python.broker.get_counts.snapshot()


def _pull(ext: dict, opaque: int = 1, flag: int = 0, subscribe: bool = True) -> bytes:
    fields = {
        "consumerGroup": "G1",
        "topic": _TOPIC,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": str(_SUBSCRIBED if subscribe else 0),
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "1",
        "expressionType": "TAG",
    }
    fields.update(ext)
    fields = {k: v for k, v in fields.items() if v is not None}
    header = {"code": _PULL, "extFields": fields, "flag": flag, "language": "JAVA", "opaque": opaque, "version": 399}
    return raw_frame(orjson.dumps(header))


@needs_lane
def test_twins_agree_on_plain_and_edge_pulls(twins):
    frames = [
        _pull({}),  # 32 of queue 0
        _pull({"queueOffset": "32"}),  # the last 8
        _pull({"queueOffset": "39", "maxMsgNums": "1"}),  # the last one
        _pull({"maxMsgNums": "1"}),
        _pull({"maxMsgNums": "500"}),  # past the limit: 32
        _pull({"maxMsgNums": "0"}),
        _pull({"maxMsgNums": "-3"}),
        _pull({"maxMsgNums": None}),  # absent: the default
        _pull({"queueId": "1"}),
        _pull({"queueId": "3"}),  # 100 KB each: the transfer bound cuts the body
        _pull({"queueId": "3", "queueOffset": "2"}),
        _pull({"subscription": "TagA"}),
        _pull({"subscription": "TagB || TagC", "queueOffset": "5"}),
        _pull({"subscription": "TagA", "queueOffset": "38"}),  # nothing of its tag left: retry
        _pull({"subscription": "", "expressionType": ""}),  # absent: everything
        _pull({"subscription": "TagA", "expressionType": "tag"}),
        # (no SQL92 expression: its compile answers after the probe; the lane leaves SQL92 anyway)
        _pull({"expressionType": "XPATH", "subscription": "a"}),
        _pull({"sysFlag": str(_SUBSCRIBED | _COMMIT), "commitOffset": "17", "queueOffset": "20"}),
        _pull({"sysFlag": str(_SUBSCRIBED | _COMMIT), "commitOffset": "-1", "queueId": "1", "consumerGroup": "G2"}),
        _pull({"sysFlag": str(_SUBSCRIBED | _COMMIT), "commitOffset": "3", "queueId": "1", "queueOffset": "3"}),
        _pull({"sysFlag": str(_COMMIT), "commitOffset": "5", "consumerGroup": "G2"}),  # TagB, by heartbeat
        _pull({"sysFlag": "0", "consumerGroup": "G2", "queueOffset": "30"}),
        _pull({"sysFlag": "0", "consumerGroup": "G1"}),  # no subscription known
        _pull({"queueOffset": "40"}),  # at the max: not found (no suspend)
        _pull({"queueOffset": "400"}),  # past it: moved
        _pull({"queueId": "2"}),  # an empty queue
        _pull({"queueId": "2", "queueOffset": "9"}),
        _pull({"queueId": "4"}),  # past the read queues
        _pull({"queueId": "-1"}),
        _pull({"queueOffset": "-5"}),
        _pull({"queueOffset": "abc"}),
        _pull({"queueOffset": None}),
        _pull({"queueOffset": "+3"}),  # only Python's int() reads it: the processor's
        _pull({"queueOffset": "0003"}),
        _pull({"topic": "NoSuchTopic"}),
        _pull({"topic": "Unreadable"}),
        _pull({"topic": "%RETRY%G1"}),
        _pull({"consumerGroup": "bad group!"}),
        _pull({"consumerGroup": ""}),
        _pull({"consumerGroup": "G\u00e9"}),
        _pull({}, flag=2),  # oneway: no answer
        _pull({"sysFlag": str(_SUBSCRIBED), "suspendTimeoutMillis": "x"}),
        raw_frame(b'{"code":11,"opaque":3,"extFields":{"topic":"Pulled","topic":"Other","queueId":"0"}}'),
        raw_frame(
            b'{"opaque":4,"code":11,"extFields":{"consumerGroup":"G1","topic":"Pulled","queueId":"0",'
            b'"queueOffset":"1","sysFlag":"4"}}'
        ),  # code not first: the processor's
        raw_frame(b'{"code":11,"opaque":3,"extFields":{"topic":"Pulled","queueId":"0"'),  # not JSON: closed
        _pull({"queueOffset": "1"}) + _pull({"queueOffset": "2", "queueId": "1"}) + _pull({"queueOffset": "40"}),
    ]
    _assert_twins_agree(twins, frames)
    assert twins[0].broker.send_lane.pull_lane.served >= 15


# -- fuzzed pulls ----------------------------------------------------------------------------------

_ints = st.one_of(
    st.integers(-2, 45).map(str),
    st.sampled_from(["", "x", "1.5", " 1", "+1", "1_0", "007", "-0", "2147483647", "2147483648", "9" * 19]),
    st.integers(-(2**64), 2**64).map(str),
)
_pull_fields = st.fixed_dictionaries(
    {},
    optional={
        "consumerGroup": st.sampled_from(["G1", "G2", "", "bad group!", "G\\1"]),
        "topic": st.sampled_from([_TOPIC, _TOPIC, "Unreadable", "Nope", "", "Pull\u00e9d"]),
        "queueId": _ints,
        "queueOffset": _ints,
        "maxMsgNums": _ints,
        "sysFlag": st.sampled_from(["4", "5", "4", "0", "1", "x", "12"]),
        "commitOffset": _ints,
        "suspendTimeoutMillis": st.sampled_from(["0", "", "x", "-1"]),
        "subscription": st.sampled_from(["*", "", "TagA", "TagA || TagC", "TagB||", "\\u0054agA"]),
        "expressionType": st.sampled_from(["TAG", "", "tag", "XPATH"]),
        "n": st.text(max_size=4),
    },
)
# mostly plain pulls, each with a few fields drawn from the fuzzed ones
_plain_pull_fields = st.builds(
    lambda queue, offset, extra: {
        "consumerGroup": "G1",
        "topic": _TOPIC,
        "queueId": queue,
        "queueOffset": offset,
        "sysFlag": "4",
        **dict(list(extra.items())[:2]),
    },
    st.sampled_from(["0", "0", "1", "3"]),
    st.integers(0, 42).map(str),
    _pull_fields,
)
_header_bytes = header_bytes(
    st.sampled_from([_PULL, _PULL, _PULL, 10, 310]), st.one_of(_plain_pull_fields, _plain_pull_fields, _pull_fields)
)


def _decoded_header(header: bytes) -> dict | None:
    """What the codec and pull_header read of a pull header, or None when either refuses it."""
    try:
        (command,) = decode_frames(raw_frame(header))
        fields = pull_header(command)
    except (ProtocolError, RequestRefused):
        return None
    return {"code": command.code, "opaque": command.opaque, "flag": command.flag, **dataclasses.asdict(fields)}


@settings(max_examples=400, deadline=None)
@given(header=_header_bytes)
def test_the_pull_scanner_reads_what_pull_header_reads(header):
    assert_scanner_reads_as_decoder(scan_pull_header, _decoded_header, header)


@settings(max_examples=400, deadline=None)
@given(header=_header_bytes, data=st.data())
def test_the_pull_scanner_takes_any_bytes(header, data):
    """Cut, spliced or flipped, a header is read the way pull_header reads it, or left to it."""
    assert_scanner_reads_as_decoder(scan_pull_header, _decoded_header, header, data)


def test_the_pull_scanner_reads_the_long_names_and_leaves_the_unusual():
    plain = _pull({"queueOffset": "7", "maxMsgNums": "1"})[8:]
    assert scan_pull_header(plain)["queue_offset"] == 7
    assert set(PULL_KEYS) <= set(orjson.loads(plain)["extFields"])
    for unusual in (
        b'{"code":11,"extFields":{"consumerGroup":"G","topic":"T","queueId":"0","queueOffset":"0","topic":"U"}}',
        b'{"code":11,"extFields":{"consumerGroup":"G","topic":"T","queueId":"0","queueOffset":" 1"}}',
        b'{"code":11,"extFields":{"consumerGroup":"G","topic":"T\\u0041","queueId":"0","queueOffset":"1"}}',
        b'{"code":11,"extFields":{"consumerGroup":"G","topic":"T","queueId":"0"}}',  # no queueOffset
        b'{"code":11,"extFields":{"consumerGroup":"G","topic":"T","queueId":"0","queueOffset":1}}',
        b'{"code":10,"extFields":{"consumerGroup":"G","topic":"T","queueId":"0","queueOffset":"1"}}',
    ):
        assert scan_pull_header(unusual) is None, unusual


@needs_lane
def test_twins_agree_on_fuzzed_pulls(twins):
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(headers=st.lists(_header_bytes, min_size=1, max_size=4))
    def fuzz(headers):
        # (no sysFlag drawn has the suspend bit: a parked pull's answer would come after the probe's)
        _assert_twins_agree(twins, [raw_frame(header) for header in headers if not random_queue_send(header)])

    served = twins[0].broker.send_lane.pull_lane.served
    fuzz()
    assert twins[0].broker.send_lane.pull_lane.served > served


@needs_lane
def test_answers_bigger_than_the_socket_takes_arrive_whole(start_broker):
    """The lane's answers of one read, handed to the output by reference, go out in pieces to a
    reader with a small window: each pull gets its own records, in order, byte for byte."""
    broker = start_broker()
    _store_messages(broker)
    frames = [_pull({"queueId": "3", "queueOffset": str(i % 4)}, opaque=i) for i in range(12)]
    with RawConnection(broker.config.listen_port, receive_buffer=4096) as connection:
        # two reads: the second's answers are made while the first's still wait for the window
        connection.send(b"".join(frames[:6]))
        (first,) = connection.read_commands(1)
        connection.send(b"".join(frames[6:]))
        answers = [first, *connection.read_commands(11)]
    assert broker.send_lane.pull_lane.served == 12
    assert [a.opaque for a in answers] == list(range(12))
    for i, answer in enumerate(answers):
        bodies = [decode_record(record).body for record in _masked(answer.body)]
        # 100 KB records under the 256 KiB transfer bound: two a pull
        expected = [bytes([65 + q]) * 100_000 for q in (i % 4, i % 4 + 1)]
        assert bodies == expected, (i, [b[:1] for b in bodies])


@needs_lane
def test_twins_agree_on_the_broker_they_suggest(start_broker, tmp_path: Path):
    """With slaveReadEnable, a read far behind the CommitLog's end (any read, at a 0 % memory ratio)
    suggests the group's slow-consumer broker: the lane works it out as the processor does."""
    pair = _start_twins(start_broker, tmp_path, slaveReadEnable="true", accessMessageInMemoryMaxRatio="0")
    try:
        _assert_twins_agree(
            pair, [_pull({}), _pull({"queueId": "1", "queueOffset": "2"}), _pull({"queueOffset": "40"})]
        )
        (answer,) = pair[0].exchange(_pull({"queueOffset": "3"}), 7)
        assert answer.ext_fields["suggestWhichBrokerId"] == "1"  # whichBrokerWhenConsumeSlowly's default
        assert pair[0].broker.send_lane.pull_lane.served == 3
    finally:
        close_twins(pair)


@needs_lane
def test_the_broker_runtime_info_counts_what_the_pull_lane_served(start_broker):
    """rmq-admin brokerStatus sees how many pulls the pull lane took and left."""
    broker = start_broker()
    _store_messages(broker)
    info = raw_frame(b'{"code":%d,"opaque":9,"flag":0,"extFields":{}}' % RequestCode.GET_BROKER_RUNTIME_INFO)
    with RawConnection(broker.config.listen_port) as connection:
        connection.send(_pull({}) + _pull({"queueOffset": "40"}) + info)  # found; nothing new: the processor's
        *pulls, answer = connection.read_commands(3)
    assert [a.code for a in pulls] == [ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND]
    table = orjson.loads(answer.body)["table"]
    assert (table["pullLaneServed"], table["pullLaneLeft"]) == ("1", "1")
