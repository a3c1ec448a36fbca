"""Transactional messages with Apache's 5.x Python client and a TransactionChecker.

usage: python py5_transaction.py ENDPOINT TOPIC COUNT WAIT_SECONDS
Message i (body tx-body-<i>) is sent as a half message; i % 3 == 0 is committed, i % 3 == 1 rolled
back, i % 3 == 2 left open: the broker's transaction check reaches the producer down its Telemetry
stream (a RecoverOrphanedTransactionCommand) and the checker commits it. One JSON line per send
({"sent", "msgId", "txId", "decision"}) and per check ({"checked", "msgId"}); it ends once each open
message was checked or WAIT_SECONDS passed.
"""

import sys
import threading
import time

from py5_client import configuration, emit, fail
from rocketmq import Message, Producer, TransactionChecker, TransactionResolution


class CommitWhatIsChecked(TransactionChecker):
    def __init__(self):
        self.checked = set()
        self.lock = threading.Lock()

    def check(self, message: Message) -> TransactionResolution:
        body = message.body.decode()
        with self.lock:
            self.checked.add(body)
        emit(checked=body, msgId=message.message_id)
        return TransactionResolution.COMMIT


def main() -> None:
    endpoint, topic, count, wait = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    checker = CommitWhatIsChecked()
    producer = Producer(configuration(endpoint), (topic,), checker=checker)
    try:
        producer.startup()
    except Exception as e:
        fail("startup", e)
    try:
        open_bodies = set()
        for i in range(count):
            transaction = producer.begin_transaction()
            msg = Message()
            msg.topic = topic
            msg.body = f"tx-body-{i}".encode()
            msg.tag = "Tx"
            msg.keys = f"tx-key-{i}"
            try:
                receipt = producer.send(msg, transaction)
                decision = ("commit", "rollback", "open")[i % 3]
                if decision == "commit":
                    transaction.commit()
                elif decision == "rollback":
                    transaction.rollback()
                else:
                    open_bodies.add(f"tx-body-{i}")
            except Exception as e:
                fail(f"transaction {i}", e)
            emit(sent=f"tx-body-{i}", msgId=receipt.message_id, txId=receipt.transaction_id, decision=decision)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with checker.lock:
                if open_bodies <= checker.checked:
                    break
            time.sleep(0.1)
        time.sleep(0.5)  # the checker's answer (EndTransaction) goes out after check() returns
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main()
