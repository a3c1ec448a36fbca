"""Push and lite-pull consumers against a real broker: sharing, membership changes, broadcasting,
orderly, commit and seek."""

from __future__ import annotations

import collections
import threading
import time

from rmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    Message,
    MessageModel,
    Producer,
    PullConsumer,
    PushConsumer,
)
from tests.client.conftest import requires_broker

pytestmark = requires_broker

FAST = {"rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.5}


class Received:
    """Thread-safe record of what each consumer got."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_consumer: dict[str, list] = collections.defaultdict(list)

    def listener(self, name: str, status=ConsumeConcurrentlyStatus.CONSUME_SUCCESS):
        def on_messages(msgs):
            with self.lock:
                self.by_consumer[name].extend(msgs)
            return status
        return on_messages

    def bodies(self, name: str | None = None) -> list[bytes]:
        with self.lock:
            lists = [self.by_consumer[name]] if name else list(self.by_consumer.values())
            return [m.body for msgs in lists for m in msgs]

    def wait_for(self, predicate, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        return predicate()


def push_consumer(cluster, group, name, received, topic, expression="*", **options) -> PushConsumer:
    consumer = PushConsumer(group, cluster.namesrv_addr, instance_name=name, **{**FAST, **options})
    consumer.subscribe(topic, expression)
    consumer.register_listener(received.listener(name))
    return consumer.start()


def test_group_shares_queues_through_a_join_and_a_leave_losing_nothing(cluster):
    topic = cluster.create_topic("Shared", queues=6)
    received = Received()
    total = 600
    with Producer("pg-shared", cluster.namesrv_addr, instance_name="shared-p") as producer:
        c1 = push_consumer(cluster, "cg-shared", "c1", received, topic, consume_from_where="FIRST_OFFSET")
        c2 = push_consumer(cluster, "cg-shared", "c2", received, topic, consume_from_where="FIRST_OFFSET")
        c3 = None
        try:
            for i in range(total):
                producer.send(Message(topic, f"m{i}".encode()))
                if i == total // 3:
                    c3 = push_consumer(cluster, "cg-shared", "c3", received, topic, consume_from_where="FIRST_OFFSET")
                if i == 2 * total // 3:
                    c1.shutdown()
                if i % 50 == 0:
                    time.sleep(0.1)  # let the stream overlap the rebalances
            expected = {f"m{i}".encode() for i in range(total)}
            assert received.wait_for(lambda: expected <= set(received.bodies())), \
                f"lost {len(expected - set(received.bodies()))} messages"
        finally:
            for c in (c1, c2, c3):
                if c is not None:
                    c.shutdown()
    counts = {name: len(received.bodies(name)) for name in ("c1", "c2", "c3")}
    duplicates = len(received.bodies()) - total
    print(f"\nper consumer {counts}, duplicates {duplicates}")
    assert all(counts.values()), counts  # everyone took part
    assert duplicates < total // 4


def test_broadcasting_gives_every_consumer_everything(cluster, offsets_dir):
    topic = cluster.create_topic("Broadcast", queues=3)
    received = Received()
    consumers = [push_consumer(cluster, "cg-bcast", f"b{i}", received, topic,
                               message_model=MessageModel.BROADCASTING, consume_from_where="FIRST_OFFSET",
                               offset_store_dir=offsets_dir) for i in range(3)]
    try:
        with Producer("pg-bcast", cluster.namesrv_addr, instance_name="bcast-p") as producer:
            for i in range(60):
                producer.send(Message(topic, f"b{i}".encode()))
        expected = {f"b{i}".encode() for i in range(60)}
        assert received.wait_for(lambda: all(expected <= set(received.bodies(f"b{i}")) for i in range(3)))
    finally:
        for c in consumers:
            c.shutdown()


def test_orderly_listener_sees_each_key_in_send_order(cluster):
    topic = cluster.create_topic("Orderly", queues=4)
    seen: dict[str, list[int]] = collections.defaultdict(list)
    lock = threading.Lock()
    active: set[int] = set()
    overlap = []

    def on_messages(msgs):
        queue_id = msgs[0].queue_id
        with lock:
            if queue_id in active:
                overlap.append(queue_id)
            active.add(queue_id)
        time.sleep(0.001)
        with lock:
            for m in msgs:
                key, seq = m.body.decode().split(":")
                seen[key].append(int(seq))
            active.discard(queue_id)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("cg-orderly", cluster.namesrv_addr, instance_name="o1",
                            message_model="BROADCASTING", consume_from_where="FIRST_OFFSET", **FAST)
    consumer.subscribe(topic)
    consumer.register_listener(on_messages, orderly=True)
    with consumer, Producer("pg-orderly", cluster.namesrv_addr, instance_name="orderly-p") as producer:
        for seq in range(50):
            for key in ("k1", "k2", "k3", "k4", "k5"):
                producer.send_orderly(Message(topic, f"{key}:{seq}".encode()), sharding_key=key)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(map(len, seen.values())) < 250:
            time.sleep(0.05)
    assert {k: v for k, v in seen.items()} == {k: list(range(50)) for k in ("k1", "k2", "k3", "k4", "k5")}
    assert not overlap


def test_tag_filter(cluster):
    topic = cluster.create_topic("Tagged", queues=2)
    received = Received()
    consumer = push_consumer(cluster, "cg-tags", "t1", received, topic, consume_from_where="FIRST_OFFSET",
                             expression="A || C")
    try:
        with Producer("pg-tags", cluster.namesrv_addr, instance_name="tags-p") as producer:
            for i, tag in enumerate("ABCABC"):
                producer.send(Message(topic, f"{tag}{i}".encode(), tags=tag))
        assert received.wait_for(lambda: len(received.bodies()) >= 4)
        time.sleep(0.3)
        assert sorted(received.bodies()) == [b"A0", b"A3", b"C2", b"C5"]
    finally:
        consumer.shutdown()


def test_pull_consumer_commit_and_seek(cluster):
    topic = cluster.create_topic("Pulled", queues=1)
    with Producer("pg-pull", cluster.namesrv_addr, instance_name="pull-p") as producer:
        sent = [producer.send(Message(topic, f"p{i}".encode())) for i in range(20)]
    mq = sent[0].message_queue
    with PullConsumer("cg-pull", cluster.namesrv_addr, instance_name="pull-c", auto_commit=False,
                      consume_from_where="FIRST_OFFSET", max_poll_records=4) as consumer:
        consumer.assign([mq])
        got = []
        while len(got) < 10:
            got += consumer.poll(timeout=5)[: 10 - len(got)]
        assert [m.body for m in got] == [f"p{i}".encode() for i in range(10)]
        consumer.seek(mq, 5)  # read 5.. again before committing
        again = consumer.poll(timeout=5)
        assert again[0].body == b"p5" and again[0].queue_offset == 5
        consumer.seek(mq, 12)
        after = consumer.poll(timeout=5)
        assert [m.queue_offset for m in after] == [12, 13, 14, 15]
        consumer.commit()
        assert consumer.committed(mq) == 16
        consumer.seek_to_timestamp(mq, 0)
        assert consumer.poll(timeout=5)[0].queue_offset == 0
    # A new consumer of the group starts where the commit left off.
    with PullConsumer("cg-pull", cluster.namesrv_addr, instance_name="pull-c2", auto_commit=False) as consumer:
        consumer.assign([mq])
        assert consumer.poll(timeout=5)[0].queue_offset == 16


def test_a_joining_consumer_gets_queues_when_the_broker_notifies_not_at_the_next_tick(cluster):
    topic = cluster.create_topic("Notified", queues=4)
    received = Received()
    slow = {"rebalance_interval": 60.0}
    first = push_consumer(cluster, "cg-notify", "n1", received, topic, **slow)
    try:
        assert received.wait_for(lambda: len(first.process_queues) == 5, timeout=5)  # 4 + the retry queue
        second = push_consumer(cluster, "cg-notify", "n2", received, topic, **slow)
        try:
            owned = lambda c: {mq for mq in c.process_queues if mq.topic == topic}  # noqa: E731
            assert received.wait_for(lambda: len(owned(first)) == 2 and len(owned(second)) == 2, timeout=5)
            assert not owned(first) & owned(second)
        finally:
            second.shutdown()
        assert received.wait_for(lambda: len(owned(first)) == 4, timeout=5)  # the leave is notified too
    finally:
        first.shutdown()
