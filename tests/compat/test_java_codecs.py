"""lz4 and zstd bodies between our SDK and the Java streams RocketMQ 5.x's Lz4Compressor and
ZstdCompressor use (lz4-java's LZ4Frame streams, zstd-jni's at level 5), both ways: a 5.x consumer
restores what our producer compresses, and our consumer what a 5.x producer compresses. (A 5.x Java
client itself cannot be installed here: only its codec libraries come from Debian's packages.)"""

from __future__ import annotations

import subprocess

import pytest

from rmq.client import Message, Producer
from rmq.protocol.compression import compress_body, decompress_body
from rmq.protocol.record import decode_records
from tests.helpers.compat import install_java_codecs
from tests.helpers.requests import pull_request

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BODY = b"".join(b'{"orderId": "ORD-%d", "sku": "SKU-%05d", "qty": %d}\n' % (i, i * 7, i % 5) for i in range(300))


@pytest.fixture(scope="module")
def java_codecs() -> list[str]:
    return install_java_codecs()


def java(command: list[str], action: str, codec: str, data: bytes) -> bytes:
    done = subprocess.run([*command, action, codec], input=data, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout


@pytest.mark.parametrize("codec, flag", [("lz4", 0x101), ("zstd", 0x201)])
def test_java_reads_our_bodies_and_we_read_javas(java_codecs, codec, flag):
    ours, our_flag = compress_body(BODY, compression=codec)
    assert our_flag == flag
    assert java(java_codecs, "decompress", codec, ours) == BODY
    theirs = java(java_codecs, "compress", codec, BODY)
    assert decompress_body(theirs, flag) == BODY


def test_a_stored_lz4_body_is_what_a_5x_consumer_restores(java_codecs, cluster):
    """Through a broker: the body bytes our producer sent come back in the pulled record unchanged,
    flagged LZ4, and Java's stream restores them."""
    topic = cluster.create_topic("JavaLz4", queues=1)
    with Producer("java-lz4-p", cluster.namesrv_addr, instance_name="java-lz4", compression="lz4") as producer:
        producer.send(Message(topic, BODY))
    (record,) = decode_records(cluster.call(pull_request(topic, 0, 0)).body)
    assert record.sys_flag & 0x701 == 0x101
    assert java(java_codecs, "decompress", "lz4", bytes(record.body)) == BODY
