"""The model: histograms merged by the pipeline (Spark per repeat, then the driver) answer percentiles
as numpy's merge and the raw samples do; throughput, repeats and the summary fallback; saturation on
a hand-made curve; the size fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rmq.perf import log
from rmq.perf.capacity import model, read
from rmq.perf.histogram import Histogram
from tests.helpers.perf_logs import cell, cell_records, header, point, stats_log_lines, write_run

# a bucket's midpoint is within 1/64 of any value it holds
PRECISION = 1 / 64 + 1e-9


def _latencies(seed: int, n: int, intervals: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.lognormal(6.5 + 0.3 * i, 0.8, n).astype(np.int64) for i in range(intervals)]


@pytest.fixture(scope="module")
def merged_point(spark, tmp_path_factory):
    """One cell measured in two runs (repeat 0 and 1), three 1-second intervals each."""
    out = tmp_path_factory.mktemp("logs")
    a = _latencies(1, 20_000, 3)
    b = _latencies(2, 12_000, 3)
    write_run(out, "run-a", [(cell(in_flight=16, repeat=0), a)])
    write_run(out, "run-b", [(cell(in_flight=16, repeat=1), b)])
    records, _ = read.read_perf_logs(spark, [out])
    (point,) = model.points(records)
    return point, a, b


@pytest.mark.parametrize("field, p", model.PERCENTILES)
def test_spark_merge_matches_numpy_merge_and_the_raw_samples(merged_point, field, p):
    point, a, b = merged_point
    numpy_merge = Histogram.merged(_histogram(x) for x in [*a, *b])
    assert getattr(point, field) == numpy_merge.percentile(p)
    raw = np.sort(np.concatenate([*a, *b]))
    exact = raw[int(np.ceil(p / 100 * len(raw))) - 1]
    assert getattr(point, field) == pytest.approx(exact, rel=PRECISION, abs=0.5)


def test_a_point_sums_every_interval_of_every_repeat(merged_point):
    point, a, b = merged_point
    acked = sum(map(len, [*a, *b]))
    assert point.acked == acked and point.seconds == 6.0
    assert point.msgs_per_s == pytest.approx(acked / 6.0)
    assert point.max_us == Histogram.merged(_histogram(x) for x in [*a, *b]).max_us()
    assert point.run_ids == ["run-a", "run-b"]
    assert len(point.cell_ids) == 2


def test_each_repeat_is_kept_for_the_spread(merged_point):
    point, a, b = merged_point
    by_run = {r.run_id: r for r in point.repeats}
    for run_id, intervals in (("run-a", a), ("run-b", b)):
        assert by_run[run_id].msgs_per_s == pytest.approx(sum(map(len, intervals)) / 3.0)
        assert by_run[run_id].p99_us == Histogram.merged(map(_histogram, intervals)).percentile(99)
    low, high, stdev = point.spread
    assert (low, high) == (pytest.approx(12_000), pytest.approx(20_000))
    assert stdev == pytest.approx(np.std([12_000, 20_000], ddof=1))


def test_a_cell_without_intervals_is_taken_from_its_summary_and_none_is_counted_twice(spark, tmp_path):
    only_summary = cell_records(cell(in_flight=1), _latencies(3, 1000, 2))[-1]
    both = cell_records(cell(in_flight=4), _latencies(4, 3000, 2))
    with log.PerfLogWriter(tmp_path, "run-s") as writer:
        writer.write(header("run-s"))
        for record in [only_summary, *both]:
            writer.write(record)
    records, _ = read.read_perf_logs(spark, [tmp_path])
    got = {p.in_flight: p for p in model.points(records)}
    assert got[1].acked == 2000 and got[1].seconds == 2.0
    assert got[4].acked == 6000 and got[4].seconds == 2.0


def _histogram(values: np.ndarray) -> Histogram:
    h = Histogram()
    h.record_us(values)
    return h


CURVE = [
    point(1, 1_000, 300),
    point(4, 5_000, 600),
    point(8, 9_000, 1_900),
    point(16, 12_000, 2_500),
    point(32, 11_000, 4_000),  # past the knee: more in flight, less acked
]


def test_saturation_is_the_highest_throughput_within_the_slo():
    sat = model.saturation(CURVE, slo_us=2_000)
    assert sat is not None and sat.point.in_flight == 8 and sat.msgs_per_s == 9_000 and sat.bounded
    assert [p.in_flight for p in sat.broken_above] == [16, 32] and sat.monotone


def test_a_curve_that_never_breaks_the_slo_gives_an_unbounded_saturation():
    sat = model.saturation(CURVE, slo_us=10_000)
    assert sat is not None and sat.msgs_per_s == 12_000 and not sat.bounded


def test_a_curve_that_is_not_monotone_is_told_as_measured():
    # the SYNC_FLUSH standalone: the lighter load broke the SLO, the heavier met it
    curve = [point(4, 3_000, 31_500), point(16, 14_800, 14_000)]
    sat = model.saturation(curve, slo_us=20_000)
    assert sat is not None and sat.msgs_per_s == 14_800
    assert not sat.bounded and sat.broken_above == []  # nothing heavier broke it: "at least"
    assert not sat.monotone and [p.msgs_per_s for p in sat.broken_below] == [3_000]
    doc = sat.to_json()
    assert doc["bounded"] is False and doc["monotone"] is False
    assert [(q["msgs_per_s"], q["p99_us"]) for q in doc["slo_broken_below"]] == [(3_000, 31_500)]
    # a heavier load that broke it after the dip: broken above and below, each from the points
    dip = model.saturation([*curve, point(32, 15_000, 40_000)], slo_us=20_000)
    assert dip is not None and dip.bounded and [p.in_flight for p in dip.broken_above] == [32]
    assert [p.in_flight for p in dip.broken_below] == [4]


def test_a_curve_that_always_breaks_the_slo_has_no_saturation():
    assert model.saturation(CURVE, slo_us=100) is None


def test_open_loop_points_decide_the_saturation_when_the_family_has_them():
    # closed loop promises 12,000 msgs/s within 2.5 ms; offered at a fixed rate, the stalls the
    # closed-loop sender waited out show: only 8,000 msgs/s stays within the SLO
    open_loop = [
        point(64, 4_000, 900, rate=4_000),
        point(64, 8_000, 2_400, rate=8_000),
        point(64, 10_000, 9_000, rate=10_000),
    ]
    sat = model.saturation([*CURVE, *open_loop], slo_us=3_000)
    assert sat is not None and sat.point.rate == 8_000 and sat.msgs_per_s == 8_000 and sat.bounded
    unbounded = model.saturation([*CURVE, *open_loop[:2]], slo_us=3_000)
    assert unbounded is not None and unbounded.msgs_per_s == 8_000 and not unbounded.bounded  # every rate met it
    assert model.saturation([*CURVE, open_loop[2]], slo_us=3_000) is None  # closed loop does not rescue it


def test_the_size_fit_recovers_a_per_message_and_a_per_byte_cost():
    a, b = 20e-6, 3e-9  # 20 us a message, 3 ns a byte
    sats = [
        model.Saturation(point(16, 1 / (a + b * size), 1_000, size=size), slo_us=2_000) for size in (128, 1024, 4096)
    ]
    (fit,) = model.size_fits(sats).values()
    assert fit.a == pytest.approx(a) and fit.b == pytest.approx(b)
    assert fit.msgs_per_s(2048) == pytest.approx(1 / (a + b * 2048))
    assert fit.mb_per_s(2048) == pytest.approx(2048 / (a + b * 2048) / 1e6)
    assert fit.sizes == [128, 1024, 4096] and len(fit.cell_ids) == 3


def test_one_size_gives_no_fit():
    assert model.size_fits([model.Saturation(point(16, 9_000, 1_000), 2_000)]) == {}


def test_broker_stats_logs_are_summed_per_topic_and_group(spark, tmp_path):
    logs = tmp_path / "store" / "logs"
    logs.mkdir(parents=True)
    lines = [json.dumps(r) for r in stats_log_lines()]
    (logs / "stats.log").write_text("\n".join([lines[0], '{"kind": "topic_put", "put_nums": "x"}', *lines[1:]]))
    files = read.stats_log_files([tmp_path])
    assert files == [str(logs / "stats.log")]
    stats, bad = read.read_stats_logs(spark, files)
    assert bad.total == 1
    get, put = model.broker_stats(stats)  # in order of kind, broker, topic, group
    assert (put["kind"], put["topic"], put["messages"]) == ("topic_put", "TopicA", 180_000)
    assert put["bytes_per_message"] == 1176 and put["avg_msgs_per_s"] == 1500 and put["peak_msgs_per_s"] == 2000
    # 512 samples merged: the 99th percentile (rank 507) falls past 250 + 250 + 6 in the "<= 200" bucket
    assert put["put_p99_ms"] == "<= 200"
    assert (get["kind"], get["group"], get["messages"]) == ("group_get", "GroupA", 170_000)
