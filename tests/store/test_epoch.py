"""The epoch table: master terms survive restarts and crashes, and two tables tell how far two logs agree."""

from __future__ import annotations

import pytest

from rmq._files import backup_path
from rmq.errors import StoreError
from rmq.store.epoch import EPOCH_FILE_NAME, EpochEntry, EpochFile, divergence_point

E = EpochEntry


def test_terms_open_in_order_and_survive_a_restart(tmp_path):
    epochs = EpochFile(tmp_path)
    assert epochs.current_epoch == 0 and epochs.last is None
    assert epochs.ensure_started(0) == E(1, 0)
    assert epochs.ensure_started(500) == E(1, 0), "a restarted master keeps its term"
    assert epochs.begin(4096) == E(2, 4096)
    assert EpochFile(tmp_path).entries == [E(1, 0), E(2, 4096)]


def test_truncation_forgets_terms_that_began_after_the_cut(tmp_path):
    epochs = EpochFile(tmp_path)
    epochs.adopt([E(1, 0), E(2, 100), E(3, 300)])
    epochs.truncate_to(200)
    assert EpochFile(tmp_path).entries == [E(1, 0), E(2, 100)]
    epochs.truncate_to(100)
    assert epochs.entries == [E(1, 0), E(2, 100)], "a term that began at the cut keeps its start"


def test_a_torn_rewrite_falls_back_to_the_backup(tmp_path):
    epochs = EpochFile(tmp_path)
    epochs.ensure_started(0)
    epochs.begin(100)  # the first version is now the backup
    (tmp_path / EPOCH_FILE_NAME).write_text('{"epochs": [[1, 0], [2,')  # a crash mid-write
    assert EpochFile(tmp_path).entries == [E(1, 0)]


def test_a_table_that_makes_no_sense_stops_the_store(tmp_path):
    (tmp_path / EPOCH_FILE_NAME).write_text('{"epochs": [[2, 0], [1, 100]]}')
    with pytest.raises(StoreError, match="epoch 1 at offset 100 cannot follow epoch 2 at offset 0"):
        EpochFile(tmp_path)
    backup_path(tmp_path / EPOCH_FILE_NAME).write_text("not json")
    with pytest.raises(StoreError, match="is not an epoch table"):
        EpochFile(tmp_path)


@pytest.mark.parametrize(
    "mine, my_max, theirs, their_max, point",
    [
        # same history: the shorter log is a prefix
        ([E(1, 0)], 300, [E(1, 0)], 500, 300),
        # the old master wrote 200..350 in epoch 1 that its successor (promoted at 200) never had
        ([E(1, 0)], 350, [E(1, 0), E(2, 200)], 900, 200),
        # the old master came back once before (epoch 2 at 200), then lost its term at 600 again
        ([E(1, 0), E(2, 200)], 700, [E(1, 0), E(2, 200), E(3, 600)], 800, 600),
        # a slave that never saw epoch 3 but has all of epoch 2
        ([E(1, 0), E(2, 200)], 500, [E(1, 0), E(2, 200), E(3, 600)], 800, 500),
        # nothing in common: everything after the earlier table's start goes
        ([E(5, 100)], 400, [E(1, 0)], 800, 0),
        # an empty table (a store from before epochs) agrees on nothing
        ([], 400, [E(1, 0)], 800, 0),
    ],
)
def test_divergence_point(mine, my_max, theirs, their_max, point):
    assert divergence_point(mine, my_max, theirs, their_max) == point
