"""Acceptance (issue 24, item 3): Apache's 5.x Python SimpleConsumer receives and acks while its
``rmq-broker`` (SYNC_FLUSH) is SIGKILLed and restarted, 10 rounds. POP state (checkpoints, acks,
revive) lives in the store: in the end every message sent was acked exactly once, none is lost,
and a message comes back only when its ack had not succeeded (a message delivered again after a
successful ack would be one acked and lost by the crash).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rmq.client import Message, Producer
from tests.helpers import wait_until
from tests.helpers.compat import RunningScript
from tests.helpers.grpc_clients import GrpcCluster

pytestmark = [pytest.mark.compat, pytest.mark.slow]

ROUNDS = 10
PER_ROUND = 4
#: seconds a received message stays invisible (the least the endpoint accepts on a receive)
INVISIBLE = 10


@pytest.fixture
def sync_flush_cluster(spawn, tmp_path: Path):
    store = tmp_path / "broker-store"
    store.mkdir()
    cluster = GrpcCluster(spawn, store)
    cluster.settings.update(flushDiskType="SYNC_FLUSH")
    try:
        yield cluster.start()
    finally:
        cluster.close()


def acks(consumer: RunningScript) -> list[str]:
    return [line["body"] for line in consumer.of("acked")]


def test_a_simple_consumer_acks_every_message_exactly_once_across_broker_kills(grpc_clients, sync_flush_cluster):
    cluster = sync_flush_cluster
    topic = cluster.create_typed_topic("Py5PopCrash", "NORMAL")
    consumer = grpc_clients.runner.start_until_closed(
        "py5_simple_consume.py",
        cluster.endpoint,
        topic,
        "py5-pop-crash",
        0,
        0,
        json.dumps({"until_closed": True, "batch": 2, "invisible": INVISIBLE, "await": 1}),
    )
    sent: list[str] = []
    try:
        for round_ in range(ROUNDS):
            bodies = [f"crash-{round_}-{i}" for i in range(PER_ROUND)]
            with Producer("py5-pop-crash-p", cluster.namesrv_addr, instance_name=f"crash-p-{round_}") as producer:
                for body in bodies:
                    producer.send(Message(topic, body.encode()))
            sent += bodies
            # kill it while this round's messages are being received and acked
            wait_until(lambda bodies=bodies: set(bodies) & set(acks(consumer)), 20, f"an ack of round {round_}")
            cluster.kill_broker()
            cluster.start_broker()
        wait_until(
            lambda: set(sent) <= set(acks(consumer)),
            3 * INVISIBLE + 10,
            lambda: f"every message acked (never acked: {sorted(set(sent) - set(acks(consumer)))})",
        )
    finally:
        errors = consumer.close()

    acked = Counter(acks(consumer))
    assert set(acked) == set(sent), f"acked what was never sent: {sorted(set(acked) - set(sent))}\n{errors[-2000:]}"
    assert max(acked.values()) == 1, f"acked twice: {sorted(b for b, n in acked.items() if n > 1)}"
    acked_at: dict[str, int] = {}
    for n, line in enumerate(consumer.lines):
        if "acked" in line:
            acked_at[line["body"]] = n
        elif "delivered" in line:
            assert line["body"] not in acked_at, f"{line['body']} delivered again after its ack succeeded"
