"""The report's charts draw what the saturation rests on: a mode's open-loop points when it has any."""

from __future__ import annotations

import matplotlib.pyplot as plt

from rmq.perf.capacity import model, plan, report
from rmq.perf.capacity.report import GiB
from tests.helpers.perf_logs import five_saturations, point

SATURATIONS = five_saturations()

CLOSED_LOOP = [point(1, 1_000, 300), point(16, 12_000, 2_500)]
OPEN_LOOP = [point(64, 4_000, 900, rate=4_000), point(64, 8_000, 2_400, rate=8_000)]


def test_latency_against_load_shows_the_open_loop_points_and_the_saturation_on_them():
    points = [*CLOSED_LOOP, *OPEN_LOOP]
    sat = model.saturation(points, slo_us=3_000)
    assert sat is not None
    fig = report.latency_chart(points, 1024, 3.0, [sat])
    ax = fig.axes[0]
    p99 = next(line for line in ax.get_lines() if line.get_label() == "p99")
    assert list(p99.get_xdata()) == [4.0, 8.0] and list(p99.get_ydata()) == [0.9, 2.4]
    assert ax.get_title().endswith("open loop") and "saturation 8.0K msgs/s (at least)" in [
        t.get_text() for t in ax.texts
    ]
    plt.close(fig)


def test_throughput_against_in_flight_without_closed_loop_cells_says_so():
    fig = report.throughput_chart(OPEN_LOOP, 1024)
    assert fig.axes[0].get_legend() is None
    assert "no closed-loop cells measured" in [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)


def _texts(fig) -> str:
    return "\n".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_the_cost_chart_draws_each_modes_machines_and_marks_the_recommended_one():
    w = plan.Workload(peak_rate=50_000, avg_rate=10_000, size=1024, slo_p99_ms=2, role="async_master")
    the_plan = plan.make_plan(w, SATURATIONS, {})
    rec = the_plan.recommended
    assert rec is not None and rec.machines == 8
    fig = report.cost_chart(the_plan)
    heights = [bar.get_height() for bar in fig.axes[0].patches]
    assert heights == [m.machines or 0 for m in the_plan.modes]  # machines, as the plan counts them
    assert "RECOMMENDED\n8 machine(s)\n4 m + 4 s\nthroughput binds" in _texts(fig)
    plt.close(fig)


def test_the_disk_chart_draws_the_disk_and_the_brokers_levels_and_labels_the_slivers():
    w = plan.Workload(peak_rate=50_000, avg_rate=10_000, size=1024, slo_p99_ms=2, disk_bytes=400 << 30)
    the_plan = plan.make_plan(w, SATURATIONS, {})
    rec = the_plan.recommended
    assert rec is not None and rec.disk is not None and rec.binding == "disk"
    fig = report.disk_chart(the_plan)
    ax = fig.axes[0]
    levels = sorted(round(line.get_ydata()[0], 6) for line in ax.get_lines())
    assert levels == [round(400 * r, 6) for r in (0.75, 0.85, 0.90, 1.0)]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "disk 400 GiB" in legend and "75 % diskMaxUsedSpaceRatio: expired files deleted at any hour" in legend
    assert "90 % diskSpaceWarningLevelRatio: sends refused" in legend
    texts = _texts(fig)
    # the workload's bar (3 days) is the plan's per-broker disk, its slivers written out
    d = rec.disk
    assert f"{d.total_allocated_bytes / GiB:,.0f} GiB" in texts
    assert f"Consu {d.consume_queue_allocated_bytes / GiB:,.1f}, Index {d.index_allocated_bytes / GiB:,.1f}" in texts
    assert ax.get_ylim()[1] > 400  # the disk line inside the frame
    plt.close(fig)


def test_latency_panels_share_their_axes_and_keep_every_point_in_the_frame():
    points = [
        *CLOSED_LOOP,
        point(1, 800, 900, flush="SYNC_FLUSH"),
        point(16, 30_000, 40_000, flush="SYNC_FLUSH"),
    ]
    sats = [
        s
        for s in (model.saturation([p for p in points if p.flush == f], 3_000) for f in ("ASYNC_FLUSH", "SYNC_FLUSH"))
        if s
    ]
    fig = report.latency_chart(points, 1024, 3.0, sats)
    first, second = (ax for ax in fig.axes if ax.get_visible())
    assert first.get_xlim() == second.get_xlim() and first.get_ylim() == second.get_ylim()
    (x0, x1), (y0, y1) = first.get_xlim(), first.get_ylim()
    for p in points:
        for field in ("p50_us", "p99_us", "p999_us"):
            assert x0 <= p.msgs_per_s / 1000 < x1 and y0 < getattr(p, field) / 1000 < y1
    ring = next(line for line in first.get_lines() if line.get_label() == "saturation")
    assert (list(ring.get_xdata()), list(ring.get_ydata())) == ([12.0], [2.5])  # 16 in flight: 12K msgs/s at p99 2.5 ms
    plt.close(fig)


def test_a_curve_that_is_not_monotone_is_called_out_not_summarised_wrongly(tmp_path):
    # the SYNC_FLUSH standalone: p99 31.5 ms at 3K msgs/s, 14 ms at 14.8K; SLO 20 ms
    curve = [point(4, 3_000, 31_500, flush="SYNC_FLUSH"), point(16, 14_800, 14_000, flush="SYNC_FLUSH")]
    sat = model.saturation(curve, slo_us=20_000)
    assert sat is not None
    w = plan.Workload(peak_rate=10_000, size=1024, slo_p99_ms=20, flush="SYNC_FLUSH")
    capacity = report.Capacity(curve, [sat], {}, plan.make_plan(w, [sat], {}), _inputs())
    page = report.write_outputs(tmp_path, capacity)["report.html"].read_text()
    row = next(r for r in page.split("<tr>") if r.startswith("<td>rmq SYNC_FLUSH standalone"))
    assert "<td>no (at least)</td>" in row
    assert "NOT MONOTONE: broke the SLO at a lighter load: 3,000 msgs/s p99 31.5 ms" in row
    assert "1 curve(s) are not monotone" in page


def _inputs() -> dict:
    return {"files": [], "runs": [], "bad_lines": {"total": 0, "by_file": {}, "examples": []}}
