"""The HA wire format (rmq.protocol.ha) against golden bytes written from docs/replication.md and the
module's layout table of cluster authentication."""

from __future__ import annotations

import hashlib
import hmac

import pytest

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


NONCE_A = bytes(range(32))
NONCE_B = bytes(range(32, 64))


def test_a_hello_is_the_magic_then_the_slave_nonce_and_no_report_looks_like_one():
    golden = bytes.fromhex("ff524d5148413031") + NONCE_A  # 0xff "RMQHA01"
    assert ha.encode_hello(NONCE_A) == golden and ha.HELLO_SIZE == 40
    assert ha.is_hello(golden)
    # a report is a non-negative int64: its first byte is never 0xff
    assert not ha.is_hello(ha.encode_report((1 << 63) - 1))


def test_a_challenge_is_magic_flags_nonce_proof():
    proof = bytes([7]) * 32
    golden = bytes.fromhex("ff524d5148413031") + bytes.fromhex("00000001") + NONCE_B + proof
    assert ha.encode_challenge(ha.CHALLENGE_AUTHENTICATES, NONCE_B, proof) == golden
    assert ha.CHALLENGE_SIZE == 76
    assert ha.decode_challenge(golden) == (1, NONCE_B, proof)
    with pytest.raises(ValueError, match="expected a challenge"):
        ha.decode_challenge(bytes(76))


def test_a_proof_is_the_access_key_with_its_length_then_the_hmac():
    proof = bytes([9]) * 32
    golden = bytes.fromhex("0003") + b"ak1" + proof
    assert ha.encode_proof("ak1", proof) == golden
    assert ha.decode_proof(golden + b"report..") == ("ak1", proof, 2 + 3 + 32)
    assert ha.decode_proof(golden[:-1]) is None and ha.decode_proof(b"\x00") is None
    with pytest.raises(ValueError, match=r"access key length -1 is not in \[0, 1024\]"):
        ha.decode_proof(bytes.fromhex("ffff") + bytes(40))


def test_the_proofs_are_hmac_sha256_over_a_label_both_nonces_and_the_access_key():
    secret, key = "s3cret", "ak1"
    master = hmac.new(b"s3cret", b"rmq-ha-master" + NONCE_A + NONCE_B + b"ak1", hashlib.sha256).digest()
    slave = hmac.new(b"s3cret", b"rmq-ha-slave" + NONCE_B + NONCE_A + b"ak1", hashlib.sha256).digest()
    assert ha.master_proof(secret, key, slave_nonce=NONCE_A, master_nonce=NONCE_B) == master
    assert ha.slave_proof(secret, key, master_nonce=NONCE_B, slave_nonce=NONCE_A) == slave
    assert master != slave
