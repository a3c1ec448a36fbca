"""Retry and dead letters with a real client: an ali-ons consumer that fails a message gets it again
from %RETRY%<group> (after the broker's delay) and, past its max reconsume times, the message is in
%DLQ%<group>, where rmq-admin finds it by key."""

from __future__ import annotations

import json

import pytest

from rmq.client.admin_client import AdminClient
from rmq.errors import ResponseError
from rmq.protocol.message import MessageProperty, dlq_topic
from tests.helpers import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]

GROUP = "GroupRetryOns"


def test_failed_message_is_retried_then_dead_lettered(ons_clients, cluster):
    clients = ons_clients
    namesrv = cluster.namesrv_addr
    with AdminClient(namesrv) as admin:
        admin.update_topic("TopicRetryOns", 1, 1)
        (sent,) = clients.run("ons_produce.js", namesrv, "TopicRetryOns", "P", 1, "t", "retry")
        # fail both deliveries: the first (reconsumeTimes 0) and the retry (1 = maxReconsumeTimes);
        # the client leaves delayLevel 0, so the retry waits at level 3 (1 s on the test broker)
        consumer = clients.start("ons_consume.js", namesrv, "TopicRetryOns", GROUP, "*", 1, 60_000, 2, 1)

        dead = []

        def dead_lettered_or_consumer_gone() -> bool:
            try:
                dead[:] = admin.query_by_key(dlq_topic(GROUP), "retry-key-0")
            except ResponseError:  # TOPIC_NOT_EXIST until the DLQ is created
                pass
            return bool(dead) or consumer.poll() is not None

        try:
            wait_until(dead_lettered_or_consumer_gone, 40, f"a message in {dlq_topic(GROUP)}", 0.2)
        except AssertionError:
            pass  # told below, with what the consumer said
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
