"""The model: throughput-latency curves from merged histograms, saturation points, size fits.

A *cell family* is what one curve is drawn for: (system, peer_mode, flush, role, size, batch). Its
*points* are the loads it was measured at: in-flight count (closed loop) and target rate (open loop;
0 = closed loop) over a number of connections. A point's figures merge every interval of every repeat
and run of it: messages acked over seconds measured, and percentiles of the summed histogram counts.
Spark sums per repeat (a run id and repeat number): the records' index/count arrays exploded and added
per bucket, in one query whose result, a row per repeat, is all that reaches the driver; the driver
adds up each point's repeats and ranks the sums as ``rmq.perf.histogram.Histogram`` does. Each
repeat's own figures give the run-to-run spread.

The *saturation point* of a family under an SLO is its point of highest throughput whose merged p99
is at or below the SLO, among its open-loop points when it has any (closed-loop points only bound an
offered rate from above), else among its closed-loop points. Throughput against message size is
fitted per mode (a family without its size) over the saturation points, by least squares on
``1 / msgs_per_s = a + b * size``: a fixed cost per message plus a cost per byte.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from rmq.perf import log
from rmq.perf.capacity import read
from rmq.perf.histogram import N_BUCKETS, Histogram

FAMILY = ("system", "peer_mode", "flush", "role", "size", "batch")
MODE = ("system", "peer_mode", "flush", "role", "batch")
POINT = (*FAMILY, "in_flight", "connections", "rate")
REPEAT = (*POINT, "run_id", "repeat")
PERCENTILES = (("p50_us", 50.0), ("p90_us", 90.0), ("p99_us", 99.0), ("p999_us", 99.9))
MB = 1_000_000  # MB/s here are 10^6 bytes a second


def measurements(records: DataFrame) -> DataFrame:
    """One row per measured interval, the cell's fields as columns. A (run, cell) that wrote no
    interval records is taken from its summary record (which holds the whole cell)."""
    cells = records.filter(F.col("kind") != F.lit(log.KIND_HEADER)).select(
        "kind",
        "run_id",
        "cell_id",
        *(F.col(f"cell.{name}").alias(name) for name in log.CELL_FIELDS),
        (F.col("t_end") - F.col("t_start")).alias("seconds"),
        "acked",
        F.col("latency.index").alias("bucket_index"),
        F.col("latency.count").alias("bucket_count"),
        F.col("broker.cpu_pct").alias("broker_cpu_pct"),
        F.col("generator.saturated").alias("generator_saturated"),
    )
    # null keys would not join or group as one: a closed-loop run is rate 0, no peer mode is ""
    cells = cells.fillna({"peer_mode": "", "rate": 0})
    intervals = cells.filter(F.col("kind") == F.lit(log.KIND_INTERVAL))
    summaries = cells.filter(F.col("kind") == F.lit(log.KIND_SUMMARY)).join(
        intervals.select("run_id", "cell_id").distinct(), ["run_id", "cell_id"], "left_anti"
    )
    return intervals.unionByName(summaries)


def repeat_rows(rows: DataFrame) -> DataFrame:
    """A row per repeat (``REPEAT``'s keys) of ``measurements``: acked and seconds summed, the cell
    ids, the broker's CPU summed and counted, whether the generator saturated, and its histograms
    summed bucket by bucket: ``index`` and ``count``, the non-empty buckets of the scheme ascending
    (empty when there is none).

    Two shuffles: intervals exploded into their buckets and summed per (repeat, bucket), then per
    repeat. An interval's own figures ride on its first bucket only (``explode_outer``: an interval
    with no bucket keeps one row), so summing them over buckets counts each interval once."""
    first = F.col("pos").isNull() | (F.col("pos") == 0)

    def once(column: str) -> Column:
        return F.when(first, F.col(column))

    buckets = rows.select(
        *REPEAT,
        "cell_id",
        "acked",
        "seconds",
        "broker_cpu_pct",
        "generator_saturated",
        F.posexplode_outer(F.arrays_zip("bucket_index", "bucket_count")).alias("pos", "b"),
    )
    per_bucket = buckets.groupBy(*REPEAT, F.col("b.bucket_index").alias("index")).agg(
        F.sum("b.bucket_count").alias("count"),
        F.sum(once("acked")).alias("acked"),
        F.sum(once("seconds")).alias("seconds"),
        F.collect_set("cell_id").alias("cell_ids"),
        F.sum(once("broker_cpu_pct")).alias("broker_cpu_sum"),
        F.count(once("broker_cpu_pct")).alias("broker_cpu_n"),
        F.max(F.coalesce(F.col("generator_saturated"), F.lit(False))).alias("generator_saturated"),
    )
    kept = (F.col("count") > 0) & F.col("index").between(0, N_BUCKETS - 1)
    histogram = F.sort_array(F.collect_list(F.when(kept, F.struct("index", "count"))))
    return per_bucket.groupBy(*REPEAT).agg(
        F.coalesce(F.sum("acked"), F.lit(0)).alias("acked"),
        F.coalesce(F.sum("seconds"), F.lit(0.0)).alias("seconds"),
        F.array_distinct(F.flatten(F.collect_list("cell_ids"))).alias("cell_ids"),
        F.sum("broker_cpu_sum").alias("broker_cpu_sum"),
        F.sum("broker_cpu_n").alias("broker_cpu_n"),
        F.max("generator_saturated").alias("generator_saturated"),
        F.transform(histogram, lambda b: b["index"]).alias("index"),
        F.transform(histogram, lambda b: b["count"]).alias("count"),
    )


def _histogram(index: Sequence[int], count: Sequence[int]) -> Histogram:
    histogram = Histogram()
    histogram.counts[np.asarray(index, dtype=np.int64)] = count
    return histogram


def _percentiles(histogram: Histogram) -> dict[str, Any]:
    """``PERCENTILES``, max and mean of a merged histogram (nearest rank over bucket values)."""
    at = {name: histogram.percentile(p) for name, p in PERCENTILES}
    return {**at, "max_us": histogram.max_us(), "mean_us": histogram.mean_us()}


@dataclasses.dataclass
class Repeat:
    run_id: str
    repeat: int
    msgs_per_s: float
    p99_us: float


@dataclasses.dataclass
class Point:
    """One load of one family, every repeat merged."""

    system: str
    peer_mode: str
    flush: str
    role: str
    size: int
    batch: int
    in_flight: int
    connections: int
    rate: int
    msgs_per_s: float
    mb_per_s: float
    acked: int
    seconds: float
    p50_us: float
    p90_us: float
    p99_us: float
    p999_us: float
    max_us: float
    mean_us: float
    cell_ids: list[str]
    run_ids: list[str]
    repeats: list[Repeat]
    broker_cpu_pct: float | None = None
    generator_saturated: bool = False

    @property
    def family(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in FAMILY)

    @property
    def mode(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in MODE)

    @property
    def spread(self) -> tuple[float, float, float]:
        """min, max and standard deviation of msgs/s over repeats (stdev 0 for one repeat)."""
        rates = [r.msgs_per_s for r in self.repeats] or [self.msgs_per_s]
        return min(rates), max(rates), statistics.stdev(rates) if len(rates) > 1 else 0.0

    def to_json(self) -> dict[str, Any]:
        low, high, stdev = self.spread
        return {**dataclasses.asdict(self), "msgs_per_s_min": low, "msgs_per_s_max": high, "msgs_per_s_stdev": stdev}


@dataclasses.dataclass
class _PointSums:
    """A point's repeats added up as their rows stream in (their buckets into one histogram; floats
    kept a repeat each and added by ``math.fsum``, whose sum the order they came in does not change)."""

    histogram: Histogram = dataclasses.field(default_factory=Histogram)
    acked: int = 0
    seconds: list[float] = dataclasses.field(default_factory=list)
    cpu_sums: list[float] = dataclasses.field(default_factory=list)
    cpu_n: int = 0
    generator_saturated: bool = False
    cell_ids: set[str] = dataclasses.field(default_factory=set)
    run_ids: set[str] = dataclasses.field(default_factory=set)
    repeats: list[Repeat] = dataclasses.field(default_factory=list)

    def add(self, row: Row) -> None:
        histogram = _histogram(row["index"], row["count"])
        self.histogram.merge(histogram)
        self.acked += row["acked"]
        self.seconds.append(row["seconds"])
        self.cpu_sums.append(row["broker_cpu_sum"] or 0.0)
        self.cpu_n += row["broker_cpu_n"]
        self.generator_saturated |= bool(row["generator_saturated"])
        self.cell_ids.update(row["cell_ids"])
        self.run_ids.add(row["run_id"])
        if histogram.total:  # a repeat with no latency measured has no p99; its messages still count
            msgs_per_s = row["acked"] / row["seconds"]
            self.repeats.append(Repeat(row["run_id"], row["repeat"], msgs_per_s, histogram.percentile(99.0)))


def points(records: DataFrame) -> list[Point]:
    """Every measured point, its repeats merged (and each repeat on its own for the spread). Spark
    sums each repeat's intervals; the driver adds up each point's repeats as their rows stream in,
    keeping a histogram a point, never a repeat's buckets."""
    sums: dict[tuple[Any, ...], _PointSums] = defaultdict(_PointSums)
    for row in repeat_rows(measurements(records)).toLocalIterator():
        sums[tuple(row[k] for k in POINT)].add(row)
    result = []
    for key, point in sums.items():
        if not point.histogram.total:  # no latency measured: nothing to put on a curve
            continue
        fields = dict(zip(POINT, key, strict=True))
        seconds = math.fsum(point.seconds)
        msgs_per_s = point.acked / seconds
        result.append(
            Point(
                **fields,
                msgs_per_s=msgs_per_s,
                mb_per_s=msgs_per_s * fields["size"] / MB,
                acked=point.acked,
                seconds=seconds,
                **_percentiles(point.histogram),
                cell_ids=sorted(point.cell_ids),
                run_ids=sorted(point.run_ids),
                repeats=sorted(point.repeats, key=lambda r: (r.run_id, r.repeat)),
                broker_cpu_pct=math.fsum(point.cpu_sums) / point.cpu_n if point.cpu_n else None,
                generator_saturated=point.generator_saturated,
            )
        )
    return sorted(result, key=lambda p: (p.family, p.rate, p.in_flight, p.connections))


def curves(all_points: Iterable[Point]) -> dict[tuple[Any, ...], list[Point]]:
    """The points of each family, in order of load (rate for open loop, in-flight for closed)."""
    by_family: dict[tuple[Any, ...], list[Point]] = defaultdict(list)
    for p in all_points:
        by_family[p.family].append(p)
    return {k: sorted(v, key=lambda p: (p.rate, p.in_flight, p.connections)) for k, v in sorted(by_family.items())}


@dataclasses.dataclass
class Saturation:
    """The highest throughput of a family whose p99 stays at or below the SLO, and what the other
    loads of its curve measured against the SLO: read from the points, never assumed monotone."""

    point: Point
    slo_us: float
    # heavier loads (later in the curve's order of load) whose p99 broke the SLO
    broken_above: list[Point] = dataclasses.field(default_factory=list)
    # lighter loads whose p99 broke the SLO although a heavier one met it: a curve that is not
    # monotone, shown as measured and called out (a stall in that run, or too few samples)
    broken_below: list[Point] = dataclasses.field(default_factory=list)
    # the highest msgs/s any load of the curve acked, within the SLO or not
    max_msgs_per_s: float = 0.0

    @property
    def msgs_per_s(self) -> float:
        return self.point.msgs_per_s

    @property
    def bounded(self) -> bool:
        """Some heavier load broke the SLO; False: every heavier load met it, so the real saturation
        point lies beyond what was measured (the plan says "at least")."""
        return bool(self.broken_above)

    @property
    def monotone(self) -> bool:
        return not self.broken_below

    @property
    def binding(self) -> str:
        """What stops one set at this point: the latency SLO when a load acked more msgs/s but broke
        it, else throughput (no load measured acked more)."""
        return BINDS_SLO if self.max_msgs_per_s > self.point.msgs_per_s else BINDS_THROUGHPUT

    def to_json(self) -> dict[str, Any]:
        low, high, stdev = self.point.spread
        p = self.point
        return {
            "family": dict(zip(FAMILY, p.family, strict=True)),
            "msgs_per_s": p.msgs_per_s,
            "mb_per_s": p.mb_per_s,
            "msgs_per_s_min": low,
            "msgs_per_s_max": high,
            "msgs_per_s_stdev": stdev,
            "p99_us": p.p99_us,
            "slo_us": self.slo_us,
            "in_flight": p.in_flight,
            "connections": p.connections,
            "rate": p.rate,
            "bounded": self.bounded,
            "monotone": self.monotone,
            "slo_broken_above": [_load_json(q) for q in self.broken_above],
            "slo_broken_below": [_load_json(q) for q in self.broken_below],
            "max_msgs_per_s": self.max_msgs_per_s,
            "binding": self.binding,
            "repeats": len(p.repeats),
            "cell_ids": p.cell_ids,
            "run_ids": p.run_ids,
        }


BINDS_THROUGHPUT = "throughput"
BINDS_SLO = "latency SLO"


def _load_key(p: Point) -> tuple[int, int, int]:
    return (p.rate, p.in_flight, p.connections)


def _load_json(p: Point) -> dict[str, Any]:
    return {
        "in_flight": p.in_flight,
        "rate": p.rate,
        "msgs_per_s": p.msgs_per_s,
        "p99_us": p.p99_us,
        "cell_ids": p.cell_ids,
    }


def saturation(curve: Sequence[Point], slo_us: float) -> Saturation | None:
    """The saturation point of one family's curve; None when no load meets the SLO.

    When the family was measured open loop (target rates), only those points count: a closed-loop
    point is an upper bound for a fixed offered rate (its sender waits out a stall instead of
    queueing behind it, so the stall never reaches its percentiles), and a plan resting on it
    promises a rate whose p99 an open-loop re-measurement breaks. Which loads broke the SLO above
    and below the saturation point is read from the points themselves, in order of load."""
    open_loop = [p for p in curve if p.rate]
    points = sorted(open_loop or curve, key=_load_key)
    meeting = [p for p in points if p.p99_us <= slo_us]
    if not meeting:
        return None
    best = max(meeting, key=lambda p: p.msgs_per_s)
    broken = [p for p in points if p.p99_us > slo_us]
    heaviest_meeting = max(map(_load_key, meeting))
    return Saturation(
        best,
        slo_us,
        broken_above=[p for p in broken if _load_key(p) > _load_key(best)],
        broken_below=[p for p in broken if _load_key(p) < heaviest_meeting],
        max_msgs_per_s=max(p.msgs_per_s for p in points),
    )


@dataclasses.dataclass
class SizeFit:
    """``1 / msgs_per_s = a + b * size`` over one mode's saturation points at several sizes."""

    mode: tuple[Any, ...]
    a: float  # seconds per message
    b: float  # seconds per byte
    sizes: list[int]
    cell_ids: list[str]
    run_ids: list[str]

    def msgs_per_s(self, size: int) -> float:
        return 1.0 / (self.a + self.b * size)

    def mb_per_s(self, size: int) -> float:
        return self.msgs_per_s(size) * size / MB

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": dict(zip(MODE, self.mode, strict=True)),
            "seconds_per_msg": self.a,
            "seconds_per_byte": self.b,
            "sizes": self.sizes,
            "cell_ids": self.cell_ids,
            "run_ids": self.run_ids,
        }


def size_fits(saturations: Iterable[Saturation]) -> dict[tuple[Any, ...], SizeFit]:
    """Per mode measured at two sizes or more, the least-squares fit of 1/throughput on size."""
    by_mode: dict[tuple[Any, ...], list[Saturation]] = defaultdict(list)
    for s in saturations:
        by_mode[s.point.mode].append(s)
    fits = {}
    for mode, sats in by_mode.items():
        sizes = sorted({s.point.size for s in sats})
        if len(sizes) < 2:
            continue
        x = np.array([s.point.size for s in sats], dtype=np.float64)
        y = np.array([1.0 / s.msgs_per_s for s in sats])
        (a, b), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), y, rcond=None)
        if a + b * max(sizes) <= 0 or not math.isfinite(a):
            continue
        cells = sorted({c for s in sats for c in s.point.cell_ids})
        runs = sorted({r for s in sats for r in s.point.run_ids})
        fits[mode] = SizeFit(mode, float(a), float(b), sizes, cells, runs)
    return fits


def broker_stats(stats: DataFrame) -> list[dict[str, Any]]:
    """Per broker and topic what the stats logs saw put (messages, stored bytes, average and peak
    msgs/s, stored bytes a message, the p99 put latency bucket of the merged samples), and per group
    what it got: what a running cluster's own logs say, beside the perf logs' figures."""
    seconds = F.sum(F.col("t_end") - F.col("t_start"))
    puts = stats.filter(F.col("kind") == F.lit(read.STATS_TOPIC_PUT))
    # as repeat_rows: a line's own figures ride on its first latency bucket, one query of two shuffles
    buckets = puts.select(
        "broker", "topic", "t_start", "t_end", "put_nums", "put_size", "put_tps",
        F.col("put_latency_ms.bounds").alias("bounds"),
        F.posexplode_outer("put_latency_ms.counts").alias("pos", "count"),
    )  # fmt: skip
    first = F.col("pos").isNull() | (F.col("pos") == 0)
    per_bucket = buckets.groupBy("broker", "topic", F.col("pos").alias("bucket")).agg(
        F.sum("count").alias("count"),
        F.first("bounds").alias("bounds"),
        F.sum(F.when(first, F.col("put_nums"))).alias("put_nums"),
        F.sum(F.when(first, F.col("put_size"))).alias("put_size"),
        F.sum(F.when(first, F.col("t_end") - F.col("t_start"))).alias("seconds"),
        F.max("put_tps").alias("put_tps"),
    )
    put_rows = per_bucket.groupBy("broker", "topic").agg(
        F.sum("put_nums").alias("messages"),
        F.sum("put_size").alias("bytes"),
        (F.sum("put_nums") / F.sum("seconds")).alias("avg_msgs_per_s"),
        F.max("put_tps").alias("peak_msgs_per_s"),
        (F.sum("put_size") / F.sum("put_nums")).alias("bytes_per_message"),
        F.collect_list(F.when(F.col("bucket").isNotNull(), F.struct("bucket", "count", "bounds"))).alias("latency"),
    )
    result = []
    for row in put_rows.collect():
        fields = row.asDict()
        counts = sorted((b["bucket"], b["count"], b["bounds"] or []) for b in fields.pop("latency"))
        result.append({"kind": read.STATS_TOPIC_PUT, **fields, "put_p99_ms": _p99_bucket(counts)})
    gets = stats.filter(F.col("kind") == F.lit(read.STATS_GROUP_GET))
    for row in (
        gets.groupBy("broker", "group", "topic")
        .agg(
            F.sum("get_nums").alias("messages"),
            F.sum("get_size").alias("bytes"),
            (F.sum("get_nums") / seconds).alias("avg_msgs_per_s"),
            F.max("get_tps").alias("peak_msgs_per_s"),
        )
        .collect()
    ):
        result.append({"kind": read.STATS_GROUP_GET, **row.asDict()})
    return sorted(result, key=lambda r: (r["kind"], r["broker"], r["topic"], r.get("group") or ""))


def _p99_bucket(counts: list[tuple[int, int, list[int]]]) -> str | None:
    """``"<= 10"`` (ms): the bucket of the merged put-latency counts where the 99th percentile falls."""
    total = sum(c for _, c, _ in counts)
    if not total:
        return None
    rank = max(1, math.ceil(0.99 * total))
    seen = 0
    for bucket, count, bounds in counts:
        seen += count
        if seen >= rank:
            return f"<= {bounds[bucket]}" if bucket < len(bounds) else f"> {bounds[-1]}" if bounds else None
    return None
