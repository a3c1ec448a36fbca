"""Message codecs: batch bodies (golden bytes), pulled bodies built here byte by byte, validation."""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta, timezone

import pytest

from rmq.client.message import (
    Message,
    decode_messages,
    encode_batch,
    validate_message,
)
from rmq.errors import ClientError
from rmq.protocol.compression import compress_body
from rmq.protocol.record import encode_msg_id
from tests.helpers.golden import spec_record


def stored_record(
    *,
    topic: str,
    body: bytes,
    props: bytes,
    queue_id: int,
    queue_offset: int,
    phy: int,
    sys_flag: int = 0,
    reconsume: int = 0,
) -> bytes:
    return spec_record(
        topic=topic,
        body=body,
        props=props,
        queue_id=queue_id,
        queue_offset=queue_offset,
        phy_offset=phy,
        sys_flag=sys_flag,
        reconsume=reconsume,
    )


def test_batch_body_golden_bytes():
    a = Message("T", b"hi", properties={"UNIQ_KEY": "A1"})
    b = Message("T", b"xyz", tags="t", flag=7)
    expected = bytes.fromhex(
        # total=20+2+2+12=36, magic 0, crc 0, flag 0, bodyLen 2, "hi", propsLen 12, "UNIQ_KEY\x01A1\x02"
        "00000024"
        "00000000"
        "00000000"
        "00000000"
        "00000002"
        "6869"
        "000c"
        "554e49515f4b4559"
        "01"
        "4131"
        "02"
        # total=20+3+2+7=32, flag 7, bodyLen 3, "xyz", propsLen 7, "TAGS\x01t\x02"
        "00000020"
        "00000000"
        "00000000"
        "00000007"
        "00000003"
        "78797a"
        "0007"
        "54414753"
        "01"
        "74"
        "02"
    )
    assert encode_batch([a, b]) == expected


def test_pulled_records_decode_to_message_ext():
    body1 = b"first body"
    big = b"compressible " * 1000
    props1 = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x017F0000010001000000000000ABCD0001\x02"
    rec1 = stored_record(topic="TopicT", body=body1, props=props1, queue_id=3, queue_offset=41, phy=1000)
    rec2 = stored_record(
        topic="%RETRY%g",
        body=zlib.compress(big),
        props=b"RETRY_TOPIC\x01TopicT\x02",
        queue_id=0,
        queue_offset=5,
        phy=1000 + len(rec1),
        sys_flag=1,
        reconsume=2,
    )
    m1, m2 = decode_messages(rec1 + rec2, broker_name="broker-a")
    assert (m1.topic, m1.body, m1.tags, m1.keys) == ("TopicT", body1, "TagA", ["k1", "k2"])
    assert m1.msg_id == "7F0000010001000000000000ABCD0001"
    assert m1.offset_msg_id == encode_msg_id("127.0.0.1", 10911, 1000)
    assert (m1.queue_id, m1.queue_offset, m1.commit_log_offset) == (3, 41, 1000)
    assert m1.born_host == ("10.0.0.7", 40001) and m1.store_host == ("127.0.0.1", 10911)
    assert (m1.born_timestamp, m1.store_timestamp) == (1_700_000_000_123, 1_700_000_000_456)
    assert m1.store_size == len(rec1)
    assert m1.message_queue.broker_name == "broker-a"
    assert m2.body == big  # inflated
    assert m2.reconsume_times == 2
    assert m2.msg_id == m2.offset_msg_id  # no UNIQ_KEY: the broker's id


def test_truncated_pull_body_is_a_clear_error():
    rec = stored_record(topic="T", body=b"x", props=b"", queue_id=0, queue_offset=0, phy=0)
    with pytest.raises(ClientError, match="not stored records at byte"):
        decode_messages(rec + rec[:30])


@pytest.mark.parametrize("compression", ["zlib", "lz4", "zstd"])
def test_pulled_bodies_of_every_codec_are_restored(compression):
    big = b'{"order": 1, "items": ["a", "b"]} ' * 300
    data, flag = compress_body(big, compression=compression)
    rec = stored_record(topic="T", body=data, props=b"", queue_id=0, queue_offset=0, phy=0, sys_flag=flag)
    (msg,) = decode_messages(rec)
    assert msg.body == big and msg.sys_flag == flag


def test_a_5x_zlib_body_is_inflated():
    # RocketMQ 5.x's default producer sets COMPRESSED and ZLIB (3) in bits 8-10
    rec = stored_record(
        topic="T", body=zlib.compress(b"x" * 5000, 5), props=b"", queue_id=0, queue_offset=0, phy=0, sys_flag=0x301
    )
    assert decode_messages(rec)[0].body == b"x" * 5000


@pytest.mark.parametrize(
    "sys_flag, body, reason",
    [
        (0x401, zlib.compress(b"x" * 5000), "compression type 4"),
        (0x701, zlib.compress(b"x" * 5000), "compression type 7"),
        (0x1, b"not deflated at all", "flagged zlib-compressed but does not decompress"),
        (0x201, b"not a zstd frame", "flagged zstd-compressed but does not decompress"),
    ],
)
def test_a_body_that_cannot_be_restored_is_reported_not_delivered(caplog, sys_flag, body, reason):
    bad = stored_record(topic="T", body=body, props=b"", queue_id=2, queue_offset=7, phy=0, sys_flag=sys_flag)
    good = stored_record(topic="T", body=b"fine", props=b"", queue_id=2, queue_offset=8, phy=len(bad))
    with caplog.at_level("ERROR", logger="rmq.client"):
        messages = decode_messages(bad + good)
    assert [m.body for m in messages] == [b"fine"]
    (record,) = caplog.records
    text = record.getMessage()
    assert reason in text and "queue 2 offset 7" in text
    assert encode_msg_id("127.0.0.1", 10911, 0) in text  # the broker's id: rmq-admin message id finds it


def test_message_properties():
    msg = Message("T", "text", tags="TagA", keys=["k1", "k2"], delay_level=3, properties={"x": "1"})
    assert msg.body == b"text"
    assert msg.properties == {"x": "1", "TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3"}
    assert msg.keys == ["k1", "k2"] and msg.delay_level == 3
    msg.delay_level = 0
    assert "DELAY" not in msg.properties


@pytest.mark.parametrize(
    "msg, reason",
    [
        (Message("", b"x"), "topic name is empty"),
        (Message("bad topic", b"x"), "characters outside"),
        (Message("T" * 128, b"x"), "more than 127"),
        (Message("SCHEDULE_TOPIC_XXXX", b"x"), "system topic"),
        (Message("T", b""), "body is empty"),
        (Message("T", b"x" * 101), "101 bytes, more than the maximum message size 100"),
    ],
)
def test_validation_refuses_before_sending(msg, reason):
    with pytest.raises(ClientError, match=reason):
        validate_message(msg, max_message_size=100)


def test_deliver_at_and_delay_set_rocketmq_5_timer_properties():
    at = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    message = Message("T", b"x", deliver_at=at)
    assert message.properties["TIMER_DELIVER_MS"] == str(int(at.timestamp() * 1000)) == "1893553445678"
    assert message.deliver_at == at and message.delay is None
    message = Message("T", b"x", delay=timedelta(minutes=2, milliseconds=5))
    assert message.properties == {"TIMER_DELAY_MS": "120005"} and message.delay == timedelta(seconds=120.005)
    message.delay = None
    assert message.properties == {}
    assert Message("T", b"x", properties={"TIMER_DELAY_SEC": "7"}).delay == timedelta(seconds=7)
    assert Message("T", b"x", delay_level=3).delay_level == 3  # the delay levels stay as they were


def test_a_negative_delay_or_both_kinds_are_refused():
    with pytest.raises(ValueError, match="delay must not be negative"):
        Message("T", b"x", delay=timedelta(seconds=-1))
    with pytest.raises(ValueError, match="deliver_at or delay, not both"):
        Message("T", b"x", deliver_at=datetime.now(timezone.utc), delay=timedelta(seconds=1))
