"""The Prometheus endpoint (``metricsExporterType=PROM``, rmq.broker.metrics): a real broker
process, scraped over HTTP as Prometheus does."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from rmq.perf.remoting import send_request
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers import LOOPBACK, free_port
from tests.helpers.broker import broker_settings
from tests.helpers.metrics import scrape, value
from tests.helpers.processes import start_broker_process
from tests.helpers.requests import call, offset_request, pull_request, update_topic_request

TOPIC = "MetricsTopic"
GROUP = "MetricsGroup"
BODY = b"m" * 300


DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-rmq.json"


def test_counters_histograms_and_lag_show_what_was_sent_and_consumed(spawn, client, store_dir):
    port = free_port()
    settings = broker_settings(
        store_dir, metricsExporterType="PROM", metricsPromExporterHost=LOOPBACK, metricsPromExporterPort=str(port)
    )
    _proc, addr = start_broker_process(spawn, settings)
    assert call(client, addr, update_topic_request(TOPIC, queues=2)).code == ResponseCode.SUCCESS
    for i in range(20):
        answer = call(client, addr, send_request(TOPIC, i % 2, BODY))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    # the group reads all 10 of queue 0 and commits them; queue 1's 10 stay unconsumed
    pulled = call(client, addr, pull_request(TOPIC, 0, 0, group=GROUP, max_msgs=32))
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    commit = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, TOPIC, 0, group=GROUP, commitOffset=10)
    assert call(client, addr, commit).code == ResponseCode.SUCCESS

    families: set[str] = set()
    samples = scrape(port, families)
    assert value(samples, "rocketmq_messages_in_total", topic=TOPIC) == 20
    stored = value(samples, "rocketmq_throughput_in_total", topic=TOPIC)
    assert stored > 20 * len(BODY)  # stored records: body, properties, header
    # every message is under 1 KiB: all 20 in RocketMQ's first size bucket
    assert value(samples, "rocketmq_message_size_bucket", topic=TOPIC, le="1024.0") == 20
    assert value(samples, "rocketmq_message_size_sum", topic=TOPIC) == stored
    assert value(samples, "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == 10
    assert value(samples, "rocketmq_throughput_out_total", topic=TOPIC, consumer_group=GROUP) == stored / 2
    assert value(samples, "rocketmq_consumer_lag_messages", topic=TOPIC, consumer_group=GROUP) == 10
    sends = {"request_code": str(RequestCode.SEND_MESSAGE_V2), "response_code": str(ResponseCode.SUCCESS)}
    assert value(samples, "rocketmq_rpc_latency_count", **sends) == 20
    assert value(samples, "rocketmq_rpc_latency_bucket", le="+Inf", **sends) == 20
    assert value(samples, "rocketmq_storage_size") > stored
    assert value(samples, "rmq_connections") >= 1
    assert samples["rocketmq_messages_in_total"][0].labels["node_id"] == "broker-a"
    # every metric the Grafana dashboard plots is one the broker serves
    exprs = [t["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for t in panel["targets"]]
    plotted = {
        re.sub(r"_(bucket|count|sum|total)$", "", m)
        for e in exprs
        for m in re.findall(r"\b(?:rocketmq|rmq|process)_\w+", e)
    }
    assert plotted and plotted <= families, plotted - families

    # the counters move between scrapes: 5 more sends, the lag follows the commit of queue 1
    for _ in range(5):
        assert call(client, addr, send_request(TOPIC, 1, BODY)).code == ResponseCode.SUCCESS
    commit = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, TOPIC, 1, group=GROUP, commitOffset=12)
    assert call(client, addr, commit).code == ResponseCode.SUCCESS
    # a pull parked for messages that do not come is timed when it is answered, with that answer's code
    parked = call(client, addr, pull_request(TOPIC, 0, 10, group=GROUP, suspend_ms=300))
    samples = scrape(port)
    pulls = {
        s.labels["response_code"]: s.value
        for s in samples["rocketmq_rpc_latency_count"]
        if s.labels["request_code"] == str(RequestCode.PULL_MESSAGE)
    }
    assert pulls == {str(ResponseCode.SUCCESS): 1, str(parked.code): 1}, pulls
    assert value(samples, "rocketmq_messages_in_total", topic=TOPIC) == 25
    assert value(samples, "rocketmq_consumer_lag_messages", topic=TOPIC, consumer_group=GROUP) == 3
    assert value(samples, "rocketmq_rpc_latency_count", **sends) == 25


def test_disabled_by_default_nothing_listens(spawn, store_dir):
    port = free_port()
    start_broker_process(spawn, broker_settings(store_dir, metricsPromExporterPort=str(port)))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((LOOPBACK, port), timeout=2).close()


def test_a_taken_port_stops_the_start_with_a_clear_error(spawn, store_dir):
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = broker_settings(
            store_dir, metricsExporterType="PROM", metricsPromExporterHost=LOOPBACK, metricsPromExporterPort=str(port)
        )
        argv = ["-m", "rmq.cli.broker"] + [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
        proc = spawn(*argv, stderr=subprocess.PIPE, text=True)
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode != 0
    assert f"metricsPromExporterPort {port}" in err, err
