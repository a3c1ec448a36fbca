"""Client-side message ids (UNIQ_KEY) in MessageClientIDSetter's format."""

from __future__ import annotations

import datetime
import os
import re
import socket
import time

import pytest

from rmq.client.msg_id import UniqIdGenerator, create_uniq_id, uniq_id_parts


def test_format_is_32_uppercase_hex_chars():
    uniq = create_uniq_id()
    assert re.fullmatch(r"[0-9A-F]{32}", uniq)


def test_fields_read_back():
    gen = UniqIdGenerator(ip=socket.inet_aton("10.1.2.3"), pid=0x12345, seed=0xDEADBEEF)
    now = int(time.time() * 1000)
    first, second = gen.create(now), gen.create(now)
    ip, pid, diff, counter = uniq_id_parts(first)
    assert ip == "10.1.2.3"
    assert pid == 0x2345  # low 16 bits, as Java's (short) cast
    assert first[12:20] == "DEADBEEF"
    month_start = datetime.datetime.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    assert abs(diff - (now - int(month_start.timestamp() * 1000))) < 5_000
    assert uniq_id_parts(second)[3] == counter + 1
    assert first[:24] == second[:24]


def test_ids_of_a_process_are_unique():
    ids = {create_uniq_id() for _ in range(20_000)}
    assert len(ids) == 20_000
    assert uniq_id_parts(next(iter(ids)))[1] == os.getpid() & 0xFFFF


def test_malformed_id_is_refused():
    with pytest.raises(ValueError, match="expected 32"):
        uniq_id_parts("ABCD")


def test_a_forked_child_makes_ids_with_its_own_pid():
    create_uniq_id()  # the parent's generator exists before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, then out without the parent's exit handlers
        os.write(write, create_uniq_id().encode())
        os._exit(0)
    os.close(write)
    child_id = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert uniq_id_parts(child_id)[1] == pid & 0xFFFF
    assert uniq_id_parts(create_uniq_id())[1] == os.getpid() & 0xFFFF
