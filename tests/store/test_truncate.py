"""StoreCore.truncate_to: a divergent tail goes from the CommitLog, the ConsumeQueues and the index;
what comes before stays readable and queryable, and the store takes new messages where it was cut.
And the epochs that decide where: a master's first term, a slave reconciling with its master."""

from __future__ import annotations

import pytest

from rmq.errors import StoreError
from rmq.protocol.record import decode_record
from rmq.store import FlushDiskType, PutMessageStatus
from rmq.store.epoch import EpochEntry
from tests.helpers import free_port
from tests.helpers.store import COMMIT_LOG_FILE_SIZE, body_heads


def fill(store, n, first=0):
    return [
        store.put("TopicA", b"m%04d" % i + b"." * (i * 37 % 900), queue_id=i % 2, keys=f"k{i}")
        for i in range(first, first + n)
    ]


def test_cut_drops_records_queue_entries_and_index_entries_past_it(open_store):
    store = open_store()
    results = fill(store, 300)
    assert results[-1].next_offset > 2 * COMMIT_LOG_FILE_SIZE  # the cut crosses files
    cut = results[120].wrote_offset
    dropped_bytes, dropped_records = store.truncate_to(cut)
    assert (dropped_bytes, dropped_records) == (results[-1].next_offset - cut, 180)
    assert store.get_max_phy_offset() == cut
    assert body_heads(store, 0) == [b"m%04d" % i for i in range(0, 120, 2)]
    assert body_heads(store, 1) == [b"m%04d" % i for i in range(1, 120, 2)]
    assert store.get_max_offset_in_queue("TopicA", 0) == 60
    assert [decode_record(m).body[:5] for m in store.query_message("TopicA", "k119").messages] == [b"m0119"]
    assert store.query_message("TopicA", "k120").messages == []
    assert store.query_message("TopicA", "k299").messages == []
    assert store.look_message_by_offset(cut) is None


def test_store_goes_on_from_the_cut_and_survives_a_restart(open_store, store_dir):
    store = open_store()
    results = fill(store, 100)
    cut = results[50].wrote_offset
    store.truncate_to(cut)
    again = fill(store, 10, first=500)
    assert again[0].wrote_offset == cut and again[0].queue_offset == 25
    assert store.query_message("TopicA", "k500").messages
    store.shutdown()
    store = open_store()
    assert store.get_max_phy_offset() == again[-1].next_offset
    assert body_heads(store, 0) == [b"m%04d" % i for i in [*range(0, 50, 2), *range(500, 510, 2)]]
    assert [decode_record(m).body[:5] for m in store.query_message("TopicA", "k55").messages] == []
    assert [decode_record(m).body[:5] for m in store.query_message("TopicA", "k505").messages] == [b"m0505"]


def test_cut_at_the_end_drops_nothing_and_a_cut_inside_a_record_is_refused(open_store):
    store = open_store()
    results = fill(store, 20)
    assert store.truncate_to(results[-1].next_offset) == (0, 0)
    with pytest.raises(StoreError, match="not a record boundary"):
        store.truncate_to(results[5].wrote_offset + 8)
    assert len(body_heads(store, 0)) == 10


def test_a_master_opens_epoch_one_at_its_end_once(open_store, store_dir):
    store = open_store(ha_listen_port=free_port())
    results = fill(store, 10)
    store.start_ha()
    assert store.epochs.entries == [EpochEntry(1, results[-1].next_offset)] and store.epoch == 1
    store.shutdown()
    store = open_store(ha_listen_port=free_port())
    fill(store, 5, first=10)
    store.start_ha()
    assert store.epochs.entries == [EpochEntry(1, results[-1].next_offset)], "a restarted master keeps its term"


def test_reconcile_cuts_what_the_master_never_had_and_takes_its_table(open_store):
    store = open_store()
    store.epochs.ensure_started(0)
    results = fill(store, 60)
    # the new master had the first 40 messages when it opened epoch 2, then took more of its own
    promoted_at = results[40].wrote_offset
    theirs = [EpochEntry(1, 0), EpochEntry(2, promoted_at)]
    point, dropped_bytes, dropped_records = store.reconcile_with_master(theirs, promoted_at + 5000)
    assert (point, dropped_records) == (promoted_at, 20)
    assert dropped_bytes == results[-1].next_offset - promoted_at
    assert store.epochs.entries == theirs
    assert body_heads(store, 0) == [b"m%04d" % i for i in range(0, 40, 2)]
    # reconnecting to the same master changes nothing
    assert store.reconcile_with_master(theirs, promoted_at + 9000) == (promoted_at, 0, 0)


def test_sync_flush_puts_after_a_cut_wait_for_the_disk_again(open_store):
    """The group commit's watermarks go back to the cut: a put written below where they stood is
    completed once its own bytes are flushed, not at once."""
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    results = fill(store, 30)
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    store.truncate_to(results[10].wrote_offset)
    again = fill(store, 5, first=100)
    assert [r.status for r in again] == [PutMessageStatus.PUT_OK] * 5
    assert again[0].wrote_offset == results[10].wrote_offset
    assert store.commit_log.get_flushed_where() >= again[-1].next_offset
