"""The HA wire format (rmq.protocol.ha) against golden bytes written from SPEC.md section 6."""

from __future__ import annotations

from rmq.protocol import ha


def test_a_slave_report_is_a_bare_big_endian_int64():
    assert ha.encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert ha.decode_report(bytearray(bytes.fromhex("00000000 00000000 0000000000100000")), 8) == 1 << 20
    assert ha.REPORT_SIZE == 8


def test_a_master_frame_header_is_start_offset_then_size():
    golden = bytes.fromhex("000000000080000000008000")  # startOffset 8 MiB, 32 KiB of data
    assert ha.encode_frame_header(8 << 20, 32 << 10) == golden
    assert ha.decode_frame_header(golden) == (8 << 20, 32 << 10)
    assert ha.FRAME_HEADER_SIZE == 12


def test_a_heartbeat_is_a_frame_of_size_zero():
    assert ha.encode_frame_header(77, ha.HEARTBEAT_SIZE) == (77).to_bytes(8, "big") + bytes(4)
