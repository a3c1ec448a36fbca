"""``rmq-perf matrix``: fresh processes per cell, one perf log, a summary table; peers at equal
concurrency, or a notice when they are not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from rmq.perf.cluster import ProcessSampler
from rmq.perf.histogram import Histogram
from rmq.perf.log import KIND_HEADER, KIND_INTERVAL, KIND_SUMMARY, SUFFIX, read
from rmq.perf.matrix import table
from tests.helpers.perf_logs import cell, cell_records

MATRIX_TIMEOUT = 120


def matrix(out, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmq.perf.cli", "matrix", "--roles", "standalone", "--in-flight", "4", "--duration",
         "1", "--warmup", "0", "--out", str(out), *args],
        capture_output=True, text=True, timeout=MATRIX_TIMEOUT, env=env,
    )  # fmt: skip


def log_records(out) -> list[dict]:
    (path,) = out.glob("*" + SUFFIX)
    recs = list(read(path))
    assert all(isinstance(r, dict) for r in recs), [r for r in recs if not isinstance(r, dict)]
    return recs


def test_two_cells_run_end_to_end_and_a_missing_peer_is_skipped_with_a_notice(tmp_path):
    # a PATH holding only this Python: no redis-server on it
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    disk = ProcessSampler(os.getpid(), tempfile.gettempdir())  # the device the cells' stores are on
    disk_before = disk.sample().device_bytes_written
    result = matrix(tmp_path, "--flush", "ASYNC_FLUSH,SYNC_FLUSH", "--peers", "redis", env=env)
    disk_after = disk.sample().device_bytes_written
    assert result.returncode == 0, result.stderr
    assert "peer redis: redis-server is not on PATH, skipped" in result.stderr

    header, *rest = log_records(tmp_path)
    assert header["kind"] == KIND_HEADER and header["argv"][1:3] == ["matrix", "--roles"]
    summaries = [r for r in rest if r["kind"] == KIND_SUMMARY]
    assert [(s["cell"]["system"], s["cell"]["flush"]) for s in summaries] == [
        ("rmq", "ASYNC_FLUSH"),
        ("rmq", "SYNC_FLUSH"),
    ]
    for s in summaries:
        intervals = [r for r in rest if r["kind"] == KIND_INTERVAL and r["cell_id"] == s["cell_id"]]
        assert len(intervals) == 1 and intervals[0]["acked"] == s["acked"] > 0
        assert Histogram.from_json(s["latency"]).total == s["acked"]
        broker = s["broker"]
        assert broker["cpu_pct"] > 0 and broker["rss_bytes"] > 0
    # what reached the disk holding the stores during the ASYNC_FLUSH cell: its msyncs (every 500 ms)
    # wrote something, and no more than that device took during the whole run, other writers on it
    # included (/proc/<pid>/io write_bytes, charged per page dirtied, logged GBs more than that)
    written = summaries[0]["broker"]["disk_bytes_written"]
    if disk_before is None or disk_after is None:
        assert written is None
    else:
        assert 0 < written <= disk_after - disk_before
    # SYNC_FLUSH answers a send after its flush: at least one flush round per 4 sends in flight
    sync = summaries[1]
    assert sync["broker"]["flushes_per_s"] * sync["duration_s"] >= sync["acked"] / 4

    table = result.stdout.splitlines()
    assert table[0].split()[:9] == ["system", "flush", "role", "size", "in-fl", "conns", "batch", "rate", "msgs/s"]
    rows = [line.split() for line in table[2:]]
    assert [(r[0], r[1], r[4], r[5], r[7]) for r in rows] == [
        ("rmq", "ASYNC_FLUSH", "4", "2", "-"),
        ("rmq", "SYNC_FLUSH", "4", "2", "-"),
    ]
    assert rows[0][13] == "1.00x"


def test_open_loop_cells_offer_their_rate_and_say_so_in_the_log_and_the_table(tmp_path):
    result = matrix(tmp_path, "--flush", "ASYNC_FLUSH", "--in-flight", "", "--rate", "1000", "--rate-in-flight", "8")
    assert result.returncode == 0, result.stderr
    summaries = [r for r in log_records(tmp_path) if r["kind"] == KIND_SUMMARY]
    assert [(s["cell"]["rate"], s["cell"]["in_flight"]) for s in summaries] == [(1000, 8)]
    for s in summaries:
        # open loop: what was offered is what was sent and answered, not as fast as answers came
        assert s["sent"] == s["acked"] and abs(s["msgs_per_s"] - s["cell"]["rate"]) < 0.1 * s["cell"]["rate"]
    rows = [line.split() for line in result.stdout.splitlines()[2:]]
    assert [(r[4], r[7]) for r in rows] == [("8", "1000")]


def test_a_matrix_without_any_load_is_refused(tmp_path):
    result = matrix(tmp_path, "--in-flight", "")
    assert result.returncode == 2 and "give --in-flight or --rate" in result.stderr


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_redis_runs_beside_rmq_at_the_same_in_flight_over_the_same_connections(tmp_path):
    result = matrix(tmp_path, "--flush", "SYNC_FLUSH", "--peers", "redis", "-w", "2")
    assert result.returncode == 0, result.stderr
    summaries = [r for r in log_records(tmp_path) if r["kind"] == KIND_SUMMARY]
    assert [(s["cell"]["system"], s["cell"]["peer_mode"]) for s in summaries] == [
        ("rmq", None),
        ("redis", "appendfsync=always"),
    ]
    assert {(s["cell"]["in_flight"], s["cell"]["connections"]) for s in summaries} == {(4, 2)}
    assert all(s["acked"] > 0 and s["failed"] == {} for s in summaries)
    assert "redis/always" in result.stdout


def test_the_table_gives_rmq_over_each_peer_as_the_median_of_ratios_of_the_same_repeat():
    def summary(system: str, repeat: int, rate: float, in_flight: int = 16) -> dict:
        mode = "appendfsync=always" if system == "redis" else None
        the_cell = cell(
            system=system, flush="SYNC_FLUSH", in_flight=in_flight, connections=2, peer_mode=mode, repeat=repeat
        )
        record = cell_records(the_cell, [np.full(10, 500.0)])[-1]
        return {**record, "msgs_per_s": rate}

    # the machine drifts between repeats: paired, rmq is 2x, 0.5x, 2x Redis (the medians: 5000 / 3000)
    runs = [(1000, 500), (5000, 10000), (6000, 3000)]
    summaries = [
        s for r, (ours, theirs) in enumerate(runs) for s in (summary("rmq", r, ours), summary("redis", r, theirs))
    ]
    summaries.append(summary("rmq", 0, 100, in_flight=1))  # no peer at that load
    head, _rule, *rows = table(summaries)
    assert head.split()[-2:] == ["vs", "redis"]
    by_row = {(r.split()[0], r.split()[4]): r.split()[-1] for r in rows}
    assert by_row == {("rmq", "16"): "2.00x", ("redis/always", "16"): "-", ("rmq", "1"): "-"}
