"""A promoted slave delivers its dead master's timed messages: each one once, none early.

The master delivers the first ones; the slave copies its timer checkpoint (with the other metadata)
and replicates the CommitLog; the master is killed (SIGKILL) and the slave promoted: it delivers
the rest, and the topic holds every message exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from rmq._clock import now_ms
from rmq.client import Message, Producer
from rmq.client.admin_client import AdminClient
from tests.helpers import wait_until
from tests.helpers.processes import BrokerPair
from tests.helpers.requests import pull_all

TOPIC = "TimedFailover"
QUEUES = 2


@pytest.fixture
def pair(spawn, tmp_path: Path) -> Iterator[BrokerPair]:
    # the slave re-registers every second, so it learns its master (and copies metadata) at once
    p = BrokerPair(spawn, tmp_path, slave={"registerNameServerPeriod": "1000"})
    try:
        yield p.start()
    finally:
        p.close()


def test_a_promoted_slave_delivers_the_rest_once(pair, tmp_path):
    pair.create_topic(TOPIC, QUEUES)
    due: dict[str, int] = {}
    with Producer("timed-failover", namesrv_addr=pair.namesrv_addr) as producer:
        for i in range(40):
            delay_ms = 500 + 100 * i if i < 20 else 14_000 + 100 * i
            earliest = now_ms() + delay_ms  # the broker's receipt comes after this
            result = producer.send(Message(TOPIC, f"m{i}".encode(), delay=timedelta(milliseconds=delay_ms)))
            due[result.msg_id] = earliest
    first_batch_done = max(at for at in list(due.values())[:20])
    copied = tmp_path / "slave" / "config" / "timerCheckpoint.json"
    # the slave's copy of the checkpoint says the first batch is delivered (it copies every 10 s)
    wait_until(
        lambda: copied.exists() and json.loads(copied.read_text())["readSlot"] * 1000 > first_batch_done,
        30,
        "the slave copied a checkpoint past the first batch",
    )
    pair.wait_replicated(TOPIC)
    pair.kill_master()
    with AdminClient(pair.namesrv_addr) as admin:
        admin.promote("broker-a", 1)
    wait_until(lambda: now_ms() > max(due.values()) + 1000, 30, "every message due")
    got = wait_until(
        lambda: (found := pull_all(pair.client, pair.slave_addr, TOPIC, QUEUES))[len(due) - 1 :] and found,
        10,
        "every message on the promoted slave",
    )
    ids = [m.uniq_key for m in got]
    assert len(ids) == len(set(ids)) == len(due) and set(ids) == set(due)
    assert all(m.store_timestamp >= due[m.uniq_key] for m in got)  # none early
