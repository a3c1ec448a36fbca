"""Golden bytes: what the store writes equals records built independently from SPEC.md section 5."""

from __future__ import annotations

import socket
import struct
import zlib

import pytest

from rmq.message import encode_properties, java_string_hash
from rmq.errors import StoreError
from rmq.store import check_record, decode_msg_id, decode_record, encode_msg_id, ipv4_to_int
from rmq._store import CHECK_RESULTS

MAGIC = 0xDAA320A7


def spec_record(*, queue_id, flag, queue_offset, phy_offset, sys_flag, born_ts, born_host, store_ts,
                store_host, reconsume, prepared, body, topic, props) -> bytes:
    """SPEC.md section 5, field by field, with nothing from rmq.store."""
    topic_b = topic.encode()
    total = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + len(body) + 1 + len(topic_b) + 2 + len(props)
    out = struct.pack(">i", total)                                  # 1 TOTALSIZE
    out += struct.pack(">I", MAGIC)                                 # 2 MAGIC
    out += struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF)         # 3 BODYCRC
    out += struct.pack(">i", queue_id)                              # 4 QUEUEID
    out += struct.pack(">i", flag)                                  # 5 FLAG
    out += struct.pack(">q", queue_offset)                          # 6 QUEUEOFFSET
    out += struct.pack(">q", phy_offset)                            # 7 PHYSICALOFFSET
    out += struct.pack(">i", sys_flag)                              # 8 SYSFLAG
    out += struct.pack(">q", born_ts)                               # 9 BORNTIMESTAMP
    out += socket.inet_aton(born_host[0]) + struct.pack(">i", born_host[1])   # 10 BORNHOST
    out += struct.pack(">q", store_ts)                              # 11 STORETIMESTAMP
    out += socket.inet_aton(store_host[0]) + struct.pack(">i", store_host[1])  # 12 STOREHOST
    out += struct.pack(">i", reconsume)                             # 13 RECONSUMETIMES
    out += struct.pack(">q", prepared)                              # 14 PREPARED_TX_OFFSET
    out += struct.pack(">i", len(body)) + body                      # 15 BODYLEN + body
    out += struct.pack(">b", len(topic_b)) + topic_b                # 16 TOPICLEN + topic
    out += struct.pack(">h", len(props)) + props                    # 17 PROPLEN + properties
    assert len(out) == total == 91 + len(body) + len(topic_b) + len(props)
    return out


def test_stored_record_matches_spec_bytes(open_store):
    store = open_store(broker_ip1="10.1.2.3", listen_port=10911)
    props = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "AC110001000018B4AAC2"})
    store.put_message("TopicA", 0, b"first", b"")
    body = bytes(range(256)) * 3
    r = store.put_message("TopicA", 1, body, props, 0, 1700000000123, 7, 2,
                          ipv4_to_int("192.168.0.9"), 54321)
    assert r.status.name == "PUT_OK" and r.queue_offset == 0
    stored = bytes(store.look_message_by_offset(r.wrote_offset))
    expected = spec_record(queue_id=1, flag=7, queue_offset=0, phy_offset=r.wrote_offset, sys_flag=0,
                           born_ts=1700000000123, born_host=("192.168.0.9", 54321), store_ts=r.store_timestamp,
                           store_host=("10.1.2.3", 10911), reconsume=2, prepared=0, body=body,
                           topic="TopicA", props=props)
    assert stored == expected
    assert r.wrote_bytes == len(expected)
    # and it is in the file at that offset
    path = store.commit_log.mapped_files[0].path
    with open(path, "rb") as f:
        f.seek(r.wrote_offset)
        assert f.read(len(expected)) == expected


def test_consume_queue_entry_matches_spec_bytes(open_store):
    store = open_store()
    props = encode_properties({"TAGS": "TagA"})
    for _ in range(3):
        r = store.put_message("TopicB", 2, b"x" * 10, props)
    cq = store.find_consume_queue("TopicB", 2)
    raw = bytes(cq.read_entries(0, 10))
    assert len(raw) == 60
    assert raw[40:60] == struct.pack(">qiq", r.wrote_offset, r.wrote_bytes, java_string_hash("TagA"))
    with open(cq.mapped_file_queue.mapped_files[0].path, "rb") as f:
        assert f.read(60) == raw


def test_msg_id_encoding():
    msg_id = encode_msg_id("10.1.2.3", 10911, 0x123456789A)
    assert msg_id == (socket.inet_aton("10.1.2.3") + struct.pack(">iq", 10911, 0x123456789A)).hex().upper()
    assert len(msg_id) == 32 and msg_id == msg_id.upper()
    assert decode_msg_id(msg_id) == ("10.1.2.3", 10911, 0x123456789A)
    with pytest.raises(ValueError):
        decode_msg_id("ABC")


def test_put_result_msg_id_is_what_a_client_rebuilds_from_the_record(open_store):
    store = open_store(broker_ip1="127.0.0.1", listen_port=10999)
    r = store.put("TopicA", b"hello", tags="a")
    message = decode_record(store.look_message_by_offset(r.wrote_offset))
    assert r.msg_id == message.msg_id == encode_msg_id("127.0.0.1", 10999, r.wrote_offset)
    assert message.body == b"hello" and message.tags == "a" and message.store_host == ("127.0.0.1", 10999)


def test_check_record_outcomes():
    record = spec_record(queue_id=0, flag=0, queue_offset=0, phy_offset=100, sys_flag=0, born_ts=1,
                         born_host=("1.2.3.4", 1), store_ts=2, store_host=("1.2.3.4", 2), reconsume=0,
                         prepared=0, body=b"abc", topic="T", props=b"")
    assert check_record(record) == len(record)
    assert check_record(record, expected_offset=100) == len(record)
    assert CHECK_RESULTS[check_record(record, expected_offset=0)].startswith("physical offset")
    assert CHECK_RESULTS[check_record(record[:-1])] == "truncated"
    corrupt = bytearray(record)
    corrupt[90] ^= 1    # a body byte
    assert CHECK_RESULTS[check_record(corrupt)] == "body CRC mismatch"
    assert check_record(corrupt, check_crc=False) == len(record)
    assert CHECK_RESULTS[check_record(b"\0" * 200)] == "empty"
    assert CHECK_RESULTS[check_record(b"\xff" * 200)] == "bad magic"
    eof = struct.pack(">iI", 50, 0xCBD43194) + b"\0" * 42
    assert CHECK_RESULTS[check_record(eof)] == "end-of-file marker"
    with pytest.raises(StoreError):
        decode_record(corrupt)
