"""The report's charts draw what the saturation rests on: a mode's open-loop points when it has any."""

from __future__ import annotations

import matplotlib.pyplot as plt

from rmq.perf.capacity import model, report
from tests.helpers.perf_logs import point

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
    assert ax.get_title().endswith("open loop") and "saturation 8.0K" in [t.get_text() for t in ax.texts]
    plt.close(fig)


def test_throughput_against_in_flight_without_closed_loop_cells_says_so():
    fig = report.throughput_chart(OPEN_LOOP, 1024)
    assert fig.axes[0].get_legend() is None
    assert "no closed-loop cells measured" in [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)
