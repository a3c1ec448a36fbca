"""Consumers subscribed by SQL92 (``MessageSelector.by_sql``) against real rmq processes: the broker
filters by message properties; tag consumers of the same topic are unaffected; a broker without
enablePropertyFilter, or an expression that does not parse, stops the consumer with a clear error."""

from __future__ import annotations

import threading
import time

import pytest

from rmq.client import Message, MessageSelector, Producer, PullConsumer, PushConsumer
from rmq.errors import ClientError
from tests.helpers.processes import Cluster

pytestmark = pytest.mark.slow


class Collector:
    def __init__(self, expected: int):
        self.expected = expected
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.done = threading.Event()

    def __call__(self, msgs) -> None:
        with self.lock:
            self.bodies.extend(m.body for m in msgs)
            if len(self.bodies) >= self.expected:
                self.done.set()


def push_consumer(group: str, cluster: Cluster, topic: str, selector, listener) -> PushConsumer:
    consumer = PushConsumer(
        group,
        cluster.namesrv_addr,
        consume_from_where="FIRST_OFFSET",
        instance_name=group,
        persist_consumer_offset_interval=0.5,
    )
    consumer.subscribe(topic, selector)
    consumer.register_listener(listener)
    return consumer


def test_sql92_consumers_get_exactly_what_matches_and_tag_consumers_are_unaffected(filtering_cluster):
    cluster = filtering_cluster
    topic = cluster.create_topic("Orders")
    with Producer("orders-p", cluster.namesrv_addr, instance_name="orders-p") as producer:
        for i in range(60):
            color = "red" if i % 2 else "blue"
            producer.send(Message(topic, b"%d" % i, tags=f"Tag{color}", properties={"n": str(i), "color": color}))
    sql_expected = sorted(b"%d" % i for i in range(30, 60) if i % 2)
    tag_expected = sorted(b"%d" % i for i in range(60) if i % 2 == 0)

    by_sql, by_tag = Collector(len(sql_expected)), Collector(len(tag_expected))
    sql_consumer = push_consumer(
        "orders-sql", cluster, topic, MessageSelector.by_sql("n >= 30 AND color = 'red'"), by_sql
    )
    tag_consumer = push_consumer("orders-tag", cluster, topic, MessageSelector.by_tag("Tagblue"), by_tag)
    with sql_consumer, tag_consumer:
        assert by_sql.done.wait(20), f"SQL92 consumer got {len(by_sql.bodies)} of {len(sql_expected)}"
        assert by_tag.done.wait(20), f"tag consumer got {len(by_tag.bodies)} of {len(tag_expected)}"
        # every queue committed to its end: nothing else is coming to either group
        cluster.wait_caught_up("orders-sql", topic)
        cluster.wait_caught_up("orders-tag", topic)
    assert sorted(by_sql.bodies) == sql_expected
    assert sorted(by_tag.bodies) == tag_expected

    with PullConsumer(
        "orders-pull", cluster.namesrv_addr, consume_from_where="FIRST_OFFSET", instance_name="orders-pull"
    ) as puller:
        puller.subscribe(topic, MessageSelector.by_sql("n IN ('1', '2', '3') OR n > 57"))
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m.body for m in puller.poll(timeout=0.5)]
        got += [m.body for m in puller.poll(timeout=1.0)]  # and nothing more
    assert sorted(got) == sorted([b"1", b"2", b"3", b"58", b"59"])


def test_an_expression_that_does_not_parse_is_refused_at_subscribe():
    consumer = PushConsumer("bad-sql", "127.0.0.1:1")
    with pytest.raises(ClientError, match=r"SQL92 expression 'a > 1 AND', line 1 column 10: unexpected end"):
        consumer.subscribe("Orders", MessageSelector.by_sql("a > 1 AND"))
    assert not consumer.subscriptions


def test_a_broker_without_enable_property_filter_stops_an_sql92_consumer_at_start(cluster):
    topic = cluster.create_topic("Unfiltered")
    consumer = push_consumer("unfiltered-sql", cluster, topic, MessageSelector.by_sql("a > 1"), lambda msgs: None)
    with pytest.raises(ClientError, match="does not support consumer to filter message by SQL92"):
        consumer.start()
    # a tag consumer of the same client process starts as before
    with push_consumer("unfiltered-tag", cluster, topic, "*", lambda msgs: None):
        pass
