"""Sends of every kind against real rmq processes, read back through the consumers."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

from rmq.client import Message, Producer, PullConsumer, PushConsumer, SendStatus
from rmq.protocol.message import SCHEDULE_TOPIC
from tests.helpers import wait_until


def poll_all(consumer: PullConsumer, expected: int, timeout: float = 15.0) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        got += consumer.poll(timeout=0.5)
    return got


def test_sync_async_oneway_batch_sends_arrive_intact(cluster):
    topic = cluster.create_topic("SendKinds")
    big = bytes(range(256)) * 40  # 10 KiB: compressed on the wire
    with Producer("pg-kinds", cluster.namesrv_addr, instance_name="kinds") as producer:
        sync = producer.send(Message(topic, b"sync", tags="A", keys=["k1", "k2"], properties={"p": "v"}))
        assert sync.status is SendStatus.SEND_OK and len(sync.msg_id) == 32
        assert sync.message_queue.topic == topic and sync.queue_offset >= 0
        futures = [producer.send_async(Message(topic, f"async-{i}".encode(), tags="B")) for i in range(20)]
        results = [f.result(10) for f in futures]
        assert all(r.status is SendStatus.SEND_OK for r in results)
        aio = asyncio.run(producer.asend(Message(topic, b"awaited")))
        assert aio.ok
        producer.send_oneway(Message(topic, b"oneway"))
        batch = producer.send_batch([Message(topic, f"batch-{i}".encode(), keys=f"b{i}") for i in range(5)])
        assert len(batch.msg_id.split(",")) == 5
        compressed = producer.send(Message(topic, big, tags="Z"))
        ids = {sync.msg_id, aio.msg_id, compressed.msg_id, *batch.msg_id.split(","), *(r.msg_id for r in results)}

    with PullConsumer(
        "cg-kinds", cluster.namesrv_addr, consume_from_where="FIRST_OFFSET", instance_name="kinds-reader"
    ) as consumer:
        consumer.subscribe(topic, "*")
        got = poll_all(consumer, 29)
    bodies = sorted(m.body for m in got)
    assert len(got) == 29, bodies
    by_id = {m.msg_id: m for m in got}
    assert ids <= set(by_id)
    first = by_id[sync.msg_id]
    assert (first.body, first.tags, first.keys, first.get_property("p")) == (b"sync", "A", ["k1", "k2"], "v")
    assert first.offset_msg_id == sync.offset_msg_id
    assert first.store_host == ("127.0.0.1", cluster.broker_port)
    assert by_id[compressed.msg_id].body == big
    assert b"oneway" in bodies
    batch_msgs = sorted((m for m in got if m.body.startswith(b"batch-")), key=lambda m: m.queue_offset)
    assert [m.body for m in batch_msgs] == [f"batch-{i}".encode() for i in range(5)]
    assert len({m.queue_id for m in batch_msgs}) == 1


def test_orderly_send_puts_one_key_on_one_queue(cluster):
    topic = cluster.create_topic("OrderlySend", queues=8)
    with Producer("pg-order", cluster.namesrv_addr, instance_name="order") as producer:
        queues = {
            key: {producer.send_orderly(Message(topic, b"x"), sharding_key=key).message_queue for _ in range(5)}
            for key in ("order-1", "order-2", "order-3")
        }
    assert all(len(q) == 1 for q in queues.values())


def test_delay_level_holds_a_message_back(cluster):
    topic = cluster.create_topic("Delayed", queues=1)
    received = []

    def on_messages(msgs):
        received.extend((time.monotonic(), m) for m in msgs)

    consumer = PushConsumer(
        "cg-delay",
        cluster.namesrv_addr,
        instance_name="delay",
        consume_from_where="FIRST_OFFSET",
        rebalance_interval=1.0,
    )
    consumer.subscribe(topic)
    consumer.register_listener(on_messages)
    with consumer, Producer("pg-delay", cluster.namesrv_addr, instance_name="delay-p") as producer:
        wait_until(lambda: any(mq.topic == topic for mq in consumer.process_queues), 20, "the consumer took its queue")
        sent_at = time.monotonic()
        producer.send(Message(topic, b"later", delay_level=6))  # 2 s on the test broker
        producer.send(Message(topic, b"now"))
        # only the delayed one waits in the schedule topic (level 6: queue 5); the other was not held
        assert {q: n for q, n in cluster.max_offsets(SCHEDULE_TOPIC).items() if n} == {5: 1}
        wait_until(lambda: len(received) >= 2, 20, lambda: f"both messages consumed (got {received})")
    arrival = {m.body: at - sent_at for at, m in received}
    assert 1.8 <= arrival[b"later"], arrival  # never early
    assert [m for _, m in received if m.body == b"later"][0].topic == topic


def test_a_kept_async_future_lets_go_of_what_its_callback_held(cluster):
    # callers keep send_async futures (to check them at the end): each must not keep its
    # callbacks, and what they captured, alive as long as it is kept
    topic = cluster.create_topic("KeptFutures")

    class Payload:
        pass

    with Producer("pg-kept", cluster.namesrv_addr, instance_name="kept") as producer:
        producer.send(Message(topic, b"route warm-up"))
        done = threading.Event()
        payload = Payload()
        held = weakref.ref(payload)
        future = producer.send_async(Message(topic, b"kept"))
        future.add_done_callback(lambda _f, kept=payload: done.set())
        del payload
        assert done.wait(10)
        gc.collect()
        assert held() is None
        assert future.result().ok
