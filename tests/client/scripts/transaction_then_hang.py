"""Run as a process of its own by tests/client/test_transaction_producer.py: a transactional
producer that sends one half message, says so, and hangs in its local transaction until killed
(at most 60 s)."""

import sys
import time

from rmq.client import Message, TransactionProducer

namesrv, topic, group, body = sys.argv[1:5]


def execute(msg, arg):
    print(f"EXECUTING {msg.uniq_key}", flush=True)
    time.sleep(60)


with TransactionProducer(group, namesrv, execute=execute) as producer:
    producer.send_message_in_transaction(Message(topic, body.encode()))
