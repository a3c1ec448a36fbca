"""The model: throughput-latency curves from merged histograms, saturation points, size fits.

A *cell family* is what one curve is drawn for: (system, peer_mode, flush, role, size, batch). Its
*points* are the loads it was measured at: in-flight count (closed loop) and target rate (open loop;
0 = closed loop) over a number of connections. A point's figures merge every interval of every repeat
and run of it: messages acked over seconds measured, and percentiles of the summed histogram counts
(in Spark: the records' index/count arrays exploded and added per bucket, then ranked with the
bucket values of ``rmq.perf.histogram``). Each repeat (a run id and repeat number) is also merged on
its own, for the run-to-run spread.

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
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from rmq.perf import log
from rmq.perf.capacity import read
from rmq.perf.histogram import N_BUCKETS, value_of

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


def merged_histograms(rows: DataFrame, keys: Sequence[str]) -> DataFrame:
    """``keys + (index, count)``: every histogram of each key's rows summed bucket by bucket."""
    buckets = rows.select(*keys, F.explode(F.arrays_zip("bucket_index", "bucket_count")).alias("b"))
    return (
        buckets.groupBy(*keys, F.col("b.bucket_index").alias("index"))
        .agg(F.sum("b.bucket_count").alias("count"))
        .filter(F.col("count") > 0)
    )


def percentiles(spark: SparkSession, histograms: DataFrame, keys: Sequence[str]) -> DataFrame:
    """``keys + (total, p50_us, p90_us, p99_us, p999_us, max_us, mean_us)`` of merged histograms, by
    the nearest-rank rule over bucket values (as ``Histogram.percentile``)."""
    values = spark.createDataFrame(
        [(i, float(v)) for i, v in enumerate(value_of(np.arange(N_BUCKETS)))], "index long, value double"
    )
    upto = Window.partitionBy(*keys).orderBy("index").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ranked = (
        histograms.join(F.broadcast(values), "index")
        .withColumn("cum", F.sum("count").over(upto))
        .withColumn("total", F.sum("count").over(Window.partitionBy(*keys)))
    )
    at = [
        # the same float arithmetic as Histogram.percentile: ceil(p / 100.0 * total), at least 1
        F.min(F.when(F.col("cum") >= F.greatest(F.lit(1), F.ceil(F.lit(p / 100.0) * F.col("total"))), F.col("value")))
        .cast("double")
        .alias(name)
        for name, p in PERCENTILES
    ]
    return ranked.groupBy(*keys).agg(
        F.first("total").alias("total"),
        *at,
        F.max("value").alias("max_us"),
        (F.sum(F.col("count") * F.col("value")) / F.first("total")).alias("mean_us"),
    )


def _rates(rows: DataFrame, keys: Sequence[str]) -> DataFrame:
    return rows.groupBy(*keys).agg(
        F.sum("acked").alias("acked"),
        F.sum("seconds").alias("seconds"),
        (F.sum("acked") / F.sum("seconds")).alias("msgs_per_s"),
        F.sort_array(F.collect_set("cell_id")).alias("cell_ids"),
        F.sort_array(F.collect_set("run_id")).alias("run_ids"),
        F.avg("broker_cpu_pct").alias("broker_cpu_pct"),
        F.max(F.coalesce(F.col("generator_saturated"), F.lit(False))).alias("generator_saturated"),
    )


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


def points(spark: SparkSession, records: DataFrame) -> list[Point]:
    """Every measured point, its repeats merged (and each repeat on its own for the spread)."""
    rows = measurements(records).cache()
    merged = _rates(rows, POINT).join(percentiles(spark, merged_histograms(rows, POINT), POINT), list(POINT))
    per_repeat = _rates(rows, REPEAT).join(percentiles(spark, merged_histograms(rows, REPEAT), REPEAT), list(REPEAT))
    repeats: dict[tuple[Any, ...], list[Repeat]] = defaultdict(list)
    for row in per_repeat.select(*REPEAT, "msgs_per_s", "p99_us").collect():
        key = tuple(row[k] for k in POINT)
        repeats[key].append(Repeat(row["run_id"], row["repeat"], row["msgs_per_s"], row["p99_us"]))
    result = []
    for row in merged.collect():
        d = row.asDict()
        key = tuple(d[k] for k in POINT)
        fields = {f.name for f in dataclasses.fields(Point)} - {"repeats", "mb_per_s"}
        result.append(
            Point(
                **{k: d[k] for k in fields},
                mb_per_s=d["msgs_per_s"] * d["size"] / MB,
                repeats=sorted(repeats[key], key=lambda r: (r.run_id, r.repeat)),
            )
        )
    rows.unpersist()
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
    put_rows = puts.groupBy("broker", "topic").agg(
        F.sum("put_nums").alias("messages"),
        F.sum("put_size").alias("bytes"),
        (F.sum("put_nums") / seconds).alias("avg_msgs_per_s"),
        F.max("put_tps").alias("peak_msgs_per_s"),
        (F.sum("put_size") / F.sum("put_nums")).alias("bytes_per_message"),
    )
    buckets = (
        puts.select("broker", "topic", F.col("put_latency_ms.bounds").alias("bounds"),
                    F.posexplode("put_latency_ms.counts").alias("bucket", "count"))
        .groupBy("broker", "topic", "bucket")
        .agg(F.sum("count").alias("count"), F.first("bounds").alias("bounds"))
        .collect()
    )  # fmt: skip
    latency: dict[tuple[str, str], list[tuple[int, int, list[int]]]] = defaultdict(list)
    for row in buckets:
        latency[(row["broker"], row["topic"])].append((row["bucket"], row["count"], row["bounds"] or []))
    result = []
    for row in put_rows.collect():
        counts = sorted(latency.get((row["broker"], row["topic"]), []))
        result.append({"kind": read.STATS_TOPIC_PUT, **row.asDict(), "put_p99_ms": _p99_bucket(counts)})
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
