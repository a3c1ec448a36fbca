"""The TimerLog and TimerWheel on their own: units survive a reopen, a torn unit is dropped,
delivered files go, and a wheel slot of an older round reads as empty."""

from __future__ import annotations

import os

from rmq.broker.timer.wheel import NO_POS, UNIT_SIZE, TimerLog, TimerWheel

FILE_UNITS = 4


def new_log(path) -> TimerLog:
    timer_log = TimerLog(str(path), FILE_UNITS * UNIT_SIZE)
    timer_log.load()
    return timer_log


def test_units_chain_per_slot_and_survive_a_reopen(tmp_path):
    timer_log = new_log(tmp_path)
    wheel = TimerWheel(16)
    for i, slot in enumerate([5, 6, 5, 5, 7, 6]):  # spans two files
        last_pos, num = wheel.get(slot)
        wheel.put(slot, timer_log.append(last_pos, slot, slot * 1000 + i, 100 * i, 90, i), num + 1)
    chain = []
    pos, num = wheel.get(5)
    for _ in range(num):
        prev_pos, slot, deliver_ms, _offset_py, _size_py, _magic, queue_offset = timer_log.read(pos)
        chain.append(queue_offset)
        pos = prev_pos
    assert chain == [3, 2, 0] and pos == NO_POS
    timer_log.close()

    reopened = new_log(tmp_path)
    assert reopened.write_pos == 6 * UNIT_SIZE
    assert [unit[6] for _, unit in reopened.units()] == [0, 1, 2, 3, 4, 5]
    assert reopened.last_unit()[6] == 5
    reopened.close()


def test_a_torn_unit_is_dropped_at_load(tmp_path):
    timer_log = new_log(tmp_path)
    for i in range(3):
        timer_log.append(NO_POS, 1, 1000, i, 10, i)
    timer_log.close()
    with open(tmp_path / "00000000000000000000", "r+b") as f:  # the third unit half written
        f.seek(2 * UNIT_SIZE + 24)
        f.write(bytes(UNIT_SIZE - 24))
    reopened = TimerLog(str(tmp_path), FILE_UNITS * UNIT_SIZE)
    assert reopened.load() > 0
    assert reopened.write_pos == 2 * UNIT_SIZE
    assert reopened.append(NO_POS, 1, 1000, 9, 10, 2) == 2 * UNIT_SIZE
    reopened.close()


def test_files_of_delivered_ticks_are_deleted_but_never_the_newest(tmp_path):
    timer_log = new_log(tmp_path)
    for i in range(2 * FILE_UNITS + 1):  # three files: ticks 0-3, 4-7, 8
        timer_log.append(NO_POS, i, i * 1000, i, 10, i)
    assert timer_log.delete_files_before(4) == 1  # the first file's ticks are all before 4
    assert timer_log.delete_files_before(100) == 1  # not the newest
    assert sorted(os.listdir(tmp_path)) == [f"{2 * FILE_UNITS * UNIT_SIZE:020d}"]
    assert timer_log.min_pos == 2 * FILE_UNITS * UNIT_SIZE
    timer_log.close()


def test_a_slot_of_an_older_round_reads_as_empty():
    wheel = TimerWheel(8)
    wheel.put(3, 480, 2)
    assert wheel.get(3) == (480, 2)
    assert wheel.get(11) == (NO_POS, 0)  # same slot, next round
    wheel.clear(3)
    assert wheel.get(3) == (NO_POS, 0)
    wheel.close()
