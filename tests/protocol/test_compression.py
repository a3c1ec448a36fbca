"""Body compression: the threshold, the sysFlag bits each codec sets (RocketMQ 4.x and 5.x), the
frame shapes Java's codecs read and write, and each codec through a real broker. (zlib between our SDK
and a 4.x client, both ways: tests/compat/test_sdk_interop.py.)"""

from __future__ import annotations

import logging
import struct
import time
import zlib

import lz4.frame
import pytest
import zstandard

from rmq.client import Message, Producer, PullConsumer
from rmq.errors import ClientError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.compression import (
    COMPRESS_OVER,
    BodyTooLarge,
    UndecodableBody,
    check_compression,
    compress_body,
    decompress_body,
)
from rmq.protocol.message import MAX_MESSAGE_SIZE
from tests.helpers.requests import send_request

BODY = b'{"event": "order-created", "amount": 12.5, "sku": "A-1"}\n' * 200


def test_bodies_below_the_threshold_are_sent_as_they_are():
    small = b"a" * (COMPRESS_OVER - 1)
    for compression in ("zlib", "lz4", "zstd"):
        assert compress_body(small, compression=compression) == (small, 0)


@pytest.mark.parametrize(
    "compression, flag",
    [
        ("zlib", 0x1),  # 4.x: bit 0 only, so every 4.x consumer inflates it
        ("lz4", 0x101),  # 5.x: COMPRESSED | LZ4 (1) << 8
        ("zstd", 0x201),  # 5.x: COMPRESSED | ZSTD (2) << 8
    ],
)
def test_each_codec_sets_rocketmq_sys_flag_bits_and_round_trips(compression, flag):
    data, got_flag = compress_body(BODY, compression=compression)
    assert got_flag == flag and len(data) < len(BODY) // 4
    assert decompress_body(data, got_flag) == BODY


def test_zlib_is_level_5_deflate_as_the_java_producer_writes():
    data, _ = compress_body(BODY)
    assert data == zlib.compress(BODY, 5)


def test_lz4_frames_have_independent_blocks_as_lz4_java_needs():
    data, _ = compress_body(BODY, compression="lz4")
    magic, flg = struct.unpack_from("<IB", data)
    assert magic == 0x184D2204
    assert flg & 0x20  # block independence: lz4-java's LZ4FrameInputStream refuses linked blocks
    assert not flg & 0x08  # no content size, as LZ4FrameOutputStream writes none


def test_frames_as_java_writes_them_are_read():
    # lz4-java's LZ4FrameOutputStream: independent blocks, no checksum, no size (FLG 0x60);
    # real Java streams: tests/compat/test_java_codecs.py
    java_lz4 = lz4.frame.compress(BODY, block_linked=False, content_checksum=False, store_size=False)
    assert java_lz4[4] == 0x60
    assert decompress_body(java_lz4, 0x101) == BODY
    # zstd-jni's ZstdOutputStream streams: no content size in the frame header
    chunker = zstandard.ZstdCompressor(level=5, write_content_size=False).compressobj()
    java_zstd = chunker.compress(BODY) + chunker.flush()
    assert decompress_body(java_zstd, 0x201) == BODY


def test_an_unknown_type_is_refused_by_name():
    with pytest.raises(UndecodableBody, match=r"compression type 5 \(sysFlag 0x501"):
        decompress_body(b"whatever", 0x501)


def test_a_codec_name_is_checked():
    assert check_compression(" LZ4 ") == "lz4"
    with pytest.raises(ClientError, match="'snappy' is not one of zlib, lz4, zstd"):
        check_compression("snappy")


def test_every_codec_round_trips_through_a_broker(cluster):
    topic = cluster.create_topic("Compressed", queues=1)
    sent = {}
    for compression in ("zlib", "lz4", "zstd"):
        body = BODY.replace(b"order-created", compression.encode().ljust(13, b"-"))
        with Producer(
            f"p-{compression}", cluster.namesrv_addr, instance_name=compression, compression=compression
        ) as p:
            p.send(Message(topic, body))
            p.send(Message(topic, b"small " + compression.encode()))
        sent[compression] = body
    with PullConsumer("c-codecs", cluster.namesrv_addr, consume_from_where="FIRST_OFFSET") as consumer:
        consumer.subscribe(topic, "*")
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 6 and time.monotonic() < deadline:
            got += consumer.poll(timeout=0.5)
    assert [(m.body, m.sys_flag & 0x701) for m in got if not m.body.startswith(b"small")] == [
        (sent["zlib"], 0x1),
        (sent["lz4"], 0x101),
        (sent["zstd"], 0x201),
    ]
    assert sorted(m.body for m in got if m.body.startswith(b"small")) == [b"small lz4", b"small zlib", b"small zstd"]


def test_a_producer_refuses_an_unknown_codec():
    with pytest.raises(ClientError, match="'gzip' is not one of"):
        Producer("p-bad", "127.0.0.1:1", compression="gzip")


@pytest.mark.parametrize("compression", ["zlib", "lz4", "zstd"])
def test_inflation_stops_one_byte_past_the_cap(compression):
    bomb, flag = compress_body(b"\0" * (1 << 20), compression=compression)
    assert len(bomb) < 8 * 1024  # a MiB of zeros
    with pytest.raises(
        BodyTooLarge, match=rf"{compression}-compressed body \({len(bomb)} bytes\) inflates past 65536 bytes"
    ):
        decompress_body(bomb, flag, 64 * 1024)
    assert decompress_body(bomb, flag, 1 << 20) == b"\0" * (1 << 20)  # the cap itself is allowed


def test_the_default_cap_is_the_brokers_max_message_size():
    assert MAX_MESSAGE_SIZE == 4 * 1024 * 1024
    with pytest.raises(BodyTooLarge, match="past 4194304 bytes"):
        decompress_body(zlib.compress(b"\0" * (MAX_MESSAGE_SIZE + 1)), 0x1)
    with pytest.raises(UndecodableBody, match="does not decompress: .*truncated"):
        decompress_body(zlib.compress(BODY)[:-10], 0x1)


def test_a_consumer_skips_a_body_inflating_past_its_max_message_size_and_goes_on(cluster, caplog):
    # a 1 MiB body deflated to 1 KiB and sent as is (our producer refuses bodies past the cap
    # before compressing): issue 22 saw a 1 MB zlib body become 1 GiB in the consumer
    topic = cluster.create_topic("Bombs", queues=1)
    bomb = send_request(topic, zlib.compress(b"\0" * (1 << 20)), code=RequestCode.SEND_MESSAGE)
    bomb.ext_fields["sysFlag"] = "1"
    stored = cluster.call(bomb)
    assert stored.code == ResponseCode.SUCCESS
    with Producer("p-bombs", cluster.namesrv_addr) as producer:
        producer.send(Message(topic, b"after-1"))
        producer.send(Message(topic, BODY))  # compressed, inflates within the cap
    caplog.set_level(logging.ERROR, logger="rmq.client")
    config = dict(consume_from_where="FIRST_OFFSET", max_message_size=64 * 1024)
    with PullConsumer("c-bombs", cluster.namesrv_addr, **config) as consumer:
        consumer.subscribe(topic, "*")
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 2 and time.monotonic() < deadline:
            got += consumer.poll(timeout=0.5)
    assert [(m.body, m.queue_offset) for m in got] == [(b"after-1", 1), (BODY, 2)]
    [report] = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert stored.ext_fields["msgId"] in report and f"({topic} queue 0 offset 0)" in report
    assert "inflates past 65536 bytes" in report and "maxMessageSize" in report
