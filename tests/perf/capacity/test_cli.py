"""rmq-capacity end to end, as a user runs it: spark-submit spark/capacity.py (the same code as the
console script) over the committed sample logs writes the plan, the report and the charts; nothing to
read and a bad workload end with one clear line and a non-zero exit, not a stack trace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.perf_logs import stats_log_lines

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "spark" / "samples"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    # the driver on loopback; spark-submit's Python is this one
    return {**os.environ, "PYTHONPATH": path, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


def capacity(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmq.perf.capacity.cli", *args],
        capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT,
    )  # fmt: skip


@pytest.mark.slow
def test_spark_submit_writes_the_plan_the_report_and_the_charts(tmp_path):
    spark_submit = shutil.which("spark-submit")
    if spark_submit is None:
        pytest.skip("spark-submit is not on PATH (pip install 'rmq[spark]' puts it there)")
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES, logs)
    (logs / "store" / "logs").mkdir(parents=True)
    (logs / "store" / "logs" / "stats.log").write_text("".join(json.dumps(r) + "\n" for r in stats_log_lines()))
    workload = tmp_path / "workload.yaml"
    workload.write_text("peak_rate: 50000\navg_rate: 20000\nsize: 1024\nslo_p99_ms: 2\nretention_hours: 48\n")
    out = tmp_path / "out"
    result = subprocess.run(
        [spark_submit, "--master", "local[1]", "spark/capacity.py", str(logs), "--out", str(out),
         "--workload", str(workload), "--groups", "2"],
        capture_output=True, text=True, timeout=240, env=_env(), cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    plan = json.loads((out / "capacity.json").read_text())
    assert plan["plan"]["workload"]["groups"] == 2  # the flag over the file
    rec = plan["plan"]["recommended"]
    # the samples' ASYNC_FLUSH standalone holds p99 <= 2 ms up to ~46K msgs/s at 1 KiB: 65K needs 2 sets
    assert rec["mode"] == "ASYNC_FLUSH standalone" and rec["broker_sets"] == 2
    assert rec["throughput"]["cell_ids"] and rec["throughput"]["run_ids"] == ["synthetic-12-r0", "synthetic-12-r1"]
    assert plan["inputs"]["bad_lines"]["total"] == 0
    assert [(s["kind"], s["messages"]) for s in plan["broker_stats"]] == [
        ("group_get", 170_000),
        ("topic_put", 180_000),
    ]
    assert {f["mode"]["role"] for f in plan["size_fits"]} == {"standalone", "async_master", "sync_master"}
    report = (out / "report.html").read_text()
    assert report.count("src='data:image/png;base64,") == 4 and "ASYNC_FLUSH standalone" in report
    assert "What the brokers' stats logs saw" in report
    for name in ("throughput_vs_in_flight", "latency_vs_load", "mode_cost", "disk_per_retention"):
        png = (out / f"{name}.png").read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    printed = result.stdout.splitlines()
    assert str(out / "report.html") in printed and str(out / "capacity.json") in printed


def test_an_empty_log_directory_exits_1_with_one_line(tmp_path):
    result = capacity(str(tmp_path), "--out", str(tmp_path / "out"), "--peak-rate", "1000", "--size", "1024",
                      "--slo-p99-ms", "5")  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"Error: no perf logs (*.perf.jsonl) in {tmp_path}: rmq-perf matrix --out DIR writes them"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "a workload is needed: --workload FILE.yaml, or --peak-rate, --size and --slo-p99-ms"),
        (["--peak-rate", "1000", "--size", "1024"], "flags: slo_p99_ms must be given"),
        (["--peak-rate", "-5", "--size", "1024", "--slo-p99-ms", "5"], "peak_rate must be a number > 0"),
    ],
)
def test_a_bad_workload_is_a_usage_error(tmp_path, args, message):
    result = capacity(str(SAMPLES), "--out", str(tmp_path), *args, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
