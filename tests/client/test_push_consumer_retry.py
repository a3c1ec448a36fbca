"""A push consumer's failed messages: sent back, redelivered from %RETRY%<group> after the broker's
delay, then dead-lettered into %DLQ%<group>. The test broker's delay levels are 1-2 s."""

from __future__ import annotations

import collections
import threading

from rmq.client import (
    ConsumeConcurrentlyStatus,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rmq.protocol.message import SCHEDULE_TOPIC, MessageProperty, dlq_topic, retry_topic
from tests.helpers import wait_until

FAST = {"rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.5}


def redeliveries_settled(cluster, group: str, topic: str) -> bool:
    """Nothing of ``group`` is left to redeliver: it consumed and committed ``topic`` and its %RETRY%
    topic, and every message sent back through SCHEDULE_TOPIC_XXXX came out into %RETRY% (the broker
    is this test's alone). Read in this order, the counts can only agree once no send-back is coming."""
    retried = sum(cluster.max_offsets(retry_topic(group)).values())
    caught_up = not cluster.lag(group, topic)
    scheduled = sum(cluster.max_offsets(SCHEDULE_TOPIC).values())
    return caught_up and scheduled == retried


def test_reconsume_later_retries_then_dead_letters(cluster):
    topic = cluster.create_topic("Retried", queues=2)
    deliveries: dict[str, list[int]] = collections.defaultdict(list)
    lock = threading.Lock()

    def failing(msgs):
        with lock:
            for m in msgs:
                deliveries[m.body.decode()].append(m.reconsume_times)
                assert m.topic == topic  # retried messages show their original topic
        if msgs[0].body == b"raises":
            raise RuntimeError("listener failure counts as RECONSUME_LATER")
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    consumer = PushConsumer(
        "cg-retry",
        cluster.namesrv_addr,
        instance_name="retry",
        max_reconsume_times=2,
        consume_from_where="FIRST_OFFSET",
        **FAST,
    )
    consumer.subscribe(topic)
    consumer.register_listener(failing)
    with consumer, Producer("pg-retry", cluster.namesrv_addr, instance_name="retry-p") as producer:
        sent = {body: producer.send(Message(topic, body.encode(), keys="k")) for body in ("fails", "raises")}
        wait_until(lambda: all(len(deliveries[b]) >= 3 for b in sent), 30, "three deliveries of each message")
        wait_until(
            lambda: sum(cluster.max_offsets(dlq_topic("cg-retry")).values()) == 2, 30, "both messages in the DLQ"
        )
        # no fourth delivery: none is left to come
        wait_until(lambda: redeliveries_settled(cluster, "cg-retry", topic), 30, "the redeliveries settled")
    assert dict(deliveries) == {"fails": [0, 1, 2], "raises": [0, 1, 2]}

    dlq = MessageQueue(dlq_topic("cg-retry"), sent["fails"].message_queue.broker_name, 0)
    with PullConsumer(
        "cg-dlq-reader", cluster.namesrv_addr, instance_name="dlq", consume_from_where="FIRST_OFFSET"
    ) as reader:
        reader.assign([dlq])
        dead = []
        wait_until(lambda: dead.extend(reader.poll(0.5)) or len(dead) >= 2, 10, "two messages read from the DLQ")
    assert sorted(m.body for m in dead) == [b"fails", b"raises"]
    for m in dead:
        original = sent[m.body.decode()]
        assert m.get_property(MessageProperty.ORIGIN_MESSAGE_ID) in (original.msg_id, original.offset_msg_id)
        assert m.keys == ["k"]
