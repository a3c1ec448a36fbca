"""``rmq-traffic STORE_DIR... --out DIR``: what producers sent to a broker (or a cluster's brokers),
read from the stores themselves with Spark (``from_store``: the CommitLog data source, consumer
offsets) and from the brokers' ``stats.log`` when there is one; written as ``traffic.json``, the
charts as PNG and ``traffic.html`` (one file, the charts embedded).

    rates.png        messages a second over the span, and their 1-minute averages
    topics.png       the top topics by messages and by stored bytes
    sizes.png        message bodies by size (power-of-two buckets)
    latency.png      store time minus born time (the producer's clock to the broker's: a send's
                     way in, plus any skew of the two clocks), power-of-two ms buckets

The tables: top topics, producers by host (the born host's IP: connections, messages, bytes),
consumer groups per topic, corrupt regions per CommitLog file, and the stats logs' rates per topic
and group. Exit codes: 0 written; 1 nothing to read (no CommitLog, or no producer's message);
2 a usage error.
"""

from __future__ import annotations

import base64
import html
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import matplotlib.pyplot as plt
from pyspark.sql import SparkSession

from rmq.perf.capacity import from_store, model, read
from rmq.perf.capacity.commitlog_source import CommitLogError, store_commitlog_dir
from rmq.perf.capacity.from_store import StoreTraffic

# the report's table and byte formats, so the two reports read alike
from rmq.perf.capacity.report import _fmt_bytes as _bytes
from rmq.perf.capacity.report import _table

# what the report holds at most: a chart of 1 s points past a day says nothing a 1-minute one does not
MAX_SECOND_POINTS = 86_400
TOP_TOPICS = 10
CHARTS = ("rates", "topics", "sizes", "latency")


def per_minute(per_second: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int, int]]:
    """(minute's first second, messages, body bytes, seconds of the span in it) of each minute of
    1 s points: the first and last minutes are partial, their rate is over their own seconds."""
    minutes: dict[int, list[int]] = {}
    for second, messages, size in per_second:
        m = minutes.setdefault(second - second % 60, [0, 0, 0])
        m[0] += messages
        m[1] += size
        m[2] += 1
    return [(m, n, b, k) for m, (n, b, k) in sorted(minutes.items())]


def traffic_doc(traffic: StoreTraffic, stats: Sequence[Mapping[str, Any]], peak_window_s: int) -> dict[str, Any]:
    """traffic.json: ``from_store.StoreTraffic``'s summary, the series, producers, latency, stats."""
    seconds = traffic.per_second
    return {
        **traffic.summary(peak_window_s),
        "latency_ms": traffic.latency_ms,
        "producers": traffic.producers,
        "rate_1s": [list(p) for p in seconds[-MAX_SECOND_POINTS:]],
        "rate_1s_truncated": len(seconds) > MAX_SECOND_POINTS,
        "rate_1min": [list(p) for p in per_minute(seconds)],
        "stats_log": [dict(s) for s in stats],
    }


def write_charts(out: Path, doc: Mapping[str, Any]) -> dict[str, Path]:
    paths: dict[str, Path] = {}

    def save(name: str, fig: Any) -> None:
        fig.tight_layout()
        paths[name] = out / f"{name}.png"
        fig.savefig(paths[name], dpi=100)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 3.6))
    if doc["rate_1s"]:
        t0 = doc["rate_1s"][0][0]
        ax.plot([(s - t0) / 60 for s, _n, _b in doc["rate_1s"]], [n for _s, n, _b in doc["rate_1s"]],
                lw=0.6, color="#1f77b4", label="per second")  # fmt: skip
        minutes = doc["rate_1min"]
        ax.step([(m - t0) / 60 for m, _n, _b, _k in minutes] + [(minutes[-1][0] + 60 - t0) / 60],
                [n / k for _m, n, _b, k in minutes] + [minutes[-1][1] / minutes[-1][3]], where="post",
                color="#d62728", lw=1.5, label="1-minute average")  # fmt: skip
        ax.axhline(doc["peak_rate"], color="#555", ls=":", lw=1)
        ax.annotate(f"peak {doc['peak_rate']:,.0f} msgs/s (over {doc['peak_window_s']} s)",
                    ((doc["peak_starts"] - t0) / 60, doc["peak_rate"]), fontsize=8, va="bottom")  # fmt: skip
        ax.legend(fontsize=8, loc="lower right")
    ax.set_xlabel("minutes from the first message")
    ax.set_ylabel("messages / s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Rate over time: average {doc['avg_rate']:,.0f} msgs/s")
    save("rates", fig)

    top = doc["topics"][:TOP_TOPICS]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 0.4 * len(top) + 1.6))
    names = [t["topic"] for t in top][::-1]
    left.barh(names, [t["messages"] for t in top][::-1], color="#1f77b4")
    left.set_title("messages")
    right.barh(names, [t["record_bytes"] / (1 << 20) for t in top][::-1], color="#2ca02c")
    right.set_title("stored MiB")
    right.set_yticks([])
    save("topics", fig)

    for name, hist, unit, title in (
        ("sizes", doc["size"]["histogram"], "B", "Message bodies by size"),
        ("latency", doc["latency_ms"]["histogram"], "ms", "Store time minus born time"),
    ):
        fig, ax = plt.subplots(figsize=(10, 3.2))
        labels = [f"<{b['high']:,}" for b in hist]
        ax.bar(range(len(hist)), [b["count"] for b in hist], color="#1f77b4")
        ax.set_xticks(range(len(hist)), labels, rotation=45, fontsize=8)
        ax.set_xlabel(unit)
        ax.set_ylabel("messages (log scale: the tail shows)")
        ax.set_yscale("log")
        ax.set_title(title)
        save(name, fig)
    return paths


def traffic_html(doc: Mapping[str, Any], charts: Mapping[str, Path]) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>rmq traffic</title><style>",
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}",
        "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;",
        "font-size:13px;text-align:right}th{background:#f2f2f2}td:first-child{text-align:left}",
        ".answer{background:#eef6ee;border:1px solid #9c9;padding:0.8em 1.2em}.warn{color:#a40}",
        "img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}small{color:#666}</style></head><body>",
        "<h1>rmq traffic</h1>",
        f"<div class='answer'><p>{doc['messages']:,} messages, {_bytes(doc['record_bytes'])} stored, over "
        f"{doc['seconds']:,.0f} s: average <b>{doc['avg_rate']:,.1f}</b> msgs/s, peak <b>{doc['peak_rate']:,.1f}</b> "
        f"msgs/s over {doc['peak_window_s']} s (busiest single second {doc['max_second_rate']:,}); mean body "
        f"{doc['size']['mean']:,.0f} B; {doc['fan_out']:.2f} consumer group(s) per message.</p>"
        f"<p><small>Stores: {html.escape(', '.join(doc['stores']))}</small></p></div>",
    ]
    if doc["corrupt"]:
        parts.append("<p class='warn'>Corrupt or torn regions were skipped:</p>")
        parts.append(
            _table(
                ["CommitLog file", "regions", "bytes"],
                [[f, c["regions"], c["bytes"]] for f, c in doc["corrupt"].items()],
            )
        )
    titles = {
        "rates": "Rate over time (1 s and 1 min)",
        "topics": f"Top {TOP_TOPICS} topics",
        "sizes": "Size histogram",
        "latency": "Store minus born latency",
    }
    for name in CHARTS:
        data = base64.b64encode(charts[name].read_bytes()).decode()
        parts.append(f"<h2>{titles[name]}</h2><img alt='{name}' src='data:image/png;base64,{data}'>")
        if name == "topics":
            parts.append(
                _table(
                    ["topic", "messages", "stored", "body bytes", "tags (most)", "keys/msg", "groups"],
                    [
                        [
                            t["topic"],
                            f"{t['messages']:,}",
                            _bytes(t["record_bytes"]),
                            f"{t['body_bytes']:,}",
                            t["tags"] or "",
                            t["keys_per_message"],
                            ", ".join(t["groups"]),
                        ]
                        for t in doc["topics"][:TOP_TOPICS]
                    ],  # fmt: skip
                )
            )
        if name == "sizes":
            s = doc["size"]
            parts.append(
                f"<p>Body bytes: min {s['min']}, p50 {s.get('p50')}, p90 {s.get('p90')}, p99 {s.get('p99')}, "
                f"max {s['max']}, mean {s['mean']:,.1f}.</p>"
            )
        if name == "latency":
            lat = doc["latency_ms"]
            parts.append(
                f"<p>ms: p50 {lat.get('p50')}, p99 {lat.get('p99')}, p99.9 {lat.get('p999')}, max {lat['max']}.</p>"
            )
    parts.append("<h2>Producers by host</h2>")
    parts.append(
        _table(
            ["host", "connections", "messages", "body bytes", "topics"],
            [
                [p["host"], p["connections"], f"{p['messages']:,}", _bytes(p["body_bytes"]), p["topics"]]
                for p in doc["producers"]
            ],  # fmt: skip
        )
    )
    if doc["stats_log"]:
        parts.append("<h2>The brokers' stats.log</h2>")
        parts.append(
            _table(
                ["broker", "topic", "group", "messages", "bytes", "avg msgs/s", "peak msgs/s (1 interval)"],
                [
                    [
                        s["broker"],
                        s["topic"],
                        s.get("group") or "",
                        f"{s['messages']:,}",
                        _bytes(s["bytes"]),
                        f"{s['avg_msgs_per_s']:,.1f}",
                        f"{s['peak_msgs_per_s'] or 0:,.1f}",
                    ]
                    for s in doc["stats_log"]
                ],  # fmt: skip
            )
        )
    if doc["skipped_topics"]:
        left_out = ", ".join(f"{t} ({n:,})" for t, n in doc["skipped_topics"].items())
        parts.append(f"<p><small>The broker's own topics, left out: {html.escape(left_out)}.</small></p>")
    parts.append("<p><small>Every figure in full: traffic.json.</small></p></body></html>")
    return "\n".join(parts)


class NoTraffic(Exception):
    """No producer's message in the stores."""


def write_report(
    spark: SparkSession, stores: Sequence[str], out: Path, peak_window_s: int, partition_bytes: int | None = None
) -> tuple[StoreTraffic, dict[str, Path]]:
    """Read ``stores`` (and their stats logs) with ``spark``; write traffic.json, the charts and
    traffic.html into ``out``; what was read and the paths written. NoTraffic when there is nothing."""
    traffic = from_store.store_traffic(spark, stores, partition_bytes)
    stats: list[dict[str, Any]] = []
    if stats_files := read.stats_log_files(stores):
        rows, _bad = read.read_stats_logs(spark, stats_files)
        stats = model.broker_stats(rows)
    if not traffic.messages:
        raise NoTraffic(f"no message of a producer's topic in {', '.join(map(str, stores))}")
    out.mkdir(parents=True, exist_ok=True)
    doc = traffic_doc(traffic, stats, peak_window_s)
    paths = {"traffic.json": out / "traffic.json"}
    paths["traffic.json"].write_text(json.dumps(doc, indent=1, default=str))
    charts = write_charts(out, doc)
    paths.update({f"{k}.png": v for k, v in charts.items()})
    paths["traffic.html"] = out / "traffic.html"
    paths["traffic.html"].write_text(traffic_html(doc, charts))
    return traffic, paths


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("stores", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="directory to write into")
@click.option("--master", help="Spark master URL (default local[*], or spark-submit's --master)")
@click.option(
    "--peak-window",
    type=click.IntRange(1),
    help="seconds the peak rate is averaged over (default 10, RocketMQ's shortest putTps window)",
)
@click.option("--partition-size", type=click.IntRange(4096), help="bytes of a CommitLog file per Spark partition")
@click.option("-q", "--quiet", is_flag=True, help="print only the output paths")
def main(
    stores: tuple[str, ...], out: str, master: str | None, peak_window: int | None, partition_size: int | None,
    quiet: bool,
) -> None:  # fmt: skip
    """A traffic report of brokers' stores (STORE_DIR: a storePathRootDir, or a copy of one): top
    topics, rates over time, sizes, latencies, producers, and the stats logs' rates."""
    started = time.monotonic()
    try:
        for store in stores:
            store_commitlog_dir(store)
    except CommitLogError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    window = peak_window or from_store.DEFAULT_PEAK_WINDOW_S
    if not quiet:
        click.echo(f"reading {len(stores)} store(s) with Spark ({master or 'local[*]'})", err=True)
    spark = read.session(master, app_name="rmq-traffic")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        traffic, paths = write_report(spark, stores, Path(out), window, partition_size)
    except NoTraffic as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    finally:
        spark.stop()
    if not quiet:
        click.echo(from_store.describe(traffic, window), err=True)
        click.echo(f"done in {time.monotonic() - started:.0f} s", err=True)
    for path in paths.values():
        click.echo(str(path))


if __name__ == "__main__":
    main()
