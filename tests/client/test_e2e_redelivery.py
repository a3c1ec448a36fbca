"""What needs the broker's extras (issue 4): send-back into %RETRY% and %DLQ%, delay levels, orderly
consumption in clustering mode on broker locks. The test broker's delay levels are 1-2 s."""

from __future__ import annotations

import collections
import threading
import time

from rmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rmq.protocol.codes import RequestCode
from rmq.protocol.message import MessageProperty, dlq_topic
from tests.client.conftest import requires_broker

pytestmark = requires_broker

FAST = {"rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.5}


def wait_until(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.05)
    return predicate()


def test_reconsume_later_retries_then_dead_letters(cluster):
    cluster.require(RequestCode.CONSUMER_SEND_MSG_BACK)
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

    consumer = PushConsumer("cg-retry", cluster.namesrv_addr, instance_name="retry", max_reconsume_times=2,
                            consume_from_where="FIRST_OFFSET", **FAST)
    consumer.subscribe(topic)
    consumer.register_listener(failing)
    with consumer, Producer("pg-retry", cluster.namesrv_addr, instance_name="retry-p") as producer:
        sent = {body: producer.send(Message(topic, body.encode(), keys="k")) for body in ("fails", "raises")}
        assert wait_until(lambda: all(len(deliveries[b]) >= 3 for b in sent))
        time.sleep(3)  # no fourth delivery
    assert dict(deliveries) == {"fails": [0, 1, 2], "raises": [0, 1, 2]}

    dlq = MessageQueue(dlq_topic("cg-retry"), sent["fails"].message_queue.broker_name, 0)
    with PullConsumer("cg-dlq-reader", cluster.namesrv_addr, instance_name="dlq",
                      consume_from_where="FIRST_OFFSET") as reader:
        reader.assign([dlq])
        dead = []
        wait_until(lambda: dead.extend(reader.poll(0.5)) or len(dead) >= 2, timeout=10)
    assert sorted(m.body for m in dead) == [b"fails", b"raises"]
    for m in dead:
        original = sent[m.body.decode()]
        assert m.get_property(MessageProperty.ORIGIN_MESSAGE_ID) in (original.msg_id, original.offset_msg_id)
        assert m.keys == ["k"]


def test_delay_level_holds_a_message_back(cluster):
    cluster.require(RequestCode.CONSUMER_SEND_MSG_BACK)  # comes with the schedule service
    topic = cluster.create_topic("Delayed", queues=1)
    received = []

    def on_messages(msgs):
        received.extend((time.monotonic(), m) for m in msgs)

    consumer = PushConsumer("cg-delay", cluster.namesrv_addr, instance_name="delay",
                            consume_from_where="FIRST_OFFSET", **FAST)
    consumer.subscribe(topic)
    consumer.register_listener(on_messages)
    with consumer, Producer("pg-delay", cluster.namesrv_addr, instance_name="delay-p") as producer:
        time.sleep(0.5)
        sent_at = time.monotonic()
        producer.send(Message(topic, b"later", delay_level=6))  # 2 s on the test broker
        producer.send(Message(topic, b"now"))
        assert wait_until(lambda: len(received) >= 2, timeout=10), f"delayed message never came: {received}"
    arrival = {m.body: at - sent_at for at, m in received}
    assert arrival[b"now"] < 1.0
    assert 1.8 <= arrival[b"later"] < 6.0, arrival
    assert [m for _, m in received if m.body == b"later"][0].topic == topic


def test_orderly_clustering_two_consumers_keep_per_key_order(cluster):
    cluster.require(RequestCode.LOCK_BATCH_MQ)
    topic = cluster.create_topic("OrderedGroup", queues=4)
    seen: dict[str, list[int]] = collections.defaultdict(list)
    lock = threading.Lock()

    def on_messages(msgs):
        with lock:
            for m in msgs:
                key, seq = m.body.decode().split(":")
                seen[key].append(int(seq))
        return ConsumeOrderlyStatus.SUCCESS

    consumers = []
    for name in ("o1", "o2"):
        c = PushConsumer("cg-ordered", cluster.namesrv_addr, instance_name=name,
                         consume_from_where="FIRST_OFFSET", **FAST)
        c.subscribe(topic)
        c.register_listener(on_messages, orderly=True)
        consumers.append(c.start())
    try:
        with Producer("pg-ordered", cluster.namesrv_addr, instance_name="ordered-p") as producer:
            for seq in range(40):
                for key in ("a", "b", "c", "d", "e", "f"):
                    producer.send_orderly(Message(topic, f"{key}:{seq}".encode()), sharding_key=key)
        assert wait_until(lambda: sum(map(len, seen.values())) >= 240)
    finally:
        for c in consumers:
            c.shutdown()
    for key, seqs in seen.items():
        # a queue that moved between consumers may repeat a tail, never reorder
        deduped = [s for i, s in enumerate(seqs) if s not in seqs[:i]]
        assert deduped == list(range(40)), (key, seqs)
