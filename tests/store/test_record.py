"""Golden bytes: what the store writes equals records built independently from docs/store-format.md#commitlog-record."""

from __future__ import annotations

import struct

from rmq.protocol.message import encode_properties, java_string_hash
from rmq.protocol.record import decode_record, encode_msg_id, ipv4_to_int
from tests.helpers.golden import spec_record


def test_stored_record_matches_spec_bytes(open_store):
    store = open_store(broker_ip1="10.1.2.3", listen_port=10911)
    props = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "AC110001000018B4AAC2"})
    store.put_message("TopicA", 0, b"first", b"")
    body = bytes(range(256)) * 3
    r = store.put_message(
        "TopicA",
        1,
        body,
        props,
        sys_flag=0,
        born_timestamp=1700000000123,
        flag=7,
        reconsume_times=2,
        born_host=ipv4_to_int("192.168.0.9"),
        born_port=54321,
    )
    assert r.status.name == "PUT_OK" and r.queue_offset == 0
    stored = bytes(store.look_message_by_offset(r.wrote_offset))
    expected = spec_record(
        queue_id=1,
        flag=7,
        queue_offset=0,
        phy_offset=r.wrote_offset,
        sys_flag=0,
        born_ts=1700000000123,
        born_host=("192.168.0.9", 54321),
        store_ts=r.store_timestamp,
        store_host=("10.1.2.3", 10911),
        reconsume=2,
        prepared=0,
        body=body,
        topic="TopicA",
        props=props,
    )
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


def test_put_result_msg_id_is_what_a_client_rebuilds_from_the_record(open_store):
    store = open_store(broker_ip1="127.0.0.1", listen_port=10999)
    r = store.put("TopicA", b"hello", tags="a")
    message = decode_record(store.look_message_by_offset(r.wrote_offset))
    assert r.msg_id == message.msg_id == encode_msg_id("127.0.0.1", 10999, r.wrote_offset)
    assert message.body == b"hello" and message.tags == "a" and message.store_host == ("127.0.0.1", 10999)
