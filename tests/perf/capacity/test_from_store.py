"""``rmq-capacity --from-store``: a store a real broker wrote under a known rate profile (rmq-perf's
load generator, 300 msgs/s with a 2 s burst at 1,200) and two consumer groups' offsets gives back
the profile's rates and fan-out, and the plan is made for that workload."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.perf.capacity import traffic
from rmq.perf.load import LoadSpec, run_load
from rmq.perf.procs import Processes
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import LOOPBACK
from tests.helpers.capacity import SAMPLES, run_module
from tests.helpers.processes import Cluster
from tests.helpers.requests import offset_request

TOPIC = "ProfileTopic"
PROFILE = ((300.0, 2.0), (1200.0, 2.0), (300.0, 2.0))
GROUPS = ("BillingGroup", "AuditGroup")
SIZE = 200
CAPACITY = "rmq.perf.capacity.cli"
TRAFFIC = "rmq.perf.capacity.traffic"


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Iterator[tuple[Path, int]]:
    """A store a broker wrote under PROFILE (its stats.log every second), two groups' offsets on the
    topic, the broker stopped; and the messages acked."""
    store = tmp_path_factory.mktemp("from-store") / "store"
    store.mkdir()
    processes = Processes()
    cluster = Cluster(processes.spawn, store)
    cluster.settings["statsLogInterval"] = "1000"
    try:
        cluster.start()
        cluster.create_topic(TOPIC)
        spec = LoadSpec(
            "rmq", LOOPBACK, cluster.broker_port, TOPIC, size=SIZE, in_flight=16, workers=1, rate=PROFILE[0][0],
            duration=sum(s for _r, s in PROFILE), profile=PROFILE,
        )  # fmt: skip
        total = run_load(spec, lambda report, t_start, t_end: None)
        assert total.acked == sum(r * s for r, s in PROFILE)
        for group in GROUPS:  # each group has read queue 0: both consume the topic
            answer = cluster.call(offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, TOPIC, 0, group, commitOffset=1))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
        time.sleep(1.5)  # a stats.log line after the last put
    finally:
        cluster.close()
        processes.stop_all()  # the offsets are written at shutdown at the latest
    yield store, total.acked


def test_from_store_derives_the_rates_of_a_known_profile_and_plans_for_them(profiled, tmp_path):
    store, acked = profiled
    out = tmp_path / "plan"

    result = run_module(
        CAPACITY, str(SAMPLES), "--from-store", str(store), "--peak-window", "1", "--slo-p99-ms", "20",
        "--out", str(out),
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    derived = json.loads((out / "from_store.json").read_text())
    average = sum(r * s for r, s in PROFILE) / sum(s for _r, s in PROFILE)
    assert abs(derived["avg_rate"] - average) <= 0.05 * average, derived
    assert abs(derived["peak_rate"] - 1200) <= 0.05 * 1200, derived
    assert derived["messages"] == acked and derived["size"]["mean"] == SIZE
    assert derived["fan_out"] == 2.0 and derived["groups"] == {TOPIC: sorted(GROUPS)}
    plan = json.loads((out / "capacity.json").read_text())
    workload = plan["plan"]["workload"]
    assert (workload["peak_rate"], workload["avg_rate"]) == (derived["peak_rate"], derived["avg_rate"])
    assert (workload["size"], workload["groups"], workload["topic"]) == (SIZE, 2.0, TOPIC)
    assert plan["inputs"]["from_store"]["workload"]["peak_rate"] == derived["peak_rate"]
    assert "peak 1,2" in result.stderr or "peak 1,1" in result.stderr, result.stderr


def test_rmq_traffic_reports_topics_rates_sizes_producers_and_the_stats_log(spark, profiled, tmp_path):
    store, acked = profiled
    out = tmp_path / "traffic"

    _traffic, paths = traffic.write_report(spark, [str(store)], out, peak_window_s=1)

    assert sorted(paths) == sorted(
        ["traffic.json", "traffic.html", "rates.png", "topics.png", "sizes.png", "latency.png"]
    )
    doc = json.loads((out / "traffic.json").read_text())
    (topic,) = doc["topics"]
    assert (topic["topic"], topic["messages"], topic["body_bytes"]) == (TOPIC, acked, acked * SIZE)
    assert sum(n for _s, n, _b in doc["rate_1s"]) == sum(n for _m, n, _b, _k in doc["rate_1min"]) == acked
    assert max(n for _s, n, _b in doc["rate_1s"]) >= 1100  # the burst's full second
    assert doc["size"]["histogram"] == [{"low": 128, "high": 256, "count": acked}]
    (producer,) = doc["producers"]
    assert producer["host"] == LOOPBACK and producer["messages"] == acked and producer["connections"] == 1
    assert sum(b["count"] for b in doc["latency_ms"]["histogram"]) == acked
    # the broker's own stats.log saw the same puts
    puts = [s for s in doc["stats_log"] if s["kind"] == "topic_put" and s["topic"] == TOPIC]
    assert puts and sum(s["messages"] for s in puts) == acked
    page = (out / "traffic.html").read_text()
    assert f"{acked:,} messages" in page and page.count("data:image/png;base64,") == 4


def test_a_store_without_a_commitlog_fails_with_one_line(tmp_path):
    result = run_module(CAPACITY, "--from-store", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "no CommitLog here: expected a store root with commitlog/" in result.stderr
    assert "Traceback" not in result.stderr
    result = run_module(TRAFFIC, str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode == 1 and result.stderr.startswith(f"Error: {tmp_path}: no CommitLog here"), result.stderr
