"""A mergeable latency histogram: fixed log-linear buckets of microseconds, as HdrHistogram.

Percentiles cannot be averaged across intervals, runs or worker processes; bucket counts can be
summed. Every perf-log record therefore carries its latencies as counts over one fixed bucket
scheme, and whoever reads them (the harness's summary, the Spark pipeline) merges by adding.

Bucket scheme ``loglinear-p5-us`` (PRECISION_BITS = 5, values in whole microseconds)::

    value v (us)              bucket index i                      bucket holds
    0 <= v < 32               i = v                               exactly v
    2^e <= v < 2^(e+1), e>=5  i = (e - 4) * 32 + (v >> (e - 5)) - 32   32 equal steps of 2^(e-5)

so every bucket is at most 1/32 (3.1 %) of its own value wide, and ``value_of`` a bucket (its
midpoint) is within 1.6 % of any value it holds. Values at or above MAX_US (2^37 us, 38 hours) land
in the last bucket. N_BUCKETS = 1056.

In a perf log a histogram is the JSON object ``{"scheme": "loglinear-p5-us", "index": [...],
"count": [...]}``: the non-empty buckets only, indices ascending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

SCHEME = "loglinear-p5-us"
PRECISION_BITS = 5
SUB_BUCKETS = 1 << PRECISION_BITS  # 32
MAX_EXPONENT = 37
MAX_US = 1 << MAX_EXPONENT
N_BUCKETS = (MAX_EXPONENT - PRECISION_BITS + 1) * SUB_BUCKETS  # 1056


def index_of(values_us: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The bucket index of each value (microseconds; negatives count as 0, huge ones as the last)."""
    v = np.clip(np.asarray(values_us, dtype=np.int64), 0, MAX_US - 1)
    e = np.maximum(np.floor(np.log2(np.maximum(v, 1))).astype(np.int64), PRECISION_BITS - 1)
    # log2 of a float can round up just below a power of two: correct by one step either way
    e = np.where((e >= PRECISION_BITS) & (v < (np.int64(1) << e)), e - 1, e)
    e = np.where(v >= (np.int64(1) << (e + 1)), e + 1, e)
    shift = np.maximum(e - PRECISION_BITS, 0)
    big = (e - PRECISION_BITS + 1) * SUB_BUCKETS + (v >> shift) - SUB_BUCKETS
    return np.where(v < SUB_BUCKETS, v, big).astype(np.int64)


def bounds_of(index: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The lowest value each bucket holds and the lowest value of the next (microseconds)."""
    i = np.asarray(index, dtype=np.int64)
    block = i // SUB_BUCKETS  # 0 for the exact buckets, e - 4 above
    shift = np.maximum(block - 1, 0)
    low = np.where(block == 0, i, (i - block * SUB_BUCKETS + SUB_BUCKETS) << shift)
    return low, low + (np.int64(1) << shift)


def value_of(index: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The value that stands for each bucket: its midpoint (the exact value for buckets below 32)."""
    low, high = bounds_of(index)
    return np.where(high - low == 1, low.astype(np.float64), (low + high - 1) / 2.0)


class Histogram:
    """Counts over the N_BUCKETS fixed buckets; ``+`` and ``merge`` sum them."""

    __slots__ = ("counts",)

    def __init__(self, counts: npt.NDArray[np.int64] | None = None):
        self.counts = np.zeros(N_BUCKETS, dtype=np.int64) if counts is None else counts

    def record_us(self, values_us: npt.ArrayLike) -> None:
        """Add latencies in microseconds (one value or an array of them)."""
        np.add.at(self.counts, index_of(np.atleast_1d(values_us)), 1)

    def record_ns(self, values_ns: npt.ArrayLike) -> None:
        self.record_us(np.asarray(values_ns, dtype=np.int64) // 1000)

    def merge(self, other: Histogram) -> None:
        self.counts += other.counts

    def __add__(self, other: Histogram) -> Histogram:
        return Histogram(self.counts + other.counts)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def percentile(self, p: float) -> float:
        """The value (microseconds, a bucket midpoint) at or below which ``p`` percent of the counts
        lie; NaN when empty. The nearest-rank rule, as HdrHistogram's getValueAtPercentile."""
        total = self.total
        if total == 0:
            return float("nan")
        rank = max(1, int(np.ceil(p / 100.0 * total)))
        i = int(np.searchsorted(np.cumsum(self.counts), rank))
        return float(value_of(i))

    def max_us(self) -> float:
        nz = np.flatnonzero(self.counts)
        return float(value_of(int(nz[-1]))) if len(nz) else float("nan")

    def mean_us(self) -> float:
        total = self.total
        if total == 0:
            return float("nan")
        return float((self.counts * value_of(np.arange(N_BUCKETS))).sum() / total)

    def to_json(self) -> dict[str, Any]:
        nz = np.flatnonzero(self.counts)
        return {"scheme": SCHEME, "index": nz.tolist(), "count": self.counts[nz].tolist()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Histogram:
        """The histogram of a perf-log object; ValueError when it is not one of this scheme."""
        if data.get("scheme") != SCHEME:
            raise ValueError(f"histogram scheme {data.get('scheme')!r}, expected {SCHEME!r}")
        index = np.asarray(data["index"], dtype=np.int64)
        count = np.asarray(data["count"], dtype=np.int64)
        if index.shape != count.shape or (len(index) and (index.min() < 0 or index.max() >= N_BUCKETS)):
            raise ValueError(f"histogram index/count malformed: {len(index)} indices, {len(count)} counts")
        h = cls()
        np.add.at(h.counts, index, count)
        return h

    @classmethod
    def merged(cls, histograms: Iterable[Histogram]) -> Histogram:
        h = cls()
        for other in histograms:
            h.merge(other)
        return h
