"""A real broker's stats.log through the pipeline: what the broker logged is read with the stats-log
schema, summed per topic and group, and its stored bytes a message are what the plan's record
formula says for the same message."""

from __future__ import annotations

import json

from rmq.perf.capacity import model, plan, read
from rmq.perf.remoting import send_request
from rmq.protocol.codes import ResponseCode
from tests.helpers import wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.processes import start_broker_process
from tests.helpers.requests import call, pull_request, update_topic_request

TOPIC = "TopicTest"
SIZE = 300


def _logged(store) -> tuple[int, int]:
    """Puts of TOPIC and gets of GroupA that stats.log counted so far."""
    path = store / "logs" / "stats.log"
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    puts = sum(r["put_nums"] for r in records if r["kind"] == "topic_put" and r["topic"] == TOPIC)
    gets = sum(r["get_nums"] for r in records if r["kind"] == "group_get" and r["group"] == "GroupA")
    return puts, gets


def test_a_brokers_stats_log_is_read_and_matches_the_record_formula(spark, spawn, client, store_dir):
    _proc, addr = start_broker_process(spawn, broker_settings(store_dir, statsLogInterval="300"))
    assert call(client, addr, update_topic_request(TOPIC, queues=1)).code == ResponseCode.SUCCESS
    for _ in range(40):  # as rmq-perf and a Java producer send: UNIQ_KEY, WAIT=true, TAGS
        answer = call(client, addr, send_request(TOPIC, 0, b"b" * SIZE, tags="TagA"))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    pulled = call(client, addr, pull_request(TOPIC, 0, 0, group="GroupA", max_msgs=10))
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    wait_until(
        lambda: _logged(store_dir) == (40, 10), 10, lambda: f"stats.log to count 40 puts, 10 gets: {_logged(store_dir)}"
    )

    files = read.stats_log_files([store_dir.parent])
    assert files == [str(store_dir / "logs" / "stats.log")]
    stats, bad = read.read_stats_logs(spark, files)
    assert bad.total == 0
    by_kind = {r["kind"]: r for r in model.broker_stats(stats)}
    put = by_kind["topic_put"]
    assert (put["broker"], put["topic"], put["messages"]) == ("broker-a", TOPIC, 40)
    workload = plan.Workload(peak_rate=1, size=SIZE, slo_p99_ms=1, topic=TOPIC, tags="TagA")
    assert put["bytes_per_message"] == plan.record_bytes(SIZE, TOPIC, workload.properties())
    # the bucket the 99th of the broker's sampled put latencies fell in (how high depends on the load)
    assert put["put_p99_ms"] is not None and put["put_p99_ms"].startswith(("<= ", "> "))
    assert (by_kind["group_get"]["group"], by_kind["group_get"]["messages"]) == ("GroupA", 10)
