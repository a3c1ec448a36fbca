"""The plan's arithmetic against cases computed by hand, the record size against a real store's
CommitLog, and the choice of the cheapest mode that keeps what the workload asks."""

from __future__ import annotations

import pytest

from rmq.perf.capacity import model, plan
from rmq.perf.capacity.plan import Workload, WorkloadError
from rmq.protocol.message import encode_properties
from rmq.store import MessageStore, PutMessageStatus
from tests.helpers.store import small_store_config

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
    assert disk.commit_log_bytes == 216_000_000 * RECORD_1K  # 254,016,000,000
    assert disk.commit_log_allocated == 237 * (1 << 30)  # 236.57 files of 1 GiB
    assert disk.consume_queue_bytes == 4_320_000_000  # 20 B each
    # 8 queues of 27,000,000 entries: 90 files of 300,000 entries (6,000,000 B) each
    assert disk.consume_queue_allocated == 8 * 90 * 6_000_000
    # 19,999,999 entries a file (entry 0 unused): 11 files of 40 + 4 * 5,000,000 + 20 * 20,000,000 B
    assert disk.index_files == 11 and disk.index_allocated == 11 * 420_000_040
    assert disk.total_allocated == 237 * (1 << 30) + 4_320_000_000 + 11 * 420_000_040


def test_keys_are_indexed_besides_the_uniq_key_and_store_settings_apply():
    w = _workload(keys=2, store={"maxIndexNum": 1_000_001, "maxHashSlotNum": 1000})
    disk = plan.disk_per_broker(w, broker_sets=4)
    assert disk.index_entries == 3 * 216_000_000
    assert disk.index_files == 648  # 648,000,000 / 1,000,000
    assert disk.index_allocated == 648 * (40 + 4 * 1000 + 20 * 1_000_001)


def _throughput(flush: str, role: str, msgs_per_s: float) -> model.Saturation:
    point = model.Point(
        system="rmq", peer_mode="", flush=flush, role=role, size=1024, batch=1, in_flight=16, connections=1,
        rate=0, msgs_per_s=msgs_per_s, mb_per_s=0, acked=0, seconds=1, p50_us=1, p90_us=1, p99_us=1,
        p999_us=1, max_us=1, mean_us=1, cell_ids=[f"{flush}/{role}"], run_ids=["run-1"], repeats=[],
    )  # fmt: skip
    return model.Saturation(point, slo_us=2000, bounded=True)


SATURATIONS = [
    _throughput("ASYNC_FLUSH", "standalone", 26_000),
    _throughput("SYNC_FLUSH", "standalone", 15_000),
    _throughput("ASYNC_FLUSH", "async_master", 20_000),
    _throughput("SYNC_FLUSH", "async_master", 14_000),
    _throughput("ASYNC_FLUSH", "sync_master", 17_000),
    # SYNC_FLUSH sync_master: no load met the SLO
]


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
    faster_sync = [*SATURATIONS[:4], _throughput("ASYNC_FLUSH", "sync_master", 22_000)]
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
