"""Push consumers against real rmq processes: a group sharing queues through membership changes,
broadcasting, orderly listeners (broadcasting, and clustering on broker locks), tag filters."""

from __future__ import annotations

import collections
import logging
import threading
import time

from rmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    Message,
    MessageModel,
    Producer,
    PushConsumer,
)
from rmq.protocol.codes import RequestCode
from rmq.protocol.message import retry_topic
from tests.helpers import wait_until
from tests.helpers.requests import offset_request

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
            wait_until(
                lambda: expected <= set(received.bodies()),
                30,
                lambda: f"every message consumed (lost {len(expected - set(received.bodies()))})",
            )
        finally:
            for c in (c1, c2, c3):
                if c is not None:
                    c.shutdown()
    counts = {name: len(received.bodies(name)) for name in ("c1", "c2", "c3")}
    duplicates = len(received.bodies()) - total
    print(f"\nper consumer {counts}, duplicates {duplicates}")
    assert all(counts.values()), counts  # everyone took part
    assert duplicates < total // 4


def test_broadcasting_gives_every_consumer_everything(cluster, tmp_path):
    offsets_dir = str(tmp_path / "offsets")
    topic = cluster.create_topic("Broadcast", queues=3)
    received = Received()
    consumers = [
        push_consumer(
            cluster,
            "cg-bcast",
            f"b{i}",
            received,
            topic,
            message_model=MessageModel.BROADCASTING,
            consume_from_where="FIRST_OFFSET",
            offset_store_dir=offsets_dir,
        )
        for i in range(3)
    ]
    try:
        with Producer("pg-bcast", cluster.namesrv_addr, instance_name="bcast-p") as producer:
            for i in range(60):
                producer.send(Message(topic, f"b{i}".encode()))
        expected = {f"b{i}".encode() for i in range(60)}
        wait_until(
            lambda: all(expected <= set(received.bodies(f"b{i}")) for i in range(3)),
            30,
            "every broadcasting consumer got every message",
        )
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

    consumer = PushConsumer(
        "cg-orderly",
        cluster.namesrv_addr,
        instance_name="o1",
        message_model="BROADCASTING",
        consume_from_where="FIRST_OFFSET",
        **FAST,
    )
    consumer.subscribe(topic)
    consumer.register_listener(on_messages, orderly=True)
    with consumer, Producer("pg-orderly", cluster.namesrv_addr, instance_name="orderly-p") as producer:
        for seq in range(50):
            for key in ("k1", "k2", "k3", "k4", "k5"):
                producer.send_orderly(Message(topic, f"{key}:{seq}".encode()), sharding_key=key)
        wait_until(lambda: sum(map(len, seen.values())) >= 250, 30, "250 messages consumed")
    assert {k: v for k, v in seen.items()} == {k: list(range(50)) for k in ("k1", "k2", "k3", "k4", "k5")}
    assert not overlap


def test_orderly_clustering_two_consumers_keep_per_key_order(cluster):
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
        c = PushConsumer(
            "cg-ordered", cluster.namesrv_addr, instance_name=name, consume_from_where="FIRST_OFFSET", **FAST
        )
        c.subscribe(topic)
        c.register_listener(on_messages, orderly=True)
        consumers.append(c.start())
    try:
        with Producer("pg-ordered", cluster.namesrv_addr, instance_name="ordered-p") as producer:
            for seq in range(40):
                for key in ("a", "b", "c", "d", "e", "f"):
                    producer.send_orderly(Message(topic, f"{key}:{seq}".encode()), sharding_key=key)
        wait_until(lambda: sum(map(len, seen.values())) >= 240, 30, "240 messages consumed")
    finally:
        for c in consumers:
            c.shutdown()
    for key, seqs in seen.items():
        # a queue that moved between consumers may repeat a tail, never reorder
        deduped = [s for i, s in enumerate(seqs) if s not in seqs[:i]]
        assert deduped == list(range(40)), (key, seqs)


def test_tag_filter(cluster):
    topic = cluster.create_topic("Tagged", queues=2)
    received = Received()
    consumer = push_consumer(
        cluster, "cg-tags", "t1", received, topic, consume_from_where="FIRST_OFFSET", expression="A || C"
    )
    try:
        with Producer("pg-tags", cluster.namesrv_addr, instance_name="tags-p") as producer:
            for i, tag in enumerate("ABCABC"):
                producer.send(Message(topic, f"{tag}{i}".encode(), tags=tag))
        wait_until(lambda: len(received.bodies()) >= 4, 30, "the four messages tagged A or C consumed")
        # a pull from where the group committed finds no A or C: nothing (no B, no duplicate) is left to come
        cluster.wait_caught_up("cg-tags", topic, subscription="A || C")
        assert sorted(received.bodies()) == [b"A0", b"A3", b"C2", b"C5"]
    finally:
        consumer.shutdown()


def test_a_joining_consumer_gets_queues_when_the_broker_notifies_not_at_the_next_tick(cluster):
    topic = cluster.create_topic("Notified", queues=4)
    # The retry topic a consumer's heartbeat creates is registered with the name server after the
    # heartbeat is answered: created here first, the first rebalance is sure to find its route.
    cluster.create_topic(retry_topic("cg-notify"), queues=1)
    received = Received()
    slow = {"rebalance_interval": 60.0}
    first = push_consumer(cluster, "cg-notify", "n1", received, topic, **slow)
    try:
        # every bound below is far under the 60 s rebalance tick
        wait_until(lambda: len(first.process_queues) == 5, 20, "the first consumer took 4 queues + the retry queue")
        second = push_consumer(cluster, "cg-notify", "n2", received, topic, **slow)
        try:
            owned = lambda c: {mq for mq in c.process_queues if mq.topic == topic}  # noqa: E731
            wait_until(
                lambda: len(owned(first)) == 2 and len(owned(second)) == 2,
                20,
                "the join was notified and the queues shared 2 + 2",
            )
            assert not owned(first) & owned(second)
        finally:
            second.shutdown()
        wait_until(lambda: len(owned(first)) == 4, 20, "the leave was notified and the first took all 4 back")
    finally:
        first.shutdown()


def test_a_slow_listener_runs_on_several_threads_at_once(cluster):
    # The messages of one pull go to the listener threads as one task; a slow listener must still
    # get them in parallel, as RocketMQ's one task per message does.
    topic = cluster.create_topic("SlowListener", queues=1)
    with Producer("pg-slow", cluster.namesrv_addr, instance_name="slow-p") as producer:
        producer.send_batch([Message(topic, b"%d" % i) for i in range(12)])
    lock = threading.Lock()
    running, peak, bodies = [0], [0], []
    crowded = threading.Event()

    def slow(msgs):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            if running[0] >= 4:
                crowded.set()
        crowded.wait(1.0)  # alone, a call waits a second: slower than any spreading threshold
        with lock:
            running[0] -= 1
            bodies.extend(m.body for m in msgs)

    consumer = PushConsumer(
        "cg-slow", cluster.namesrv_addr, instance_name="slow-c", consume_from_where="FIRST_OFFSET", **FAST
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(slow)
    with consumer:
        wait_until(lambda: len(bodies) >= 12, 30, "the twelve messages consumed")
    assert peak[0] >= 4
    assert sorted(bodies, key=int) == [b"%d" % i for i in range(12)]


def test_shutdown_in_the_middle_of_a_pull_commits_what_was_consumed(cluster):
    # A pull's messages are one task for the listener threads; a shutdown during it must still
    # commit the ones whose listener had returned, as a task per message committed them.
    topic = cluster.create_topic("StopMidPull", queues=1)
    with Producer("pg-stop", cluster.namesrv_addr, instance_name="stop-p") as producer:
        producer.send_batch([Message(topic, b"%d" % i) for i in range(20)])
    consumer = PushConsumer("cg-stop", cluster.namesrv_addr, instance_name="stop-c", consume_from_where="FIRST_OFFSET")
    stopper = threading.Thread(target=consumer.shutdown)

    def listener(msgs):
        if msgs[0].body == b"9":  # the tenth: shut down under it, and finish it once its queue is given up
            stopper.start()
            wait_until(lambda: all(pq.dropped for pq in list(consumer.process_queues.values())), 10, "queue dropped")

    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    consumer.start()
    wait_until(lambda: stopper.ident is not None, 30, "the tenth message consumed")
    stopper.join(30)
    answer = cluster.call(offset_request(RequestCode.QUERY_CONSUMER_OFFSET, topic, 0, "cg-stop"))
    # 0-8 done before the shutdown; the tenth's call ended after it, so it comes again
    assert int(answer.ext_fields["offset"]) == 9


def test_a_consumer_started_as_its_topic_is_created_consumes_it_with_no_warning(cluster, caplog):
    # issue 26: a topic a send auto-creates reaches the name server a moment after the send is
    # answered, so a consumer started right after it warned that the topic had no route; here the
    # topic comes 0.3 s after the consumer starts
    topic, received = "JustCreated", Received()
    caplog.set_level(logging.WARNING, logger="rmq.client")
    creator = threading.Timer(0.3, cluster.create_topic, args=(topic, 2))
    creator.start()
    try:
        consumer = push_consumer(cluster, "cg-new", "c-new", received, topic, consume_from_where="FIRST_OFFSET")
    finally:
        creator.join()
    with consumer, Producer("pg-just-created", cluster.namesrv_addr, instance_name="p-new") as producer:
        assert producer.send(Message(topic, b"first")).ok
        wait_until(lambda: received.bodies() == [b"first"], 10, "the message consumed")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_listener_stuck_on_a_message_does_not_hold_up_the_next(cluster):
    # RocketMQ runs each message on one of its 20 consume threads: one a listener blocks on leaves
    # the next to another thread. The pool kept the next for the thread blocked in the listener.
    topic = cluster.create_topic("StuckListener", queues=1)
    stuck, release = threading.Event(), threading.Event()
    bodies: list[bytes] = []

    def listener(msgs):
        for msg in msgs:
            if msg.body == b"first":
                stuck.set()
                release.wait(10)
            bodies.append(msg.body)

    consumer = PushConsumer(
        "cg-stuck", cluster.namesrv_addr, instance_name="stuck-c", consume_from_where="FIRST_OFFSET", **FAST
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    with consumer, Producer("pg-stuck", cluster.namesrv_addr, instance_name="stuck-p") as producer:
        try:
            assert producer.send(Message(topic, b"first")).ok
            wait_until(stuck.is_set, 10, "the first message in the listener")
            assert producer.send(Message(topic, b"second")).ok
            wait_until(lambda: bodies == [b"second"], 10, "the second message consumed while the first is stuck")
        finally:
            release.set()
        wait_until(lambda: sorted(bodies) == [b"first", b"second"], 10, "the first message consumed once released")
