"""The timing wheel's two structures: the TimerLog on disk and the TimerWheel over it (RocketMQ 5.x's
TimerLog and TimerWheel, simplified).

The TimerLog is an append-only log of fixed 48-byte units, one per timed message, in fixed-size
files under ``<storePathRootDir>/timerlog/`` named by the position of their first byte (20 digits,
as CommitLog files are). Units never straddle two files. A unit, all integers big-endian::

     0  int64  prevPos      position of the previous unit of the same slot; -1 for none
     8  int64  slot         the tick it is filed under: deliverMs // timerPrecisionMs, or the tick
                            that was open when it was filed if that one had passed (a late unit)
    16  int64  deliverMs    TIMER_OUT_MS: when the message is due, epoch ms
    24  int64  offsetPy     the waiting message's record in the CommitLog ...
    32  int32  sizePy       ... and its size
    36  int32  magic        UNIT_MAGIC: the unit was written whole (zeroes end the log)
    40  int64  queueOffset  its entry in rmq_sys_wheel_timer queue 0 (where the enqueue got to)

The TimerWheel is a ring of ``slots_total`` 24-byte slots in memory (an anonymous mapping: only
the pages of slots in use are resident), slot ``s`` at ``(s % slots_total) * 24``::

     0  int64  slot         which tick the slot holds now (a stale tick reads as empty)
     8  int64  lastPos      the newest unit of the tick: its chain runs back through prevPos
    16  int32  num          units in the chain
    20  int32  (reserved)

The wheel is not written to disk: it is rebuilt from the TimerLog at start
(``TimerLog.units``). Memory is therefore the wheel (a few MB at the defaults) and the units
of the tick being delivered, however many messages wait.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from collections.abc import Iterator
from typing import BinaryIO

from rmq.store._mapped_file import file_name_of

log = logging.getLogger("rmq.broker")

UNIT = struct.Struct(">qqqqiiq")
UNIT_SIZE = UNIT.size  # 48
UNIT_PREV_POS = 0
UNIT_SLOT = 8
UNIT_MAGIC_AT = 36
UNIT_MAGIC = 0x7131E7A1
NO_POS = -1

# Bytes of a timer log file read at once when it is scanned (a multiple of UNIT_SIZE).
_CHUNK = 21_846 * UNIT_SIZE  # about 1 MiB

SLOT = struct.Struct(">qqii")
SLOT_SIZE = SLOT.size  # 24


class TimerLog:
    """The timer log's files: ``append`` a unit, ``read`` one by position, ``units`` for the rebuild.

    Not thread-safe: the timer store serialises appends and reads under its lock.
    """

    def __init__(self, store_path: str, file_size: int):
        self.store_path = store_path
        self.file_size = max(UNIT_SIZE, file_size - file_size % UNIT_SIZE)
        # start position -> (file object, mapping), oldest first
        self._files: dict[int, tuple[BinaryIO, mmap.mmap]] = {}
        self._max_slot: dict[int, int] = {}  # start position -> the greatest slot of its units
        self.write_pos = 0
        self._flushed_pos = 0

    # -- files -----------------------------------------------------------------------------------

    def load(self) -> int:
        """Map the files there are; the write position is after the last whole unit (a unit torn by a
        power cut and what follows it are zeroed). Returns the bytes of units dropped that way."""
        os.makedirs(self.store_path, exist_ok=True)
        starts = sorted(int(name) for name in os.listdir(self.store_path) if name.isdigit())
        for start in starts:
            path = os.path.join(self.store_path, file_name_of(start))
            if os.path.getsize(path) != self.file_size:
                raise OSError(
                    f"timer log file {path} is {os.path.getsize(path)} bytes, expected {self.file_size} "
                    "(mappedFileSizeTimerLog changed?): move the timerlog directory away to rebuild it"
                )
            self._map(start, create=False)
        self.write_pos = starts[0] if starts else 0
        torn = 0
        if starts:
            last = starts[-1]
            mapping = self._files[last][1]
            end = 0
            for unit in self._units_of(mapping, self.file_size):
                if unit[5] != UNIT_MAGIC:
                    break
                end += UNIT_SIZE
            for chunk_start in range(end, self.file_size, _CHUNK):
                chunk_end = min(chunk_start + _CHUNK, self.file_size)
                if mapping[chunk_start:chunk_end].strip(b"\0"):  # a power cut wrote pages out of order
                    torn += chunk_end - chunk_start
                    mapping[chunk_start:chunk_end] = bytes(chunk_end - chunk_start)
            self.write_pos = last + end
        self._flushed_pos = self.write_pos
        return torn

    def _map(self, start: int, create: bool) -> mmap.mmap:
        path = os.path.join(self.store_path, file_name_of(start))
        f = open(path, "r+b" if not create else "w+b")  # kept open with its mapping
        if create:
            try:
                # blocks on disk now: a unit written through the mapping on a full disk would SIGBUS
                os.posix_fallocate(f.fileno(), 0, self.file_size)
            except OSError:
                f.close()
                os.unlink(path)
                raise
        mapping = mmap.mmap(f.fileno(), self.file_size)
        self._files[start] = (f, mapping)
        self._max_slot.setdefault(start, -1)
        return mapping

    def _file_of(self, pos: int) -> tuple[int, mmap.mmap] | None:
        start = pos - pos % self.file_size
        entry = self._files.get(start)
        return None if entry is None else (start, entry[1])

    @property
    def min_pos(self) -> int:
        return min(self._files, default=self.write_pos)

    def close(self) -> None:
        self.flush()
        for f, mapping in self._files.values():
            mapping.close()
            f.close()
        self._files.clear()

    # -- units -----------------------------------------------------------------------------------

    def append(self, prev_pos: int, slot: int, deliver_ms: int, offset_py: int, size_py: int, queue_offset: int) -> int:
        """Write a unit at the end; its position. OSError (ENOSPC) when a new file cannot be made:
        nothing is written."""
        pos = self.write_pos
        found = self._file_of(pos)
        if found is None:
            start, mapping = pos, self._map(pos, create=True)
        else:
            start, mapping = found
        UNIT.pack_into(mapping, pos - start, prev_pos, slot, deliver_ms, offset_py, size_py, UNIT_MAGIC, queue_offset)
        if slot > self._max_slot[start]:
            self._max_slot[start] = slot
        self.write_pos = pos + UNIT_SIZE
        return pos

    def read(self, pos: int) -> tuple[int, int, int, int, int, int, int]:
        """``(prevPos, slot, deliverMs, offsetPy, sizePy, magic, queueOffset)`` of the unit at ``pos``."""
        found = self._file_of(pos)
        if found is None or pos >= self.write_pos:
            raise IndexError(f"no timer log unit at {pos} (log holds [{self.min_pos}, {self.write_pos}))")
        start, mapping = found
        return UNIT.unpack_from(mapping, pos - start)

    def set_prev(self, pos: int, prev_pos: int, slot: int) -> None:
        """Re-link a unit into its chain (the rebuild, when the slots moved)."""
        found = self._file_of(pos)
        assert found is not None
        start, mapping = found
        struct.pack_into(">qq", mapping, pos - start, prev_pos, slot)
        if slot > self._max_slot[start]:
            self._max_slot[start] = slot

    def units(self) -> Iterator[tuple[int, tuple[int, int, int, int, int, int, int]]]:
        """``(pos, unit)`` of every unit, oldest first."""
        for start in sorted(self._files):
            mapping = self._files[start][1]
            end = min(self.file_size, self.write_pos - start)
            if end <= 0:
                continue
            pos = start
            for unit in self._units_of(mapping, end):
                yield pos, unit
                pos += UNIT_SIZE

    @staticmethod
    def _units_of(mapping: mmap.mmap, end: int) -> Iterator[tuple[int, int, int, int, int, int, int]]:
        """The units of ``mapping[:end]``, read a chunk at a time (a file may be 100 MB)."""
        for chunk_start in range(0, end, _CHUNK):
            yield from UNIT.iter_unpack(mapping[chunk_start : min(chunk_start + _CHUNK, end)])

    def last_unit(self) -> tuple[int, int, int, int, int, int, int] | None:
        return self.read(self.write_pos - UNIT_SIZE) if self.write_pos > self.min_pos else None

    def flush(self) -> None:
        """msync what was appended since the last flush."""
        flushed, end = self._flushed_pos, self.write_pos
        while flushed < end:
            found = self._file_of(flushed)
            if found is None:
                break
            start, mapping = found
            upto = min(end, start + self.file_size)
            page = mmap.PAGESIZE
            lo = (flushed - start) // page * page
            mapping.flush(lo, upto - start - lo)
            flushed = upto
        self._flushed_pos = end

    def delete_files_before(self, slot: int) -> int:
        """Delete the oldest files whose units are all of ticks before ``slot`` (all delivered); the
        newest file stays (it holds the write position). Returns the number of files deleted."""
        deleted = 0
        for start in sorted(self._files)[:-1]:
            if self._max_slot.get(start, -1) >= slot:
                break
            f, mapping = self._files.pop(start)
            self._max_slot.pop(start, None)
            mapping.close()
            f.close()
            os.unlink(os.path.join(self.store_path, file_name_of(start)))
            if self._flushed_pos < start + self.file_size:
                self._flushed_pos = start + self.file_size
            deleted += 1
        return deleted

    def note_slot(self, pos: int, slot: int) -> None:
        """The rebuild's bookkeeping: the file of ``pos`` holds a unit of ``slot``."""
        start = pos - pos % self.file_size
        if slot > self._max_slot.get(start, -1):
            self._max_slot[start] = slot


class TimerWheel:
    """``slots_total`` slots over the TimerLog's chains, in an anonymous mapping."""

    def __init__(self, slots_total: int):
        self.slots_total = slots_total
        self._map = mmap.mmap(-1, slots_total * SLOT_SIZE)

    def get(self, slot: int) -> tuple[int, int]:
        """``(lastPos, num)`` of tick ``slot``: ``(NO_POS, 0)`` when it holds no unit."""
        held, last_pos, num, _ = SLOT.unpack_from(self._map, (slot % self.slots_total) * SLOT_SIZE)
        return (last_pos, num) if held == slot and num > 0 else (NO_POS, 0)

    def put(self, slot: int, last_pos: int, num: int) -> None:
        SLOT.pack_into(self._map, (slot % self.slots_total) * SLOT_SIZE, slot, last_pos, num, 0)

    def clear(self, slot: int) -> None:
        SLOT.pack_into(self._map, (slot % self.slots_total) * SLOT_SIZE, -1, NO_POS, 0, 0)

    def close(self) -> None:
        self._map.close()
