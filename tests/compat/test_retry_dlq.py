"""Acceptance 3 with a real client: an ali-ons consumer that fails a message gets it again from
%RETRY%<group> (after the broker's delay) and, past its max reconsume times, the message is in
%DLQ%<group>, where rmq-admin finds it by key."""

from __future__ import annotations

import json
import time

import pytest

from rmq.client.admin_client import AdminClient
from rmq.errors import ResponseError
from rmq.protocol.message import MessageProperty, dlq_topic
from tests.conftest import wait_for_port

pytestmark = [pytest.mark.compat, pytest.mark.slow]

GROUP = "GroupRetryOns"
# delayLevel 0 from the client: the first retry waits at level 3 (10 s)
FIRST_RETRY_DELAY_MS = 10_000


def test_failed_message_is_retried_then_dead_lettered(ons_clients, rmq_broker):
    clients = ons_clients
    namesrv = rmq_broker.namesrv
    wait_for_port(int(rmq_broker.settings["namesrvListenPort"]), proc=rmq_broker.proc)
    with AdminClient(namesrv) as admin:
        admin.update_topic("TopicRetryOns", 1, 1)
        (sent,) = clients.run("ons_produce.js", namesrv, "TopicRetryOns", "P", 1, "t", "retry")
        # fail both deliveries: the first (reconsumeTimes 0) and the retry (1 = maxReconsumeTimes)
        consumer = clients.start("ons_consume.js", namesrv, "TopicRetryOns", GROUP, "*", 1, 60_000, 2, 1)
        try:
            deadline = time.monotonic() + 40
            dead = []
            while not dead and time.monotonic() < deadline and consumer.poll() is None:
                try:
                    dead = admin.query_by_key(dlq_topic(GROUP), "retry-key-0")
                except ResponseError:    # TOPIC_NOT_EXIST until the DLQ is created
                    dead = []
                time.sleep(0.5)
        finally:
            consumer.terminate()
            out, err = consumer.communicate(timeout=15)
    deliveries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [d.get("reconsumeTimes") for d in deliveries] == [0, 1], (deliveries, err[-2000:])
    assert all(d["retried"] == "retry-body-0" for d in deliveries)
    assert dead, f"nothing in {dlq_topic(GROUP)}; consumer said {deliveries} {err[-2000:]}"
    (message,) = dead
    assert message.body == b"retry-body-0" and message.reconsume_times == 2
    assert message.properties[MessageProperty.RETRY_TOPIC] == "TopicRetryOns"
    assert message.properties[MessageProperty.ORIGIN_MESSAGE_ID] == sent["msgId"]
