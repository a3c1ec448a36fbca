"""The plan's arithmetic against cases computed by hand, the record size against a real store's
CommitLog, and the choice of the cheapest mode that keeps what the workload asks."""

from __future__ import annotations

import pytest

from rmq.perf.capacity import model, plan
from rmq.perf.capacity.plan import Workload, WorkloadError
from rmq.protocol.message import encode_properties
from rmq.store import MessageStore, PutMessageStatus
from tests.helpers.perf_logs import five_saturations, point, throughput_saturation
from tests.helpers.store import small_store_config

SATURATIONS = five_saturations()

# 1024 B bodies of TopicTest (9 B), UNIQ_KEY (9 + 32 + 1 B) and WAIT=true (10 B): 91 + 1024 + 9 + 52
RECORD_1K = 1176


def _workload(**fields) -> Workload:
    defaults = dict(peak_rate=50_000, avg_rate=10_000, size=1024, slo_p99_ms=2, retention_hours=24, groups=2)
    return Workload(**{**defaults, **fields})


def test_record_bytes_by_hand():
    w = _workload()
    assert plan.record_bytes(1024, w.topic, w.properties()) == RECORD_1K
    assert plan.record_bytes(1024, w.topic, _workload(tags="TagA").properties()) == RECORD_1K + 10  # TAGS\x01TagA\x02
    two_keys = _workload(keys=2, key_bytes=16).properties()
    assert plan.record_bytes(1024, w.topic, two_keys) == RECORD_1K + 5 + 16 + 1 + 16 + 1  # KEYS\x01k k\x02


@pytest.mark.parametrize("size, tags, keys", [(1024, None, 0), (100, "TagA", 3)])
def test_record_bytes_is_what_the_store_writes(tmp_path, size, tags, keys):
    w = _workload(size=size, tags=tags, keys=keys)
    store = MessageStore(small_store_config(tmp_path))
    store.start()
    try:
        result = store.put_message_and_wait(w.topic, 0, b"x" * size, encode_properties(w.properties()))
        assert result.status is PutMessageStatus.PUT_OK
        assert store.commit_log.get_max_offset() == plan.record_bytes(size, w.topic, w.properties())
    finally:
        store.shutdown()


def test_disk_per_broker_by_hand():
    # 10,000 msgs/s for 24 h over 4 sets: 216,000,000 messages a broker
    disk = plan.disk_per_broker(_workload(), broker_sets=4)
    assert disk.messages == 216_000_000
    assert disk.commit_log_data_bytes == 216_000_000 * RECORD_1K  # 254,016,000,000
    # 236.57 files of 1 GiB: 236 full, the one being written, and the oldest, not yet all expired
    assert disk.commit_log_files == 238 and disk.commit_log_allocated_bytes == 238 * (1 << 30)
    assert disk.consume_queue_data_bytes == 4_320_000_000  # 20 B each
    # 8 queues of 27,000,000 entries: 90 files of 300,000 entries (6,000,000 B) each, and 2 more
    assert disk.consume_queue_files == 8 * 92 and disk.consume_queue_allocated_bytes == 8 * 92 * 6_000_000
    # 19,999,999 entries a file (entry 0 unused): 10.8 files of 40 + 4 * 5,000,000 + 20 * 20,000,000 B
    assert disk.index_files == 12 and disk.index_allocated_bytes == 12 * 420_000_040
    assert disk.total_allocated_bytes == 238 * (1 << 30) + 8 * 92 * 6_000_000 + 12 * 420_000_040


def test_keys_are_indexed_besides_the_uniq_key_and_store_settings_apply():
    w = _workload(keys=2, store={"maxIndexNum": 1_000_001, "maxHashSlotNum": 1000})
    disk = plan.disk_per_broker(w, broker_sets=4)
    assert disk.index_entries == 3 * 216_000_000
    assert disk.index_files == 650  # 648,000,000 / 1,000,000, and 2 more
    assert disk.index_allocated_bytes == 650 * (40 + 4 * 1000 + 20 * 1_000_001)


def test_broker_sets_network_and_the_cheapest_mode_by_hand():
    # 50,000 x 1.3 = 65,000 msgs/s to carry; async_master at least, so standalone modes are out
    p = plan.make_plan(_workload(role="async_master"), SATURATIONS, {})
    by_mode = {(m.flush, m.role): m for m in p.modes}
    assert [(m.broker_sets, m.machines) for m in p.modes] == [(3, 3), (5, 5), (4, 8), (5, 10), (4, 8), (None, None)]
    assert not by_mode["ASYNC_FLUSH", "standalone"].qualifies
    assert "no measurement meets" in (by_mode["SYNC_FLUSH", "sync_master"].why_not or "")
    unmeasured = plan.make_plan(_workload(), SATURATIONS, {}, measured=[("ASYNC_FLUSH", "standalone")]).modes[-1]
    assert unmeasured.why_not == "not measured"
    # ASYNC_FLUSH async_master and ASYNC_FLUSH sync_master both need 8 machines: the earlier wins
    rec = p.recommended
    assert rec is not None and (rec.flush, rec.role) == ("ASYNC_FLUSH", "async_master")
    assert (rec.masters, rec.slaves) == (4, 4)
    assert rec.network_in_mb_per_s == pytest.approx(50_000 * 1024 / 1e6)
    assert rec.network_out_mb_per_s == pytest.approx(50_000 * 1024 * (2 + 1) / 1e6)  # 2 groups, 1 slave
    assert rec.throughput is not None and rec.throughput.cell_ids == ["ASYNC_FLUSH/async_master"]
    assert rec.throughput.run_ids == ["run-1"]
    assert rec.cost_ratio == pytest.approx(2 / 20_000 * 26_000)


def test_fewer_machines_beat_the_order():
    faster_sync = [*SATURATIONS[:4], throughput_saturation("ASYNC_FLUSH", "sync_master", 22_000)]
    p = plan.make_plan(_workload(role="sync_master"), faster_sync, {})
    assert p.recommended is not None and (p.recommended.flush, p.recommended.role) == ("ASYNC_FLUSH", "sync_master")
    p = plan.make_plan(_workload(role="standalone", flush="SYNC_FLUSH"), SATURATIONS, {})
    assert p.recommended is not None and p.recommended.name == "SYNC_FLUSH standalone"


def test_no_qualifying_mode_means_no_recommendation():
    p = plan.make_plan(_workload(role="sync_master", flush="SYNC_FLUSH"), SATURATIONS, {})
    assert p.recommended is None


def test_an_unmeasured_size_is_planned_from_the_size_fit():
    fit = model.SizeFit(("rmq", "", "ASYNC_FLUSH", "standalone", 1), a=20e-6, b=5e-9, sizes=[256, 4096],
                        cell_ids=["c1", "c2"], run_ids=["r"])  # fmt: skip
    t = plan.throughput_at("ASYNC_FLUSH", "standalone", 2000, SATURATIONS, {fit.mode: fit})
    assert t is not None and t.msgs_per_s == pytest.approx(1 / (20e-6 + 5e-9 * 2000))
    assert "fitted" in t.how and t.cell_ids == ["c1", "c2"]
    assert plan.throughput_at("SYNC_FLUSH", "standalone", 2000, SATURATIONS, {fit.mode: fit}) is None


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"size": 1024, "slo_p99_ms": 2}, "peak_rate must be given"),
        ({"peak_rate": 1, "size": 1, "slo_p99_ms": 1, "peek_rate": 2}, "unknown field"),
        ({"peak_rate": 1, "size": 1, "slo_p99_ms": 1, "role": "master"}, "role 'master', expected one of"),
        ({"peak_rate": 10, "avg_rate": 20, "size": 1, "slo_p99_ms": 1}, "avg_rate 20 is above peak_rate 10"),
        ({"peak_rate": 0, "size": 1, "slo_p99_ms": 1}, "peak_rate must be a number > 0"),
        ({"peak_rate": 1, "size": 1, "slo_p99_ms": 1, "store": {"maxIndexNumber": 5}}, "did you mean maxIndexNum"),
    ],
)
def test_a_bad_workload_says_what_is_wrong(fields, message):
    with pytest.raises(WorkloadError, match=message):
        Workload.from_mapping(fields)


def _disk_bytes(w: Workload, sets: int) -> int:
    return plan.disk_per_broker(w, sets).total_allocated_bytes


def test_a_disk_too_small_for_the_retention_adds_broker_sets_and_says_disk_binds():
    # ASYNC_FLUSH standalone carries 65,000 msgs/s with 3 sets; its broker's 24 h then take ~321 GiB
    w = _workload(disk_bytes=400 << 30)
    three = _disk_bytes(w, 3)
    assert 300 << 30 < three <= 400 << 30  # fits the disk, but above 75 % of it
    rec = plan.make_plan(w, SATURATIONS, {}).recommended
    assert rec is not None and rec.name == "ASYNC_FLUSH standalone" and rec.binding == "disk"
    sets = rec.broker_sets
    assert sets is not None and rec.broker_sets_for == {"throughput": 3, "disk": sets, "network": None}
    # the fewest sets whose broker stays below diskMaxUsedSpaceRatio (75 %) of 400 GiB
    assert _disk_bytes(w, sets) <= 0.75 * (400 << 30) < _disk_bytes(w, sets - 1)
    assert rec.disk_used_pct is not None and rec.disk_used_pct <= 75
    doc = rec.to_json()
    assert doc["disk_per_master_bytes"] == _disk_bytes(w, sets) and doc["disk_per_slave_bytes"] is None
    assert doc["disk_cluster_bytes"] == sets * _disk_bytes(w, sets) and doc["disk_slaves_bytes"] == 0
    # a big enough disk leaves the throughput's count, and names throughput
    roomy = plan.make_plan(_workload(disk_bytes=2 << 40), SATURATIONS, {}).recommended
    assert roomy is not None and (roomy.broker_sets, roomy.binding) == (3, "throughput")


def test_the_disk_levels_are_the_brokers_settings():
    w = _workload(disk_bytes=400 << 30, store={"diskMaxUsedSpaceRatio": 60})
    assert w.disk_levels_pct() == {
        "diskMaxUsedSpaceRatio": 60.0,
        "diskSpaceCleanForciblyRatio": 85.0,
        "diskSpaceWarningLevelRatio": 90.0,
    }
    rec = plan.make_plan(w, SATURATIONS, {}).recommended
    assert rec is not None and rec.broker_sets is not None
    assert _disk_bytes(w, rec.broker_sets) <= 0.60 * (400 << 30) < _disk_bytes(w, rec.broker_sets - 1)


def test_masters_and_slaves_disk_are_counted_apart():
    w = _workload(role="async_master", disk_bytes=2 << 40)
    rec = plan.make_plan(w, SATURATIONS, {}).recommended
    assert rec is not None and (rec.masters, rec.slaves) == (4, 4)
    doc = rec.to_json()
    per = _disk_bytes(w, 4)
    assert doc["disk_per_master_bytes"] == doc["disk_per_slave_bytes"] == per
    totals = (doc["disk_masters_bytes"], doc["disk_slaves_bytes"], doc["disk_cluster_bytes"])
    assert totals == (4 * per, 4 * per, 8 * per)


def test_a_disk_smaller_than_a_brokers_fewest_files_is_said_not_planned():
    p = plan.make_plan(_workload(disk_bytes="2g"), SATURATIONS, {})  # two 1 GiB CommitLog files need more
    assert p.recommended is None
    assert "less than a broker's fewest files" in (p.modes[0].why_not or "")


def test_network_binds_when_the_machines_network_is_the_narrowest():
    # out of a master: peak x 1.3 x 1024 B x (2 groups + 1 slave), over a 1 GbE (125 MB/s) machine
    w = _workload(role="async_master", network_mb_per_s=125, peak_rate=50_000 * 2, headroom=30)
    rec = plan.make_plan(w, SATURATIONS, {}).recommended
    assert rec is not None
    assert rec.broker_sets_for["network"] == 4  # 130,000 x 1024 x 3 / 10^6 = 399.4 MB/s over 125
    assert rec.broker_sets_for["throughput"] == 7 and rec.binding == "throughput"
    narrow = plan.make_plan(_workload(role="async_master", network_mb_per_s=20), SATURATIONS, {}).recommended
    assert narrow is not None and narrow.binding == "network" and narrow.broker_sets == 10  # 199.7 / 20


def test_the_slo_binds_when_a_heavier_load_acked_more_and_broke_it():
    curve = [point(4, 5_000, 600), point(8, 9_000, 1_900), point(16, 12_000, 2_500)]
    sat = model.saturation(curve, slo_us=2_000)
    assert sat is not None and sat.binding == "latency SLO"
    t = plan.throughput_at("ASYNC_FLUSH", "standalone", 1024, [sat], {})
    assert t is not None and t.binding == "latency SLO"
    rec = plan.make_plan(_workload(), [sat], {}).recommended
    assert rec is not None and rec.binding == "latency SLO"
    assert rec.broker_sets_for == {"latency SLO": 8, "network": None}
    flat = model.saturation(curve, slo_us=3_000)
    assert flat is not None and flat.binding == "throughput"


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"disk_bytes": "800 gigs"}, "disk_bytes must be a size in bytes, like 1073741824 or 1g"),
        ({"disk_bytes": 0}, "disk_bytes must be a size of at least 1 bytes"),
        ({"network_mb_per_s": -1}, "network_mb_per_s must be a number > 0"),
    ],
)
def test_a_bad_disk_or_network_says_what_is_wrong(fields, message):
    with pytest.raises(WorkloadError, match=message):
        _workload(**fields)
