"""What rmq-capacity writes: ``capacity.json``, the charts as PNG, and ``report.html`` (one file, the
charts embedded) that a person reads top down: the answer, then why.

    throughput_vs_in_flight.png   msgs/s per mode against in-flight count, min..max over repeats
    latency_vs_load.png           p50 / p99 / p99.9 against msgs/s, a panel per mode on shared axes,
                                  the SLO line, the saturation point ringed
    mode_cost.png                 the machines each mode needs for the workload, the recommended marked
    disk_per_retention.png        one broker's disk (CommitLog, ConsumeQueue, IndexFile) by retention
                                  days, the machine's disk and the broker's 75 / 85 / 90 % levels

Each chart answers one question and marks the answer; measured points are drawn as points, a line
joins only the points of one series.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rmq.perf.capacity.model import Point, Saturation, SizeFit
from rmq.perf.capacity.plan import MODE_ORDER, ModePlan, Plan, Workload, disk_per_broker, mode_name, record_bytes

CHARTS = ("throughput_vs_in_flight", "latency_vs_load", "mode_cost", "disk_per_retention")
# a colour per role, a line and marker per flush: kept in every chart
ROLE_COLOURS = {"standalone": "#1f77b4", "async_master": "#2ca02c", "sync_master": "#d62728"}
COLOURS = {(f, r): ROLE_COLOURS[r] for f, r in MODE_ORDER}
# percentile field, label, line style: the same in every panel
PERCENTILE_LINES: tuple[tuple[str, str, Literal[":", "-", "--"]], ...] = (
    ("p50_us", "p50", ":"),
    ("p99_us", "p99", "-"),
    ("p999_us", "p99.9", "--"),
)
FLUSH_STYLE = {"ASYNC_FLUSH": ("-", "o"), "SYNC_FLUSH": ("--", "s")}
GiB = 1 << 30
# the sizes the report tabulates a size fit at
FIT_SIZES = (256, 1024, 4096, 16384)


def _rmq_single(points: Sequence[Point], size: int, open_loop: bool = False) -> dict[tuple[str, str], list[Point]]:
    """rmq's single-send points at ``size``, per (flush, role), in order of load: closed-loop ones;
    with ``open_loop``, a mode's open-loop points instead when it has any (as its saturation)."""
    by_mode: dict[tuple[str, str], list[Point]] = {}
    for p in points:
        if p.system == "rmq" and p.batch == 1 and p.size == size:
            by_mode.setdefault((p.flush, p.role), []).append(p)
    result = {}
    for m in MODE_ORDER:
        pts = by_mode.get(m, [])
        chosen = [p for p in pts if p.rate] if open_loop else []
        chosen = chosen or [p for p in pts if not p.rate]
        if chosen:
            result[m] = sorted(chosen, key=lambda p: (p.rate, p.in_flight))
    return result


def chart_size(points: Sequence[Point], wanted: int) -> int:
    """The size the curves are drawn at: the workload's if measured, else the measured one nearest."""
    sizes = sorted({p.size for p in points if p.system == "rmq"}) or sorted({p.size for p in points})
    return min(sizes, key=lambda s: (abs(math.log(s / wanted)), s)) if sizes else wanted


def _points_and_lines(ax: Any, x: Sequence[float], y: Sequence[float], colour: str, **style: Any) -> None:
    """Measured points as markers; a thin line joins only the points of this one series (two
    points joined boldly read as a measured curve between them)."""
    line = style.pop("linestyle", "-")
    if len(x) > 1:
        ax.plot(x, y, linestyle=line, color=colour, linewidth=0.8, alpha=0.5, marker=None)
    ax.plot(x, y, linestyle="none", color=colour, clip_on=False, **style)


def throughput_chart(points: Sequence[Point], size: int) -> Figure:
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    in_flight: set[int] = set()
    for mode, pts in _rmq_single(points, size).items():
        x = [p.in_flight for p in pts]
        line, marker = FLUSH_STYLE[mode[0]]
        _points_and_lines(
            ax, x, [p.msgs_per_s for p in pts], COLOURS[mode], linestyle=line, marker=marker, label=mode_name(*mode)
        )
        lows, highs = zip(*((p.spread[0], p.spread[1]) for p in pts), strict=True)
        ax.fill_between(x, lows, highs, color=COLOURS[mode], alpha=0.2, linewidth=0)
        in_flight.update(x)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(in_flight))
    if in_flight:  # half a step of margin each side, so that no marker sits on the frame
        ax.set_xlim(min(in_flight) / 1.3, max(in_flight) * 1.3)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_ylim(bottom=0, top=max((p.msgs_per_s for p in points), default=1) * 1.12)
    ax.set_xlabel("sends in flight")
    ax.set_ylabel("msgs/s acked (band: min..max over repeats)")
    ax.set_title(f"Throughput against in-flight sends, {size} B messages, one broker set")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:g}K"))
    ax.grid(True, alpha=0.3)
    if in_flight:
        ax.legend(fontsize=9)
    else:
        ax.text(0.5, 0.5, "no closed-loop cells measured", ha="center", va="center", transform=ax.transAxes)
    return fig


def latency_chart(points: Sequence[Point], size: int, slo_ms: float, saturations: Sequence[Saturation]) -> Figure:
    """A panel per mode on shared axes (the same load and latency read the same in every panel):
    the measured percentiles as points, the SLO line, the saturation point ringed and labelled,
    and loads that broke the SLO below it (a curve that is not monotone) called out."""
    modes = _rmq_single(points, size, open_loop=True)
    cols = max(1, min(3, len(modes)))
    rows = max(1, math.ceil(len(modes) / cols))
    fig, axes = plt.subplots(
        rows, cols, figsize=(13, 3.8 * rows), layout="constrained", sharex=True, sharey=True, squeeze=False
    )
    sat_by_mode = {
        (s.point.flush, s.point.role): s
        for s in saturations
        if s.point.system == "rmq" and s.point.size == size and s.point.batch == 1
    }
    shown = [p for pts in modes.values() for p in pts]
    latencies = [getattr(p, f) / 1000 for p in shown for f, _, _ in PERCENTILE_LINES] + [slo_ms]
    top_x = max((p.msgs_per_s / 1000 for p in shown), default=1.0) * 1.1
    low_y, high_y = min(latencies) / 1.5, max(latencies) * 1.5  # every point and the SLO inside the frame
    for ax, (mode, pts) in zip(axes.flat, modes.items(), strict=False):
        pts = sorted(pts, key=lambda p: p.msgs_per_s)
        x = [p.msgs_per_s / 1000 for p in pts]
        for field, label, style in PERCENTILE_LINES:
            y = [getattr(p, field) / 1000 for p in pts]
            _points_and_lines(ax, x, y, COLOURS[mode], linestyle=style, marker="o", ms=4, label=label)
        ax.axhline(slo_ms, color="black", linewidth=1)
        ax.annotate(
            f"SLO p99 {slo_ms:g} ms", (0.02, slo_ms), xycoords=("axes fraction", "data"), va="bottom", fontsize=8
        )
        if (sat := sat_by_mode.get(mode)) is not None:
            sx, sy = sat.msgs_per_s / 1000, sat.point.p99_us / 1000
            ax.plot([sx], [sy], "o", ms=13, mfc="none", mec="black", mew=1.5, clip_on=False, label="saturation")
            ax.axvline(sx, color="grey", linestyle="-.", linewidth=1)
            ax.annotate(
                f"saturation {sx:.1f}K msgs/s" + ("" if sat.bounded else " (at least)"),
                (sx, 0.03),
                xycoords=("data", "axes fraction"),
                ha="right",
                va="bottom",
                rotation=90,
                fontsize=8,
            )
            for q in sat.broken_below:
                ax.annotate(
                    "broke the SLO at a lighter load",
                    (q.msgs_per_s / 1000, q.p99_us / 1000),
                    xytext=(6, -12),
                    textcoords="offset points",
                    color="#a40",
                    fontsize=8,
                )
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlim(0, top_x)
        ax.set_ylim(low_y, high_y)
        ax.set_title(mode_name(*mode) + (", open loop" if pts[0].rate else ""), fontsize=10)
        ax.set_xlabel("K msgs/s acked")
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.grid(True, which="both", alpha=0.25)
    for ax in axes[:, 0]:
        ax.set_ylabel("latency (ms)")
    for ax in list(axes.flat)[len(modes) :]:
        ax.set_visible(False)
    fig.suptitle(f"Latency percentiles against load, {size} B messages (merged histograms)")
    fig.legend(
        handles=[
            *(
                Line2D([], [], color="black", linestyle=style, linewidth=0.8, marker="o", ms=4, label=label)
                for _, label, style in PERCENTILE_LINES
            ),
            Line2D([], [], linestyle="none", marker="o", ms=11, mfc="none", mec="black", label="saturation (p99)"),
        ],
        loc="outside lower center",
        ncols=4,
        fontsize=9,
    )
    return fig


def cost_chart(plan: Plan) -> Figure:
    """Machines each mode needs for the workload (the plan's counts), the recommended one marked."""
    fig, ax = plt.subplots(figsize=(9, 4.8), layout="constrained")
    modes = list(plan.modes)
    names = [m.name.replace(" ", "\n") for m in modes]
    heights = [m.machines or 0 for m in modes]
    rec = plan.recommended
    bars = ax.bar(
        names,
        heights,
        color=[matplotlib.colors.to_rgba(COLOURS[(m.flush, m.role)], 1.0 if m is rec else 0.45) for m in modes],
        edgecolor=["black" if m is rec else "none" for m in modes],
        linewidth=2,
    )
    for bar, m in zip(bars, modes, strict=True):
        if m.machines is None:
            text = m.why_not or "-"
        else:
            text = f"{m.machines} machine(s)\n{m.masters} m + {m.slaves} s\n{m.binding} binds"
            if not m.qualifies:
                text += "\n(keeps too little)"
        if m is rec:
            text = "RECOMMENDED\n" + text
        x = bar.get_x() + bar.get_width() / 2
        ax.annotate(text, (x, bar.get_height()), xytext=(0, 3), textcoords="offset points", ha="center",
                    va="bottom", fontsize=8, wrap=True, fontweight="bold" if m is rec else "normal")  # fmt: skip
    ax.set_ylabel("machines (masters + slaves)")
    ax.set_ylim(0, max(heights, default=1) * 1.45 + 1)
    ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    w = plan.workload
    ax.set_title(
        f"Machines for {w.peak_rate:,.0f} msgs/s peak at {w.size} B, p99 <= {w.slo_p99_ms:g} ms, "
        f"{w.headroom:g} % headroom"
    )
    ax.tick_params(axis="x", labelsize=8)
    return fig


DISK_PARTS = (
    ("CommitLog", "commit_log_allocated_bytes", "#1f77b4"),
    ("ConsumeQueue", "consume_queue_allocated_bytes", "#ff7f0e"),
    ("IndexFile", "index_allocated_bytes", "#2ca02c"),
)


def disk_chart(plan: Plan) -> Figure:
    """One broker's disk by retention days, stacked by file kind, each bar labelled with every part
    (ConsumeQueue and IndexFile are slivers beside the CommitLog); the machine's disk and the
    broker's 75 / 85 / 90 % levels as lines when the workload gives a disk."""
    fig, ax = plt.subplots(figsize=(9, 5), layout="constrained")
    chosen = plan.recommended
    w = plan.workload
    sets = chosen.broker_sets if chosen and chosen.broker_sets else 1
    days = sorted({1.0, 2.0, 3.0, 7.0, w.retention_hours / 24})
    disks = [disk_per_broker(w, sets, retention_hours=24.0 * d) for d in days]
    x = list(range(len(days)))
    bottom = [0.0] * len(days)
    for label, field, colour in DISK_PARTS:
        heights = [getattr(d, field) / GiB for d in disks]
        ax.bar(x, heights, bottom=bottom, color=colour, label=label, width=0.6)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    for i, d in zip(x, disks, strict=True):
        parts = ", ".join(f"{label[:5]} {getattr(d, field) / GiB:,.1f}" for label, field, _ in DISK_PARTS[1:])
        ax.annotate(
            f"{d.total_allocated_bytes / GiB:,.0f} GiB\n({parts})", (i, bottom[i]), ha="center", va="bottom",
            fontsize=7,
        )  # fmt: skip
    top = max(bottom)
    if w.disk_bytes is not None:
        disk_gib = w.disk_bytes / GiB
        ax.axhline(disk_gib, color="black", linewidth=1.5, label=f"disk {disk_gib:,.0f} GiB")
        for (key, pct), style in zip(w.disk_levels_pct().items(), ("--", "-.", ":"), strict=True):
            ax.axhline(disk_gib * pct / 100, color="#a40", linestyle=style, linewidth=1,
                       label=f"{pct:g} % {LEVEL_MEANS[key]}")  # fmt: skip
        top = max(top, disk_gib)
    ax.set_xticks(x, [f"{d:g} d" + ("\n(the workload's)" if d == w.retention_hours / 24 else "") for d in days])
    ax.set_xlabel("retention (days)")
    ax.set_ylabel("GiB per broker (files as mapped, at most)")
    mode = chosen.name if chosen else "one broker set"
    used = f", {chosen.disk_used_pct:.0f} % of its disk" if chosen and chosen.disk_used_pct is not None else ""
    ax.set_title(
        f"Disk per broker (master or slave), {sets} broker set(s) of {mode}, avg {w.avg_rate:,.0f} msgs/s{used}",
        fontsize=10,
    )
    ax.set_ylim(0, top * 1.18)
    ax.legend(fontsize=8, loc="upper left")
    return fig


# what the broker does above each disk level (rmq.perf.capacity.plan's docstring)
LEVEL_MEANS = {
    "diskMaxUsedSpaceRatio": "diskMaxUsedSpaceRatio: expired files deleted at any hour",
    "diskSpaceCleanForciblyRatio": "diskSpaceCleanForciblyRatio: unexpired files deleted",
    "diskSpaceWarningLevelRatio": "diskSpaceWarningLevelRatio: sends refused",
}


def write_charts(out: Path, points: Sequence[Point], saturations: Sequence[Saturation], plan: Plan) -> dict[str, Path]:
    size = chart_size(points, plan.workload.size)
    figures = {
        "throughput_vs_in_flight": throughput_chart(points, size),
        "latency_vs_load": latency_chart(points, size, plan.workload.slo_p99_ms, saturations),
        "mode_cost": cost_chart(plan),
        "disk_per_retention": disk_chart(plan),
    }
    paths = {}
    for name, fig in figures.items():
        paths[name] = out / f"{name}.png"
        fig.savefig(paths[name], dpi=110)
        plt.close(fig)
    return paths


@dataclasses.dataclass
class Capacity:
    """Everything a run found: the measured points, their saturation points and size fits, the plan,
    and what was read (files, runs, bad lines, notes)."""

    points: Sequence[Point]
    saturations: Sequence[Saturation]
    fits: Mapping[Any, SizeFit]
    plan: Plan
    inputs: Mapping[str, Any]
    broker_stats: Sequence[Mapping[str, Any]] = ()  # model.broker_stats of the stats logs read

    def to_json(self) -> dict[str, Any]:
        """capacity.json."""
        return {
            "inputs": dict(self.inputs),
            "plan": self.plan.to_json(),
            "saturation": [s.to_json() for s in self.saturations],
            "size_fits": [f.to_json() for f in self.fits.values()],
            "points": [p.to_json() for p in self.points],
            "broker_stats": [dict(s) for s in self.broker_stats],
        }


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} B"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _sources(cells: Sequence[str], runs: Sequence[str]) -> str:
    return f"cells {', '.join(cells)}; runs {', '.join(runs)}"


def _verdict(loads: Sequence[Mapping[str, Any]], yes: str, no: str) -> str:
    """Whether loads broke the SLO, and which: each load's msgs/s and p99 as measured."""
    if not loads:
        return no
    return f"{yes}: " + "; ".join(f"{q['msgs_per_s']:,.0f} msgs/s p99 {q['p99_us'] / 1000:.1f} ms" for q in loads)


def _disk_answer(rec: ModePlan, w: Workload) -> str:
    """Disk per broker and per cluster, masters and slaves apart, and its margin to the broker's levels."""
    assert rec.disk is not None
    d = rec.disk
    per = d.total_allocated_bytes
    text = (
        f"Disk for {w.retention_hours:g} h: <b>{_fmt_bytes(per)} per broker</b> (each master"
        + (" and each slave" if rec.slaves else "")
        + f"; CommitLog {_fmt_bytes(d.commit_log_allocated_bytes)}, ConsumeQueue "
        f"{_fmt_bytes(d.consume_queue_allocated_bytes)}, IndexFile {_fmt_bytes(d.index_allocated_bytes)}; "
        f"{d.record_bytes} B a stored record), {_fmt_bytes(per * (rec.masters or 0))} over the masters"
        + (f", {_fmt_bytes(per * rec.slaves)} over the slaves" if rec.slaves else "")
        + f", <b>{_fmt_bytes(per * (rec.machines or 0))} over the cluster</b>."
    )
    if rec.disk_used_pct is None or w.disk_bytes is None:
        return text + " No disk given (--disk-bytes): not checked against the broker's disk levels."
    levels = w.disk_levels_pct()
    margins = ", ".join(f"{pct - rec.disk_used_pct:.0f} % of the disk to {pct:g} % ({k})" for k, pct in levels.items())
    return text + (
        f" On a {_fmt_bytes(w.disk_bytes)} disk a broker fills at most <b>{rec.disk_used_pct:.0f} %</b>: {margins}."
    )


def report_html(doc: Mapping[str, Any], charts: Mapping[str, Path], plan: Plan) -> str:
    w = plan.workload
    rec = plan.recommended
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>rmq capacity plan</title><style>",
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}",
        "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;",
        "font-size:13px;text-align:right}th{background:#f2f2f2}td:first-child{text-align:left}",
        ".answer{background:#eef6ee;border:1px solid #9c9;padding:0.8em 1.2em}.warn{color:#a40}",
        "img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}small{color:#666}</style></head><body>",
        "<h1>rmq capacity plan</h1>",
    ]
    wl = (
        f"peak {w.peak_rate:,.0f} msgs/s (average {w.avg_rate:,.0f}), {w.size:,} B messages, p99 &le; "
        f"{w.slo_p99_ms:g} ms, {w.retention_hours:g} h retention, {w.groups} consumer group(s), "
        f"{w.headroom:g} % headroom, at least {html.escape(w.flush)} {html.escape(w.role)}"
    )
    parts.append(f"<p>Workload: {wl}.</p>")
    if rec is not None and rec.throughput is not None and rec.disk is not None:
        t = rec.throughput
        band = f" (repeats {t.band[0]:,.0f}&ndash;{t.band[1]:,.0f})" if t.band else ""
        least = " <b>at least</b>: no heavier load measured broke the SLO" if t.at_least else ""
        wanted = ", ".join(f"{k} {v}" for k, v in rec.broker_sets_for.items() if v is not None)
        parts.append(
            "<div class='answer'>"
            f"<p><b>{html.escape(rec.name)}</b>: <b>{rec.broker_sets}</b> broker set(s), {rec.masters} master(s) and "
            f"{rec.slaves} slave(s), <b>{rec.machines} machine(s)</b>. What binds: <b>{html.escape(rec.binding or '')}"
            f"</b> (broker sets each resource asks for: {html.escape(wanted)}).</p>"
            f"<p>One set carries {t.msgs_per_s:,.0f} msgs/s with p99 &le; {w.slo_p99_ms:g} ms{band}{least}; "
            f"{html.escape(t.how)}.</p>"
            f"<p>{_disk_answer(rec, w)} Network: {rec.network_in_mb_per_s:,.1f} MB/s in, "
            f"{rec.network_out_mb_per_s:,.1f} MB/s out at the peak, over the cluster.</p>"
            f"<p><small>From {html.escape(_sources(t.cell_ids, t.run_ids))}</small></p></div>"
        )
    else:
        parts.append(
            f"<div class='answer warn'><p>No mode that keeps at least {html.escape(w.flush)} "
            f"{html.escape(w.role)} meets p99 &le; {w.slo_p99_ms:g} ms at {w.size} B in these measurements"
            + (f" and fits a {_fmt_bytes(w.disk_bytes)} disk" if w.disk_bytes else "")
            + ".</p></div>"
        )
    rows = []
    for m in plan.modes:
        mt = m.throughput
        rows.append(
            [
                m.name,
                f"{mt.msgs_per_s:,.0f}" + (" +" if mt.at_least else "") if mt else "-",
                f"{m.cost_ratio:.2f}x" if m.cost_ratio else "-",
                m.broker_sets or "-",
                m.machines or "-",
                m.binding or "-",
                _fmt_bytes(m.disk.total_allocated_bytes) if m.disk else "-",
                f"{m.disk_used_pct:.0f} %" if m.disk_used_pct is not None else "-",
                m.why_not or ("recommended" if m is rec else "qualifies"),
                mt.how if mt else "",
            ]
        )
    parts.append("<h2>Every mode, cheapest first</h2>")
    parts.append(
        _table(
            [
                "mode",
                "msgs/s per set",
                "cost",
                "broker sets",
                "machines",
                "binds",
                "disk/broker",
                "of its disk",
                "",
                "from",
            ],
            rows,
        )
    )
    parts.append(
        "<p><small>Cost: machines per set / msgs/s per set, over ASYNC_FLUSH standalone's. "
        "'+' marks a mode whose every heavier measured load met the SLO (it may carry more). Disk per "
        "broker: a master or a slave, each holds the same files.</small></p>"
    )
    titles = {
        "throughput_vs_in_flight": "Throughput against in-flight sends",
        "latency_vs_load": "Latency against load",
        "mode_cost": "What each durability mode costs",
        "disk_per_retention": "Disk per retention day",
    }
    for name in CHARTS:
        data = base64.b64encode(charts[name].read_bytes()).decode()
        parts.append(f"<h2>{titles[name]}</h2><img alt='{name}' src='data:image/png;base64,{data}'>")
    parts.append("<h2>Saturation points (p99 within the SLO)</h2>")
    sat_rows = [
        [
            f"{s['family']['system']} {s['family']['flush']} {s['family']['role']}",
            s["family"]["size"],
            s["family"]["batch"],
            s["in_flight"],
            f"{s['msgs_per_s']:,.0f}",
            f"{s['msgs_per_s_min']:,.0f}–{s['msgs_per_s_max']:,.0f}",
            f"{s['mb_per_s']:,.1f}",
            f"{s['p99_us'] / 1000:.2f}",
            _verdict(s["slo_broken_above"], "yes", "no (at least)"),
            _verdict(s["slo_broken_below"], "NOT MONOTONE: broke the SLO at a lighter load", "monotone"),
            s["binding"],
            s["repeats"],
        ]
        for s in doc["saturation"]
    ]
    parts.append(
        _table(
            [
                "family",
                "size",
                "batch",
                "in flight",
                "msgs/s",
                "repeats' range",
                "MB/s",
                "p99 ms",
                "SLO broken above",
                "below",
                "binds",
                "repeats",
            ],
            sat_rows,
        )
    )
    if odd := [s for s in doc["saturation"] if not s["monotone"]]:
        parts.append(
            f"<p class='warn'>{len(odd)} curve(s) are not monotone: a lighter load broke the SLO that a heavier "
            "one met (a stall in that run, or too few samples). They are shown as measured; measure them "
            "again before trusting their saturation point.</p>"
        )
    if doc["size_fits"]:
        fit_rows = []
        for f in doc["size_fits"]:
            a, b = f["seconds_per_msg"], f["seconds_per_byte"]
            at = [1.0 / (a + b * s) for s in FIT_SIZES]
            fit_rows.append(
                [f"{f['mode']['flush']} {f['mode']['role']}", f"{a * 1e6:.2f}", f"{b * 1e9:.3f}"]
                + [f"{x:,.0f} / {x * s / 1e6:,.1f}" for x, s in zip(at, FIT_SIZES, strict=True)]
            )
        parts.append("<h2>Throughput against message size (fitted: 1/x = a + b*size)</h2>")
        parts.append(
            _table(["mode", "a (us/msg)", "b (ns/B)", "256 B msgs/s / MB/s", "1 KiB", "4 KiB", "16 KiB"], fit_rows)
        )
    if doc["broker_stats"]:
        parts.append("<h2>What the brokers' stats logs saw</h2>")
        parts.append(
            _table(
                ["broker", "topic", "group", "messages", "avg msgs/s", "peak msgs/s", "stored B/msg", "put p99 (ms)"],
                [
                    [
                        s["broker"],
                        s["topic"],
                        s.get("group") or "(puts)",
                        f"{s['messages']:,}",
                        f"{s['avg_msgs_per_s']:,.0f}",
                        f"{s['peak_msgs_per_s'] or 0:,.0f}",
                        f"{s['bytes_per_message']:,.0f}" if s.get("bytes_per_message") else "",
                        s.get("put_p99_ms") or "",
                    ]
                    for s in doc["broker_stats"]
                ],
            )
        )
        parts.append(
            f"<p><small>Stored bytes a message by the plan's formula for this workload: "
            f"{record_bytes(w.size, w.topic, w.properties())} B.</small></p>"
        )
    inputs = doc["inputs"]
    parts.append("<h2>Inputs</h2>")
    parts.append(
        f"<p>{len(inputs['files'])} perf log file(s), {len(inputs['runs'])} run(s), {len(doc['points'])} "
        f"measured points. Bad lines: {inputs['bad_lines']['total']}.</p>"
    )
    if inputs["bad_lines"]["total"]:
        parts.append(
            _table(["file", "bad lines"], sorted(inputs["bad_lines"]["by_file"].items()))
            + _table(["file", "line"], [[e["file"], e["line"]] for e in inputs["bad_lines"]["examples"]])
        )
    run_rows = [
        [r["run_id"], r.get("cpu_model") or "?", r.get("cores") or "?", r.get("git_rev") or "?"] for r in inputs["runs"]
    ]
    parts.append(_table(["run", "CPU", "cores", "git revision"], run_rows))
    for note in inputs.get("notes", []):
        parts.append(f"<p class='warn'>{html.escape(note)}</p>")
    parts.append("<p><small>Numbers and their sources in full: capacity.json.</small></p></body></html>")
    return "\n".join(parts)


def write_outputs(out: Path, capacity: Capacity) -> dict[str, Path]:
    """capacity.json, the PNGs and report.html in ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    doc = capacity.to_json()
    paths = {"capacity.json": out / "capacity.json"}
    paths["capacity.json"].write_text(json.dumps(doc, indent=1, default=str))
    charts = write_charts(out, capacity.points, capacity.saturations, capacity.plan)
    paths.update({f"{k}.png": v for k, v in charts.items()})
    paths["report.html"] = out / "report.html"
    paths["report.html"].write_text(report_html(doc, charts, capacity.plan))
    return paths
