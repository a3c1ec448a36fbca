"""The record codec, both twins (compiled ``_record`` and pure ``record_py``): check outcomes,
msgIds and decoding of records built byte by byte from docs/store-format.md#commitlog-record."""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.errors import RecordError, StoreError
from rmq.protocol import _record, layout, record, record_py
from tests.helpers.golden import spec_record
from tests.helpers.twins import chosen_implementation

TWINS = [pytest.param(record_py, id="pure"), pytest.param(_record, id="compiled")]


@pytest.fixture(params=TWINS)
def codec(request):
    return request.param


def test_msg_id_encoding(codec):
    msg_id = codec.encode_msg_id("10.1.2.3", 10911, 0x123456789A)
    assert msg_id == (socket.inet_aton("10.1.2.3") + struct.pack(">iq", 10911, 0x123456789A)).hex().upper()
    assert len(msg_id) == 32 and msg_id == msg_id.upper()
    assert codec.decode_msg_id(msg_id) == ("10.1.2.3", 10911, 0x123456789A)
    with pytest.raises(ValueError):
        codec.decode_msg_id("ABC")


def test_ipv4_ints(codec):
    assert codec.ipv4_to_int("192.168.0.9") == 0xC0A80009
    assert codec.int_to_ipv4(0xC0A80009) == "192.168.0.9"


def test_body_crc_is_rocketmqs_masked_crc32(codec):
    # zlib's CRC-32 of "123456789" is 0xCBF43926; RocketMQ keeps the low 31 bits
    assert codec.body_crc(b"123456789") == 0xCBF43926 & 0x7FFFFFFF
    assert codec.body_crc(memoryview(b"")) == 0


def test_check_record_outcomes(codec):
    rec = spec_record(phy_offset=100, body=b"abc", topic="T")
    results = codec.CHECK_RESULTS
    assert codec.check_record(rec) == len(rec)
    assert codec.check_record(rec, expected_offset=100) == len(rec)
    assert results[codec.check_record(rec, expected_offset=0)].startswith("physical offset")
    assert results[codec.check_record(rec[:-1])] == "truncated"
    corrupt = bytearray(rec)
    corrupt[90] ^= 1  # a body byte
    assert results[codec.check_record(corrupt)] == "body CRC mismatch"
    assert codec.check_record(corrupt, check_crc=False) == len(rec)
    assert results[codec.check_record(b"\0" * 200)] == "empty"
    assert results[codec.check_record(b"\xff" * 200)] == "bad magic"
    eof = struct.pack(">iI", 50, 0xCBD43194) + b"\0" * 42
    assert results[codec.check_record(eof)] == "end-of-file marker"
    lying = bytearray(rec)
    lying[84:88] = struct.pack(">i", len(rec))  # BODYLEN past the record's end
    assert results[codec.check_record(lying)] == "lengths do not add up"


def test_both_twins_judge_every_prefix_and_flip_alike():
    twins = [record_py, _record]
    rec = spec_record(body=bytes(range(200)), topic="TopicA", props=b"TAGS\x01a\x02")
    for cut in range(0, len(rec) + 1, 7):
        assert len({t.check_record(rec[:cut]) for t in twins}) == 1, cut
    for i in range(len(rec)):
        flipped = bytearray(rec)
        flipped[i] ^= 0x40
        assert len({t.check_record(bytes(flipped)) for t in twins}) == 1, i


def test_decode_record_reads_every_field():
    props = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AB12\x02"
    rec = spec_record(
        topic="TopicT",
        body=b"payload",
        props=props,
        queue_id=3,
        flag=7,
        queue_offset=41,
        phy_offset=1000,
        sys_flag=1,
        reconsume=2,
        prepared=9,
    )
    m = record.decode_record(rec + b"trailing bytes are not part of it")
    assert (m.topic, m.body, m.tags, m.keys, m.uniq_key) == ("TopicT", b"payload", "TagA", ["k1", "k2"], "AB12")
    assert (m.queue_id, m.flag, m.queue_offset, m.physical_offset) == (3, 7, 41, 1000)
    assert (m.sys_flag, m.reconsume_times, m.prepared_transaction_offset) == (1, 2, 9)
    assert m.born_host == ("10.0.0.7", 40001) and m.store_host == ("127.0.0.1", 10911)
    assert (m.born_timestamp, m.store_timestamp, m.total_size) == (1_700_000_000_123, 1_700_000_000_456, len(rec))
    assert m.msg_id == record.encode_msg_id("127.0.0.1", 10911, 1000)


def test_decode_records_splits_a_body_and_names_where_it_breaks():
    a = spec_record(body=b"a", phy_offset=0)
    b = spec_record(body=b"bb", phy_offset=len(a))
    assert [m.body for m in record.decode_records(a + b)] == [b"a", b"bb"]
    with pytest.raises(RecordError, match=f"at byte {len(a) + len(b)} of"):
        record.decode_records(a + b + a[:30])
    corrupt = bytearray(a)
    corrupt[88] ^= 1  # the body's byte
    with pytest.raises(StoreError):  # RecordError is a StoreError
        record.decode_record(corrupt)


def test_layout_constants_match_the_compiled_codec():
    for name, value in _record.LAYOUT.items():
        assert getattr(layout, name) == value, name
    assert _record.CHECK_RESULTS == layout.CHECK_RESULTS
    assert layout.RECORD_HEAD.size == layout.REC_BODY
    assert layout.REC_FIXED_OVERHEAD == layout.REC_BODY + 1 + 2


@pytest.mark.parametrize("flag, expected", [("1", "record_py"), ("", "_record")])
def test_environment_chooses_the_implementation(flag, expected):
    assert chosen_implementation("rmq.protocol.record", flag) == expected


def test_record_fields_read_a_batch_as_decode_record_does(codec):
    props = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02\x02no-separator\x02UNIQ_KEY\x01AB12\x02TAGS\x01last\x02"
    a = spec_record(topic="TopicT", body=b"payload", props=props, queue_id=3, flag=-7, queue_offset=41, sys_flag=1)
    b = spec_record(topic="Topic\xe9", body=b"", props=b"bad\xff\x01utf\xfe8", phy_offset=len(a), reconsume=2)
    fields, stop, outcome = codec.record_fields(a + b)
    assert (stop, outcome) == (len(a) + len(b), 1)
    assert [record.StoredMessage(*f) for f in fields] == [
        record.decode_record(a, check_crc=False),
        record.decode_record(b, check_crc=False),
    ]
    assert fields[0][15] == {"TAGS": "last", "KEYS": "k1 k2", "UNIQ_KEY": "AB12"}
    assert fields[1][15] == {"bad\ufffd": "utf\ufffd8"}


def test_record_fields_stop_where_the_records_do_in_both_twins():
    # what a pull answer cut short or corrupted looks like: every prefix, every flipped bit
    batch = spec_record(body=b"x" * 40, props=b"TAGS\x01a\x02") + spec_record(body=b"yy", topic="T2", phy_offset=131)
    for cut in range(len(batch) + 1):
        assert record_py.record_fields(batch[:cut]) == _record.record_fields(batch[:cut]), cut
    for i in range(len(batch)):
        flipped = bytearray(batch)
        flipped[i] ^= 0x41
        assert record_py.record_fields(flipped) == _record.record_fields(flipped), i
    fields, stop, outcome = _record.record_fields(batch + b"\x00" * 30)
    assert (len(fields), stop, layout.CHECK_RESULTS[outcome]) == (2, len(batch), "empty")


@settings(max_examples=200, deadline=None)
@given(head=st.binary(max_size=120), props=st.binary(max_size=60), tail=st.binary(max_size=120))
def test_record_fields_of_any_bytes_agree_in_both_twins(head, props, tail):
    # untrusted bytes from the network: the compiled reader never reads past a checked length
    for data in (head + tail, spec_record(body=head, props=props) + tail):
        assert record_py.record_fields(data) == _record.record_fields(data)
