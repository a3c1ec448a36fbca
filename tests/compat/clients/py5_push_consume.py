"""Consume with Apache's 5.x Python PushConsumer until COUNT messages were consumed or IDLE seconds
passed without one; one JSON line per message (its listener answers SUCCESS).

usage: python py5_push_consume.py ENDPOINT TOPIC GROUP FILTER COUNT IDLE
FILTER: a tag expression, or SQL92:<sql>.
"""

import sys
import threading
import time

from py5_client import configuration, emit, fail, filter_expression, message_line
from rocketmq import ConsumeResult, MessageListener, PushConsumer


class Record(MessageListener):
    def __init__(self):
        self.lock = threading.Lock()
        self.bodies = set()
        self.last = time.monotonic()

    def consume(self, message) -> ConsumeResult:
        line = message_line(message)
        with self.lock:
            self.bodies.add(line["body"])
            self.last = time.monotonic()
            emit(**line)
        return ConsumeResult.SUCCESS


def main() -> None:
    endpoint, topic, group, expression = sys.argv[1:5]
    count, idle = int(sys.argv[5]), float(sys.argv[6])
    listener = Record()
    consumer = PushConsumer(configuration(endpoint), group, listener, {topic: filter_expression(expression)})
    try:
        consumer.startup()
    except Exception as e:
        fail("startup", e)
    try:
        while True:
            with listener.lock:
                if len(listener.bodies) >= count or time.monotonic() - listener.last > idle:
                    break
            time.sleep(0.05)
    finally:
        consumer.shutdown()


if __name__ == "__main__":
    main()
