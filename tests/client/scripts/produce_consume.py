"""Run as a process of its own by tests/client/test_client_footprint.py: a producer and a push
consumer, nothing else, then print which rmq modules the process loaded (one per line)."""

import sys
import threading

from rmq.client import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer

namesrv, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
got: list[bytes] = []
done = threading.Event()


def on_messages(msgs):
    got.extend(m.body for m in msgs)
    if len(got) >= count:
        done.set()
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


with Producer("footprint-producers", namesrv_addr=namesrv) as producer:
    for i in range(count):
        producer.send(Message(topic, f"m{i}".encode(), tags="TagA"))
consumer = PushConsumer("footprint-consumers", namesrv, consume_from_where="FIRST_OFFSET", rebalance_interval=1.0)
consumer.subscribe(topic, "TagA")
consumer.register_listener(on_messages)
consumer.start()
try:
    if not done.wait(30):
        sys.exit(f"consumed {len(got)} of {count} within 30 s")
finally:
    consumer.shutdown()
assert sorted(got) == sorted(f"m{i}".encode() for i in range(count)), got
print("\n".join(sorted(name for name in sys.modules if name.startswith("rmq"))))
