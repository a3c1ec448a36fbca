"""Transactional tests' shared parts: a cluster whose broker checks transactions every 0.5 s, a
recording ``check`` function, the bodies stored in a topic."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rmq.client import LocalTransactionState
from tests.helpers.processes import Cluster

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
