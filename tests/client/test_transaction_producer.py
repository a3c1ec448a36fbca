"""TransactionProducer against real name server and broker processes: the producer that began a
transaction may die, another producer of its group settles it; the asyncio form; bad use is told."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import pytest

from rmq.client import LocalTransactionState, Message, TransactionProducer
from rmq.errors import ClientError
from tests.helpers import wait_until
from tests.helpers.transaction import Checks, bodies

SCRIPT = Path(__file__).parent / "scripts" / "transaction_then_hang.py"
COMMIT, ROLLBACK, UNKNOWN = LocalTransactionState.COMMIT, LocalTransactionState.ROLLBACK, LocalTransactionState.UNKNOWN


def test_a_new_producer_of_the_group_settles_what_a_killed_one_began(tx_cluster, spawn):
    topic = tx_cluster.create_topic("TxOrphan", queues=1)
    proc = spawn(str(SCRIPT), tx_cluster.namesrv_addr, topic, "tx-orphans", "orphan", stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # the half message is stored, its local transaction runs
    assert line.startswith("EXECUTING "), line
    uniq_key = line.split()[1]
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert bodies(tx_cluster, topic) == []
    checks = Checks({b"orphan": COMMIT})
    with TransactionProducer("tx-orphans", tx_cluster.namesrv_addr, execute=lambda m, a: COMMIT, check=checks):
        wait_until(lambda: bodies(tx_cluster, topic) == [b"orphan"], 20, "the orphan committed by its group")
    [(_, asked)] = checks.asked
    assert asked.msg_id == uniq_key and asked.topic == topic


def test_asyncio_form(tx_cluster):
    topic = tx_cluster.create_topic("TxAsync", queues=1)

    async def execute(msg, arg):
        await asyncio.sleep(0)
        return arg

    async def main(producer):
        committed = await producer.asend_message_in_transaction(Message(topic, b"a-commit"), COMMIT)
        rolled_back = await producer.asend_message_in_transaction(Message(topic, b"a-rollback"), ROLLBACK)
        return committed, rolled_back

    with TransactionProducer("tx-async", tx_cluster.namesrv_addr, execute=execute, check=Checks()) as producer:
        committed, rolled_back = asyncio.run(main(producer))
        assert committed.local_transaction_state is COMMIT and rolled_back.local_transaction_state is ROLLBACK
        # a plain function works from asyncio too, off the event loop
        producer.execute = lambda msg, arg: COMMIT
        sync_in_async = asyncio.run(producer.asend_message_in_transaction(Message(topic, b"a-sync")))
        assert sync_in_async.local_transaction_state is COMMIT
        wait_until(lambda: bodies(tx_cluster, topic) == [b"a-commit", b"a-sync"], 10, "the commits stored")


def test_bad_use_is_told(tx_cluster):
    topic = tx_cluster.create_topic("TxBadUse", queues=1)
    with TransactionProducer("tx-bad-use", tx_cluster.namesrv_addr, check=Checks()) as producer:
        with pytest.raises(ClientError, match="no execute function"):
            producer.send_message_in_transaction(Message(topic, b"x"))
        # an answer that is no state counts as UNKNOWN: the broker asks later
        producer.execute = lambda msg, arg: "COMMIT"
        result = producer.send_message_in_transaction(Message(topic, b"y"))
        assert result.local_transaction_state is UNKNOWN
    with pytest.raises(ClientError, match="check_thread_pool_size must be at least 1"):
        TransactionProducer("tx-bad-use", tx_cluster.namesrv_addr, check_thread_pool_size=0)
