"""The perf log's latency histogram: merged counts answer percentiles as the raw samples do."""

from __future__ import annotations

import numpy as np
import pytest

from rmq.perf.histogram import MAX_US, N_BUCKETS, Histogram, bounds_of, index_of

# a bucket is at most 1/32 of its value wide; its midpoint stands for it
PRECISION = 1 / 64 + 1e-9


def test_every_value_falls_in_its_own_bucket():
    values = np.concatenate([np.arange(0, 1 << 16), np.array([MAX_US - 1, (1 << 30) + 12345])])
    low, high = bounds_of(index_of(values))
    assert (low <= values).all() and (values < high).all()
    assert (np.diff(index_of(np.arange(1 << 16))) >= 0).all()
    assert int(index_of(MAX_US * 8)) == N_BUCKETS - 1


@pytest.mark.parametrize("p", [50, 90, 99, 99.9, 100])
def test_percentiles_of_a_merge_match_the_raw_samples(p):
    rng = np.random.default_rng(7)
    parts = [rng.lognormal(mean=7 + i, sigma=1.2, size=20_000).astype(np.int64) for i in range(5)]
    merged = Histogram.merged(_hist(part) for part in parts)
    raw = np.sort(np.concatenate(parts))
    exact = raw[int(np.ceil(p / 100 * len(raw))) - 1]
    assert merged.total == len(raw)
    assert merged.percentile(p) == pytest.approx(exact, rel=PRECISION, abs=0.5)


def test_json_round_trip_is_sparse_and_exact():
    h = _hist(np.array([3, 3, 1000, 250_000]))
    data = h.to_json()
    assert len(data["index"]) == 3 and sum(data["count"]) == 4
    assert (Histogram.from_json(data).counts == h.counts).all()


def test_foreign_or_malformed_json_is_refused():
    with pytest.raises(ValueError, match="scheme"):
        Histogram.from_json({"scheme": "hdr-v2", "index": [], "count": []})
    with pytest.raises(ValueError, match="malformed"):
        Histogram.from_json({"scheme": "loglinear-p5-us", "index": [1, 2], "count": [1]})
    with pytest.raises(ValueError, match="malformed"):
        Histogram.from_json({"scheme": "loglinear-p5-us", "index": [N_BUCKETS], "count": [1]})


def test_empty_histogram_has_no_percentile():
    assert np.isnan(Histogram().percentile(99))


def _hist(values):
    h = Histogram()
    h.record_us(values)
    return h
