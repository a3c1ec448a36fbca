"""Transactional tests' shared parts: a cluster whose broker checks transactions every 0.5 s, a
recording ``check`` function, the bodies stored in a topic, and the checker's progress through the
half queue (what a test waits on before it says that something was not checked)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rmq.client import LocalTransactionState
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import TRANS_HALF_TOPIC
from rmq.protocol.transaction import HALF_QUEUE_ID, TRANSACTION_CHECK_GROUP
from tests.helpers import wait_until
from tests.helpers.processes import Cluster
from tests.helpers.requests import offset_request

# Checks every 0.5 s of transactions left open for 1 s: tests wait seconds, not minutes.
FAST_CHECKS = {"transactionCheckInterval": "500", "transactionTimeOut": "1000"}


def start_tx_cluster(spawn, tmp_path: Path, **settings: str) -> Cluster:
    """A started Cluster whose broker checks transactions every 0.5 s (and ``settings``)."""
    store = tmp_path / "broker-store"
    store.mkdir()
    cluster = Cluster(spawn, store)
    cluster.settings.update(FAST_CHECKS, **settings)
    return cluster.start()


class Checks:
    """A ``check`` function answering from ``answers`` (body -> state) and recording each ask."""

    def __init__(self, answers: dict[bytes, LocalTransactionState] | None = None):
        self.answers = {} if answers is None else answers
        self.asked: list[tuple[float, object]] = []
        self.lock = threading.Lock()

    def __call__(self, msg) -> LocalTransactionState:
        with self.lock:
            self.asked.append((time.time(), msg))
        return self.answers.get(msg.body, LocalTransactionState.UNKNOWN)

    def bodies(self) -> list[bytes]:
        return [m.body for m in self.asked_messages()]

    def asked_messages(self) -> list:
        with self.lock:
            return [m for _, m in self.asked]


def bodies(cluster: Cluster, topic: str) -> list[bytes]:
    return sorted(m.body for m in cluster.messages(topic))


def checker_offset(cluster: Cluster) -> int:
    """How far the broker's transaction checker has gone through the half queue (RocketMQ keeps it
    as the consumer offset of CID_RMQ_SYS_TRANS, committed at the end of each round); -1 before its
    first round. Every half message below it was found ended or was checked (and put back, at the
    end of the queue)."""
    request = offset_request(
        RequestCode.QUERY_CONSUMER_OFFSET, TRANS_HALF_TOPIC, HALF_QUEUE_ID, TRANSACTION_CHECK_GROUP
    )
    answer = cluster.call(request)
    return int(answer.ext_fields["offset"]) if answer.code == ResponseCode.SUCCESS else -1


def wait_checker_past(cluster: Cluster, queue_offset: int | None = None, timeout: float = 20) -> None:
    """Until a check round has gone past half-queue offset ``queue_offset`` (None: past every half
    message stored, copies put back included). A half message the checker passed was either ended
    (an op record or END seen) or checked once more, which a recording ``check`` shows: only then
    does "not checked again" say something."""

    def passed() -> bool:
        target = (
            cluster.max_offsets(TRANS_HALF_TOPIC).get(HALF_QUEUE_ID, 0) if queue_offset is None else queue_offset + 1
        )
        return checker_offset(cluster) >= target

    where = "every half message" if queue_offset is None else f"half queue offset {queue_offset}"
    wait_until(
        passed, timeout, lambda: f"the transaction checker past {where} (it is at {checker_offset(cluster)})", 0.05
    )
