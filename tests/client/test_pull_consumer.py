"""The lite-pull consumer against real rmq processes: assign, poll, commit, seek."""

from __future__ import annotations

import pytest

from rmq.client import Message, Producer, PullConsumer
from rmq.errors import ClientError
from rmq.protocol.message_queue import MessageQueue


def test_pull_consumer_commit_and_seek(cluster):
    topic = cluster.create_topic("Pulled", queues=1)
    with Producer("pg-pull", cluster.namesrv_addr, instance_name="pull-p") as producer:
        sent = [producer.send(Message(topic, f"p{i}".encode())) for i in range(20)]
    mq = sent[0].message_queue
    with PullConsumer(
        "cg-pull",
        cluster.namesrv_addr,
        instance_name="pull-c",
        auto_commit=False,
        consume_from_where="FIRST_OFFSET",
        max_poll_records=4,
    ) as consumer:
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


def test_committed_before_start_says_the_consumer_is_not_started():
    # it used to fail inside with AttributeError: the offset store is made by start()
    consumer = PullConsumer("cg-unstarted", "127.0.0.1:9876")
    with pytest.raises(ClientError, match="cg-unstarted is not started"):
        consumer.committed(MessageQueue("Pulled", "broker-a", 0))
