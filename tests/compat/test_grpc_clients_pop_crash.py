"""Acceptance (issue 24, item 3): Apache's 5.x Python SimpleConsumer receives and acks while its
``rmq-broker`` (SYNC_FLUSH) is SIGKILLed and restarted, 10 rounds. POP state (checkpoints, acks,
revive) lives in the store, so in the end every message sent was acked exactly once and none is
lost: a message comes back only when no ack of it had succeeded, and one whose first delivery the
consumer leaves unacked on purpose comes back, kills or not.

An ack that fails because the broker died under it is ambiguous: the broker may have made it
durable before it died (then the message never comes back, rightly) or not (then it comes back and
is acked again). Such a message counts as acked when it does not come back.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rmq.client import Message, Producer
from tests.helpers import wait_until
from tests.helpers.grpc_clients import GrpcCluster

pytestmark = [pytest.mark.compat, pytest.mark.slow]

ROUNDS = 10
PER_ROUND = 4
#: seconds a received message stays invisible (FAST_RECEIVES lets a receive ask for so little)
INVISIBLE = 2
#: the bodies whose first delivery the consumer does not ack (message 1 and 3 of each round)
LEFT_FIRST = ["-1", "-3"]


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


class Outcome:
    """What the consumer said of each message, in order: deliveries, acks that succeeded, acks that
    failed (the broker died under them)."""

    def __init__(self, lines: list[dict]):
        self.deliveries: Counter[str] = Counter()
        self.attempts: dict[str, int] = {}  # the highest delivery attempt the consumer saw
        self.acked: Counter[str] = Counter()
        self.failed_last: set[str] = set()  # its last word an ack that failed
        self.delivered_after_ack: list[str] = []
        for line in lines:
            body = line.get("body")
            if "delivered" in line:
                self.deliveries[body] += 1
                self.attempts[body] = max(self.attempts.get(body, 0), line["attempt"])
                self.failed_last.discard(body)
                if self.acked[body]:
                    self.delivered_after_ack.append(body)
            elif "acked" in line:
                self.acked[body] += 1
                self.failed_last.discard(body)
            elif line.get("failed") == "ack":
                self.failed_last.add(body)

    def settled(self, body: str) -> bool:
        """Acked, or its ack failed and it never came back; left unacked first, delivered again (a
        first delivery the kill took never reached the consumer: then its second is attempt 2)."""
        came_back = self.attempts.get(body, 0) >= 2 or not body.endswith(tuple(LEFT_FIRST))
        return came_back and (self.acked[body] > 0 or body in self.failed_last)


def test_a_simple_consumer_acks_every_message_exactly_once_across_broker_kills(grpc_clients, sync_flush_cluster):
    cluster = sync_flush_cluster
    topic = cluster.create_typed_topic("Py5PopCrash", "NORMAL")
    options = {"until_closed": True, "batch": 2, "invisible": INVISIBLE, "await": 1, "leave_first": LEFT_FIRST}
    consumer = grpc_clients.runner.start_until_closed(
        "py5_simple_consume.py", cluster.endpoint, topic, "py5-pop-crash", 0, 0, json.dumps(options)
    )
    sent: list[str] = []

    def unsettled() -> dict[str, list[dict]]:
        outcome = Outcome(consumer.of("body"))
        return {b: [line for line in consumer.of("body") if line["body"] == b] for b in sent if not outcome.settled(b)}

    try:
        for round_ in range(ROUNDS):
            bodies = [f"crash-{round_}-{i}" for i in range(PER_ROUND)]
            with Producer("py5-pop-crash-p", cluster.namesrv_addr, instance_name=f"crash-p-{round_}") as producer:
                for body in bodies:
                    producer.send(Message(topic, body.encode()))
            sent += bodies
            # kill it while this round's messages are being received and acked
            wait_until(
                lambda bodies=bodies: Outcome(consumer.of("body")).acked.keys() & set(bodies),
                20,
                f"an ack of round {round_}",
            )
            cluster.kill_broker()
            cluster.start_broker()
        wait_until(lambda: not unsettled(), 4 * INVISIBLE + 10, lambda: f"every message settled: {unsettled()}")
    finally:
        errors = consumer.close()

    outcome = Outcome(consumer.lines)
    assert set(outcome.deliveries) == set(sent), f"delivered what was never sent\n{errors[-2000:]}"
    assert not outcome.delivered_after_ack, (
        f"delivered again after an ack succeeded: {sorted(set(outcome.delivered_after_ack))}; the first: "
        f"{[line for line in consumer.lines if line.get('body') == outcome.delivered_after_ack[0]]}"
    )
    assert max(outcome.acked.values()) == 1
    # not vacuous: kills hit acks in flight, and messages left unacked came back across kills
    assert sum(outcome.deliveries.values()) > len(sent)
