"""Client-side message ids (the UNIQ_KEY property), as RocketMQ's MessageClientIDSetter makes them.

    offset  size  field (16 bytes, written as 32 uppercase hex chars)
    0       4     producer IPv4 address
    4       2     process id (low 16 bits)
    6       4     a per-process random hash (Java: its class loader's hashCode)
    10      4     milliseconds since the start of the current month (int32)
    14      2     a per-process counter (wraps at 65536)

Unique enough across producers without coordination; the broker indexes it so a message can be
found by it. ``uniq_id_parts`` reads one back (tests, tools).
"""

from __future__ import annotations

import datetime
import itertools
import os
import random
import socket
import struct
import threading
import time

_PREFIX = struct.Struct(">4sHI")
_SUFFIX = struct.Struct(">IH")
UNIQ_ID_LENGTH = 2 * (_PREFIX.size + _SUFFIX.size)


def local_ipv4() -> bytes:
    """This host's IPv4 address as 4 bytes; a time-derived fake one when it has none.

    Only the host's own name is resolved (no packet leaves the machine).
    """
    try:
        ip = socket.gethostbyname(socket.gethostname())
        if not ip.startswith("127."):
            return socket.inet_aton(ip)
    except OSError:
        pass
    # RocketMQ's createFakeIP: the low 4 bytes of the current time in ms.
    return struct.pack(">Q", int(time.time() * 1000))[4:]


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """(start of this month, start of next month) in local time, as epoch ms."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)


class UniqIdGenerator:
    """Makes UNIQ_KEY ids; thread-safe. One per process is enough (``create_uniq_id``)."""

    def __init__(self, ip: bytes | None = None, pid: int | None = None, seed: int | None = None):
        self.owner_pid = os.getpid()
        ip = local_ipv4() if ip is None else ip
        pid = self.owner_pid if pid is None else pid
        seed = random.getrandbits(32) if seed is None else seed
        self._fixed = _PREFIX.pack(ip, pid & 0xFFFF, seed).hex().upper()
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._start_ms, self._next_start_ms = _month_start_ms(int(time.time() * 1000))

    def create(self, now_ms: int | None = None) -> str:
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if now_ms >= self._next_start_ms:
            with self._lock:
                if now_ms >= self._next_start_ms:
                    self._start_ms, self._next_start_ms = _month_start_ms(now_ms)
        # A clock stepped back a little (NTP) gives 0 rather than a negative span.
        diff = max(0, now_ms - self._start_ms) & 0xFFFFFFFF
        # _SUFFIX's two fields as hex in one f-string (cheaper than pack, hex and upper)
        return f"{self._fixed}{diff:08X}{next(self._counter) & 0xFFFF:04X}"


def uniq_id_parts(uniq_id: str) -> tuple[str, int, int, int]:
    """``(ip, pid, ms since month start, counter)`` of an id made by UniqIdGenerator."""
    raw = bytes.fromhex(uniq_id)
    if len(raw) != UNIQ_ID_LENGTH // 2:
        raise ValueError(f"uniq id {uniq_id!r} is {len(uniq_id)} hex chars, expected {UNIQ_ID_LENGTH}")
    ip, pid, _seed = _PREFIX.unpack_from(raw)
    diff, counter = _SUFFIX.unpack_from(raw, _PREFIX.size)
    return socket.inet_ntoa(ip), pid, diff, counter


_generator: UniqIdGenerator | None = None
_generator_lock = threading.Lock()


def create_uniq_id() -> str:
    """A fresh UNIQ_KEY from the process-wide generator (re-seeded after fork: the pid is in it)."""
    global _generator
    gen = _generator
    if gen is None:
        with _generator_lock:
            if _generator is None:
                _generator = UniqIdGenerator()
            gen = _generator
    return gen.create()


def _forget_generator() -> None:
    # a forked child makes its own (its pid is in the ids); checked here rather than per id
    global _generator
    _generator = None


os.register_at_fork(after_in_child=_forget_generator)
