"""``rmq-perf producer`` and ``consumer`` against a real name server and broker: the lines a
RocketMQ user knows, and perf logs whose figures agree with what the broker stored."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from rmq.perf.histogram import Histogram
from rmq.perf.log import KIND_HEADER, KIND_INTERVAL, KIND_SUMMARY, SUFFIX, read

COMMAND_TIMEOUT = 60
SEND_LINE = re.compile(
    r"^Current Time: \S+ \S+ \| Send TPS: (\d+) \| Max RT\(ms\): \d+ \| Average RT\(ms\): +[\d.]+"
    r" \| Send Failed: 0 \| Response Failed: 0$"
)
CONSUME_LINE = re.compile(r"^Current Time: \S+ \S+ \| Consume TPS: (\d+) \| AVG\(B2C\) RT\(ms\): .* \| Lag: \S+$")


def rmq_perf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmq.perf.cli", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT
    )


def records(out: Path, kind: str) -> list[dict]:
    """Every record of the one run in ``out``; none of its lines may be bad."""
    (path,) = out.glob("*producer*" + SUFFIX) if kind == "producer" else out.glob("*consumer*" + SUFFIX)
    recs = list(read(path))
    assert all(isinstance(r, dict) for r in recs), [r for r in recs if not isinstance(r, dict)]
    return recs


def test_producer_then_consumer_write_logs_that_agree_with_the_broker(cluster, tmp_path):
    out = tmp_path / "logs"
    produced = rmq_perf(
        "producer", "-n", cluster.namesrv_addr, "-t", "PerfTopic", "--size", "300", "--in-flight", "8",
        "-w", "2", "--duration", "2", "--rate", "3000", "--out", str(out),
    )  # fmt: skip
    # (at a held rate: the consumer's fixed 4 s below must read them all on a loaded machine too)
    assert produced.returncode == 0, produced.stderr
    lines = produced.stdout.splitlines()
    assert [bool(SEND_LINE.match(line)) for line in lines[:-1]] == [True, True], lines
    assert lines[-1].startswith("[Complete] Send Total: ")

    header, *intervals, summary = records(out, "producer")
    assert header["kind"] == KIND_HEADER and header["env"]["cores"] >= 1
    assert [r["kind"] for r in intervals] == [KIND_INTERVAL] * 2 and summary["kind"] == KIND_SUMMARY
    stored = sum(cluster.max_offsets("PerfTopic").values())
    # every message sent was stored and acknowledged, and each acknowledgement has its latency
    assert summary["sent"] == summary["acked"] == sum(r["acked"] for r in intervals) == stored > 0
    assert Histogram.from_json(summary["latency"]).total == stored
    assert [Histogram.from_json(r["latency"]).total for r in intervals] == [r["acked"] for r in intervals]
    assert summary["cell"]["in_flight"] == 8 and summary["cell"]["connections"] == 2
    assert summary["generator"]["processes"] == 2 and summary["failed"] == {}
    assert [int(SEND_LINE.match(line).group(1)) for line in lines[:2]] == [round(r["msgs_per_s"]) for r in intervals]

    consumed = rmq_perf(
        "consumer", "-n", cluster.namesrv_addr, "-t", "PerfTopic", "-g", "PerfGroup", "--duration", "4",
        "--out", str(out),
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    lines = consumed.stdout.splitlines()
    assert all(CONSUME_LINE.match(line) for line in lines[:-1]) and len(lines) >= 4, lines
    *_, summary = records(out, "consumer")
    assert summary["consumed"] == stored


def test_producer_without_a_cluster_fails_with_one_line(tmp_path):
    from tests.helpers import LOOPBACK, free_port

    result = rmq_perf("producer", "-n", f"{LOOPBACK}:{free_port()}", "--duration", "1", "--out", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith("Error: cannot reach the cluster at 127.0.0.1:"), result.stderr
    assert "Traceback" not in result.stderr


def test_a_rate_profile_that_cannot_be_run_is_refused_saying_what_was_expected(tmp_path):
    steps = rmq_perf("producer", "--rate-profile", "2000:270,8000", "--out", str(tmp_path))
    assert steps.returncode == 2 and "'8000': expected RATE:SECONDS, e.g. 2000:270" in steps.stderr, steps.stderr
    both = rmq_perf("producer", "--rate", "500", "--rate-profile", "2000:2", "--out", str(tmp_path))
    assert both.returncode == 2 and "--rate-profile sets the rate and the duration: drop --rate" in both.stderr
