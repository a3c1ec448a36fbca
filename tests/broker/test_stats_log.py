"""The broker's stats log (``<store>/logs/stats.log``): per topic what was put, per group what it
read, every ``statsLogInterval``, in JSON Lines the capacity pipeline parses."""

from __future__ import annotations

import json

from rmq.perf.remoting import send_request
from rmq.protocol.codes import ResponseCode
from tests.helpers import wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.processes import start_broker_process
from tests.helpers.requests import call, pull_request, update_topic_request

TOPIC = "StatsTopic"
BODY = b"s" * 200


def stats_records(store) -> list[dict]:
    path = store / "logs" / "stats.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_puts_per_topic_and_gets_per_group_are_logged_every_interval(spawn, client, store_dir):
    _proc, addr = start_broker_process(spawn, broker_settings(store_dir, statsLogInterval="300"))
    assert call(client, addr, update_topic_request(TOPIC, queues=2)).code == ResponseCode.SUCCESS
    for i in range(50):
        answer = call(client, addr, send_request(TOPIC, i % 2, BODY))  # born now, as a producer sends
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    # a group pulls all 25 of queue 0 and 5 of queue 1's 25
    for queue_id, max_msgs in ((0, 32), (1, 5)):
        pulled = call(client, addr, pull_request(TOPIC, queue_id, 0, group="StatsGroup", max_msgs=max_msgs))
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark

    def logged() -> bool:
        recs = stats_records(store_dir)
        puts = sum(r["put_nums"] for r in recs if r["kind"] == "topic_put" and r["topic"] == TOPIC)
        gets = sum(r["get_nums"] for r in recs if r["kind"] == "group_get" and r["group"] == "StatsGroup")
        return puts == 50 and gets == 30

    wait_until(logged, 10, lambda: f"stats.log to count 50 puts and 30 gets: {stats_records(store_dir)}")
    recs = stats_records(store_dir)
    puts = [r for r in recs if r["kind"] == "topic_put" and r["topic"] == TOPIC]
    record_size = puts[0]["put_size"] // puts[0]["put_nums"]
    assert record_size > len(BODY)  # the stored record: body, properties and the record's header
    assert all(r["put_size"] == r["put_nums"] * record_size for r in puts)
    # every put, from send to store, is sampled into one of RocketMQ's latency buckets (how long they
    # took is the machine's business: a test asserts no timing)
    latency = puts[0]["put_latency_ms"]
    assert latency["bounds"][:3] == [0, 10, 50] and latency["sampled"] == puts[0]["put_nums"]
    assert sum(latency["counts"]) == latency["sampled"]
    (gets,) = [r for r in recs if r["kind"] == "group_get"]
    assert (gets["topic"], gets["get_size"]) == (TOPIC, 30 * record_size)
    assert all(r["broker"] == "broker-a" and r["t_end"] > r["t_start"] for r in recs)
