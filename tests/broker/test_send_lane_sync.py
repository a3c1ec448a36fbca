"""The compiled send lane under SYNC_FLUSH: it stores a send at once and answers it when the flush
round covering it ends, as the Python processor does. Twin brokers, one with the lane and one
without, get the same frames and must give the same answers, in the same order per connection, and
keep the same bytes, when the rounds succeed and when they time out (FLUSH_DISK_TIMEOUT)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmq.protocol.codes import RequestCode, ResponseCode
from tests.broker.test_send_lane import _TOPICS, Twin, _assert_twins_agree, _send_frame, fuzz_twins, needs_lane
from tests.helpers.broker import create_topic
from tests.helpers.frames import raw_frame

V2 = RequestCode.SEND_MESSAGE_V2
_PROBE_TOPIC = "Probe"


class DurableTwin(Twin):
    """A twin whose probe is itself a send that waits for the disk: its answer comes after the
    answers to every send stored before it on the connection (the rounds complete in put order)."""

    probe_codes = (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT)

    def probe(self, opaque: int) -> bytes:
        return _send_frame(V2, {"b": _PROBE_TOPIC, "e": "0", "g": "1"}, b"probe", opaque=opaque)


def _start_twins(start_broker, tmp_path: Path, **extra):
    lane = start_broker(storePathRootDir=str(tmp_path / "lane"), flushDiskType="SYNC_FLUSH", **extra)
    python = start_broker(
        storePathRootDir=str(tmp_path / "python"), flushDiskType="SYNC_FLUSH", fastLaneEnable="false", **extra
    )
    assert lane.send_lane is not None and python.send_lane is None
    for broker in (lane, python):
        for topic, queues in {**_TOPICS, _PROBE_TOPIC: 1}.items():
            create_topic(broker, topic, queues)
    return DurableTwin(lane), DurableTwin(python)


@pytest.fixture
def sync_twins(start_broker, tmp_path: Path):
    pair = _start_twins(start_broker, tmp_path)
    yield pair
    for twin in pair:
        twin.connection.close()


def _plain(queue: int, opaque: int, **ext) -> bytes:
    return _send_frame(V2, {"a": "P", "b": "Lane", "e": str(queue), "g": "1700000000000", **ext}, opaque=opaque)


_SENDS = [
    _plain(1, 1, i="TAGS\x01t\x02KEYS\x01k\x02"),
    _plain(2, 2, i="WAIT\x01false\x02"),  # answered at once, stored alike
    b"".join(_plain(queue % 4, 10 + queue) for queue in range(16)),  # a pipelined burst
    _plain(1, 3, i="DELAY\x012\x02") + _plain(1, 4),  # the lane leaves the first: the rest of the read too
    _plain(1, 5) + _plain(1, 6, i="DELAY\x012\x02") + _plain(1, 7),  # one stored by each, one round
    _plain(0, 8) + _send_frame(V2, {"b": "Lane", "e": "4", "g": "5"}, opaque=9),  # a refusal answered first
    _send_frame(V2, {"b": "Lane", "e": "1", "g": "5"}, flag=2),  # oneway: stored, waited for, not answered
    _send_frame(RequestCode.SEND_MESSAGE, {"topic": "Wide", "queueId": "7", "bornTimestamp": "5"}, opaque=20),
    _send_frame(V2, {"b": "Auto1", "e": "0", "g": "5"}, opaque=21) * 2,  # auto-created, then known
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
def test_sync_flush_twins_agree_when_every_round_is_late(start_broker, tmp_path: Path):
    """syncFlushTimeout 0: every waiting send is past its deadline when its round completes, and is
    answered FLUSH_DISK_TIMEOUT (stored, but not flushed in time), its msgId and offsets included."""
    twins = _start_twins(start_broker, tmp_path, syncFlushTimeout="0")
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
