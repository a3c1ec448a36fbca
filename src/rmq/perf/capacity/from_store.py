"""A workload from the broker's own data: one or more stores read with Spark (the CommitLog through
``commitlog_source``, the consumer offsets from ``config/consumerOffset.json``), for
``rmq-capacity --from-store`` and ``rmq-traffic``.

What producers sent is every record of a topic a producer may send to: not the broker's own (the
schedule, transaction and timer topics, ``rmq_sys_*``, TBW102) nor a group's retry or dead-letter
topic. Rates are counted by STORETIMESTAMP, the broker's clock: when the store took each message,
which is the load a broker has to carry. Several stores (a cluster's brokers) are counted together,
second by second, so a peak is the cluster's.

    average rate   messages / (last store time - first store time)
    peak rate      the highest average over ``peak_window`` seconds (default 10 s, the shortest
                   window of RocketMQ's putTps "10 s, 1 min, 10 min"): a burst the brokers must
                   carry, not a second in which a stalled client caught up
    size           the mean body (the disk and the network carry the mean), and its percentiles
    fan-out        consumer groups per message: each topic's groups with a committed offset,
                   weighted by the topic's messages

Only aggregates reach the driver: a row per second, per topic, per size or latency bucket and per
producer host; the records themselves stay in the executors.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from rmq._files import read_with_backup
from rmq.perf.capacity import commitlog_source
from rmq.perf.capacity.commitlog_source import CORRUPT
from rmq.protocol.java_json import loads_java_json
from rmq.protocol.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    SYSTEM_TOPIC_PREFIX,
)

CONSUMER_OFFSETS = Path("config") / "consumerOffset.json"
# RocketMQ's putTps windows are 10 s, 1 min and 10 min: the shortest is the peak's
DEFAULT_PEAK_WINDOW_S = 10
# body sizes and store-minus-born latencies are counted in powers of two: bucket k holds [2^(k-1), 2^k)
SIZE_PERCENTILES = (0.5, 0.9, 0.99)
# a consumer group the broker keeps for itself
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"


def is_produced(topic: str) -> bool:
    """A topic producers send to (module docstring)."""
    return not (
        topic in NOT_ALLOWED_SEND_TOPICS
        or topic == AUTO_CREATE_TOPIC_KEY_TOPIC
        or topic.startswith((SYSTEM_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
    )


def _produced(topic: Column) -> Column:
    internal = topic.isin(*NOT_ALLOWED_SEND_TOPICS, AUTO_CREATE_TOPIC_KEY_TOPIC)
    for prefix in (SYSTEM_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        internal = internal | topic.startswith(prefix)
    return ~internal


def consumer_groups(stores: Sequence[str]) -> dict[str, list[str]]:
    """topic -> the groups with a committed offset on it, over every store (``topic@group`` keys of
    ``config/consumerOffset.json``, or its ``.bak``); a store without the file has none."""
    groups: dict[str, set[str]] = {}
    for store in stores:
        table = read_with_backup(Path(store) / CONSUMER_OFFSETS, loads_java_json) or {}
        for key in (table.get("offsetTable") or {}) if isinstance(table, dict) else {}:
            topic, _, group = str(key).partition("@")
            if group and is_produced(topic) and not group.startswith(SYSTEM_GROUP_PREFIX):
                groups.setdefault(topic, set()).add(group)
    return {topic: sorted(names) for topic, names in sorted(groups.items())}


def load(spark: SparkSession, stores: Sequence[str], partition_bytes: int | None = None) -> DataFrame:
    """Every record of ``stores`` (commitlog_source's rows, corrupt regions included)."""
    commitlog_source.register(spark)
    reader = spark.read.format(commitlog_source.NAME).option("paths", ",".join(map(str, stores)))
    if partition_bytes is not None:
        reader = reader.option("partitionSize", str(partition_bytes))
    return reader.load()


def _log2_bucket(column: Column) -> Column:
    """k with 2^(k-1) <= value < 2^k (0 for values below 1)."""
    return F.when(column < 1, F.lit(0)).otherwise(F.floor(F.log2(column)).cast("int") + 1)


def bucket_bounds(k: int) -> tuple[int, int]:
    """The values ``[low, high)`` of log2 bucket ``k``."""
    return (0, 1) if k == 0 else (1 << (k - 1), 1 << k)


@dataclasses.dataclass
class StoreTraffic:
    """What the stores' producers sent, as aggregates (module docstring)."""

    stores: list[str]
    per_second: list[tuple[int, int, int]]  # (Unix second, messages, body bytes), every second of the span
    first_ms: int
    last_ms: int
    messages: int
    body_bytes: int
    record_bytes: int
    topics: list[dict[str, Any]]  # per topic: messages, body/record bytes, tags, keys per message
    size: dict[str, Any]  # body size: mean, min, max, percentiles, log2 histogram
    latency_ms: dict[str, Any]  # store - born timestamp: percentiles and log2 histogram
    producers: list[dict[str, Any]]  # per born host IP: messages, bytes, topics, connections
    groups: dict[str, list[str]]  # topic -> consumer groups with offsets
    corrupt: dict[str, dict[str, int]]  # file -> regions, bytes skipped
    skipped_topics: dict[str, int]  # the broker's own topics' messages, left out

    @property
    def seconds(self) -> float:
        return max((self.last_ms - self.first_ms) / 1000.0, 1e-3)

    @property
    def avg_rate(self) -> float:
        return self.messages / self.seconds if self.messages > 1 else float(self.messages)

    def peak(self, window_s: int = DEFAULT_PEAK_WINDOW_S) -> tuple[float, int]:
        """(the highest average msgs/s over ``window_s`` whole seconds, the window's first second).
        A span shorter than the window: its average. The first and last seconds of the span are
        partial (the traffic began and ended within them), so a window holding either is not used
        when there is a full one."""
        counts = np.array([n for _s, n, _b in self.per_second], dtype=np.int64)
        if len(counts) <= window_s + 2:
            return self.avg_rate, self.per_second[0][0] if self.per_second else 0
        inner = counts[1:-1]
        sums = np.convolve(inner, np.ones(window_s, dtype=np.int64), mode="valid")
        at = int(np.argmax(sums))
        return float(sums[at]) / window_s, self.per_second[1 + at][0]

    def fan_out(self) -> float:
        """Consumer groups per message: each topic's groups weighted by its messages."""
        if not self.messages:
            return 0.0
        return sum(t["messages"] * len(self.groups.get(t["topic"], ())) for t in self.topics) / self.messages

    def workload_fields(self, peak_window_s: int = DEFAULT_PEAK_WINDOW_S) -> dict[str, Any]:
        """The planner's workload fields this traffic gives (``plan.Workload``); the rest (SLO,
        retention, role, flush, headroom) are the operator's."""
        if not self.messages:
            raise ValueError(f"no message of a producer's topic in {', '.join(self.stores)}: nothing to derive from")
        peak, _at = self.peak(peak_window_s)
        busiest = self.topics[0]
        return {
            "peak_rate": round(peak, 1),
            "avg_rate": round(min(self.avg_rate, peak), 1),
            "size": max(1, round(self.size["mean"])),
            "groups": round(self.fan_out(), 2),
            "topic": busiest["topic"],
            "tags": busiest["tags"],
            "keys": round(busiest["keys_per_message"]),
            "key_bytes": max(1, round(busiest["key_bytes"])) if busiest["keys_per_message"] >= 0.5 else 16,
        }

    def summary(self, peak_window_s: int = DEFAULT_PEAK_WINDOW_S) -> dict[str, Any]:
        """What ``--from-store`` derived and from what (written as from_store.json)."""
        peak, at = self.peak(peak_window_s)
        return {
            "stores": self.stores,
            "messages": self.messages,
            "body_bytes": self.body_bytes,
            "record_bytes": self.record_bytes,
            "first_store_ms": self.first_ms,
            "last_store_ms": self.last_ms,
            "seconds": round(self.seconds, 3),
            "avg_rate": round(self.avg_rate, 1),
            "peak_rate": round(peak, 1),
            "peak_window_s": peak_window_s,
            "peak_starts": at,
            "max_second_rate": max((n for _s, n, _b in self.per_second), default=0),
            "size": self.size,
            "fan_out": round(self.fan_out(), 3),
            "groups": self.groups,
            "topics": self.topics,
            "corrupt": self.corrupt,
            "skipped_topics": self.skipped_topics,
        }


def store_traffic(
    spark: SparkSession, stores: Sequence[str], partition_bytes: int | None = None, top_hosts: int = 50
) -> StoreTraffic:
    """The aggregates of ``stores``' CommitLogs (a Spark job over commitlog_source)."""
    stores = [str(s) for s in stores]
    # the stores are read once: every aggregate below is of this cached projection
    rows = (
        load(spark, stores, partition_bytes)
        .select(
            "topic",
            "store_timestamp",
            "born_timestamp",
            "body_size",
            "total_size",
            "tags",
            "keys",
            F.substring_index("born_host", ":", 1).alias("host"),
            "born_host",
            "file",
            CORRUPT,
        )
        .cache()
    )
    try:
        corrupt = {
            r["file"]: {"regions": r["regions"], "bytes": r["bytes"]}
            for r in rows.filter(F.col(CORRUPT).isNotNull())
            .groupBy("file")
            .agg(F.count("*").alias("regions"), F.sum("total_size").alias("bytes"))
            .collect()
        }
        good = rows.filter(F.col(CORRUPT).isNull())
        skipped = {
            r["topic"]: r["count"] for r in good.filter(~_produced(F.col("topic"))).groupBy("topic").count().collect()
        }
        produced = good.filter(_produced(F.col("topic")))
        return _aggregate(produced, stores, corrupt, skipped, top_hosts, consumer_groups(stores))
    finally:
        rows.unpersist()


def _aggregate(
    produced: DataFrame,
    stores: list[str],
    corrupt: dict[str, dict[str, int]],
    skipped: dict[str, int],
    top_hosts: int,
    groups: dict[str, list[str]],
) -> StoreTraffic:
    seconds = {
        r["second"]: (r["messages"], r["bytes"])
        for r in produced.groupBy(F.floor(F.col("store_timestamp") / 1000).alias("second"))
        .agg(F.count("*").alias("messages"), F.sum("body_size").alias("bytes"))
        .collect()
    }
    totals = produced.agg(
        F.count("*").alias("messages"),
        F.sum("body_size").alias("body_bytes"),
        F.sum("total_size").alias("record_bytes"),
        F.min("store_timestamp").alias("first_ms"),
        F.max("store_timestamp").alias("last_ms"),
        F.avg("body_size").alias("mean"),
        F.min("body_size").alias("min"),
        F.max("body_size").alias("max"),
        F.percentile_approx("body_size", list(SIZE_PERCENTILES), 10_000).alias("size_pct"),
        F.percentile_approx(F.col("store_timestamp") - F.col("born_timestamp"), [0.5, 0.99, 0.999], 10_000).alias(
            "latency_pct"
        ),
        F.max(F.col("store_timestamp") - F.col("born_timestamp")).alias("latency_max"),
    ).first()
    messages = int(totals["messages"] or 0) if totals else 0
    per_second: list[tuple[int, int, int]] = []
    if seconds:
        first, last = min(seconds), max(seconds)
        per_second = [(s, *seconds.get(s, (0, 0))) for s in range(first, last + 1)]
    keys_per = F.coalesce(F.size(F.split(F.trim("keys"), " +")), F.lit(0))
    topic_rows = (
        produced.groupBy("topic")
        .agg(
            F.count("*").alias("messages"),
            F.sum("body_size").alias("body_bytes"),
            F.sum("total_size").alias("record_bytes"),
            F.avg(keys_per).alias("keys_per_message"),
            (F.sum(F.length(F.regexp_replace("keys", " ", ""))) / F.greatest(F.sum(keys_per), F.lit(1))).alias(
                "key_bytes"
            ),
            F.mode("tags").alias("tags"),
        )
        .orderBy(F.desc("messages"), "topic")
        .collect()
    )
    topics = [
        {
            "topic": r["topic"],
            "messages": r["messages"],
            "body_bytes": r["body_bytes"],
            "record_bytes": r["record_bytes"],
            "keys_per_message": round(r["keys_per_message"] or 0.0, 3),
            "key_bytes": round(r["key_bytes"] or 0.0, 1),
            "tags": r["tags"],
            "groups": groups.get(r["topic"], []),
        }
        for r in topic_rows
    ]
    size_hist = _histogram(produced, F.col("body_size"))
    latency_hist = _histogram(produced, F.col("store_timestamp") - F.col("born_timestamp"))
    producers = [
        {
            "host": r["host"],
            "messages": r["messages"],
            "body_bytes": r["body_bytes"],
            "topics": r["topics"],
            "connections": r["connections"],
        }
        for r in produced.groupBy("host")
        .agg(
            F.count("*").alias("messages"),
            F.sum("body_size").alias("body_bytes"),
            F.countDistinct("topic").alias("topics"),
            F.countDistinct("born_host").alias("connections"),
        )
        .orderBy(F.desc("messages"), "host")
        .limit(top_hosts)
        .collect()
    ]
    size_pct = (totals["size_pct"] if totals else None) or []
    latency_pct = (totals["latency_pct"] if totals else None) or []
    return StoreTraffic(
        stores=stores,
        per_second=per_second,
        first_ms=int(totals["first_ms"] or 0) if totals else 0,
        last_ms=int(totals["last_ms"] or 0) if totals else 0,
        messages=messages,
        body_bytes=int(totals["body_bytes"] or 0) if totals else 0,
        record_bytes=int(totals["record_bytes"] or 0) if totals else 0,
        topics=topics,
        size={
            "mean": float(totals["mean"] or 0.0) if totals else 0.0,
            "min": totals["min"] if totals else None,
            "max": totals["max"] if totals else None,
            **{f"p{round(p * 100)}": v for p, v in zip(SIZE_PERCENTILES, size_pct, strict=False)},
            "histogram": size_hist,
        },
        latency_ms={
            **{name: v for name, v in zip(("p50", "p99", "p999"), latency_pct, strict=False)},
            "max": totals["latency_max"] if totals else None,
            "histogram": latency_hist,
        },
        producers=producers,
        groups=groups,
        corrupt=corrupt,
        skipped_topics=dict(sorted(skipped.items())),
    )


def _histogram(rows: DataFrame, value: Column) -> list[dict[str, int]]:
    """Log2 buckets of ``value``: ``[{"low", "high", "count"}]`` in order (negatives in bucket 0)."""
    counts = {r["k"]: r["count"] for r in rows.groupBy(_log2_bucket(value).alias("k")).count().collect()}
    return [
        {"low": bucket_bounds(k)[0], "high": bucket_bounds(k)[1], "count": counts[k]}
        for k in sorted(counts)
        if k is not None
    ]


def write_summary(path: Path, traffic: StoreTraffic, peak_window_s: int) -> None:
    path.write_text(json.dumps(traffic.summary(peak_window_s), indent=1, default=str))


def describe(traffic: StoreTraffic, peak_window_s: int) -> str:
    """One line of what was derived, for the command's output."""
    peak, _at = traffic.peak(peak_window_s)
    return (
        f"{traffic.messages:,} messages over {traffic.seconds:,.0f} s in {len(traffic.stores)} store(s): "
        f"average {traffic.avg_rate:,.1f} msgs/s, peak {peak:,.1f} msgs/s (over {peak_window_s} s), "
        f"mean body {traffic.size['mean']:,.0f} B, fan-out {traffic.fan_out():.2f} group(s)"
        + (f"; {sum(c['regions'] for c in traffic.corrupt.values())} corrupt region(s)" if traffic.corrupt else "")
    )
