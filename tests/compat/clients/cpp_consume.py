"""Consume with PyPI rocketmq==0.4.4 until COUNT messages arrived or IDLE seconds passed without one.

usage: python cpp_consume.py NAMESRV TOPIC GROUP SUB_EXPRESSION COUNT IDLE_SECONDS
One JSON line per message. The C++ push consumer of a new group starts from the last offset, so
messages sent before its first start are delivered only thanks to the broker's "offset 0 for a new
group" answer (docs/protocol.md#consumer-offsets-and-queue-queries).
"""

import json
import os
import sys
import threading
import time

from rocketmq.client import PushConsumer


def main() -> None:
    namesrv, topic, group, expression, count, idle = sys.argv[1:7]
    count, idle = int(count), float(idle)
    lock = threading.Lock()
    state = {"received": 0, "last": time.monotonic()}

    def on_message(msg) -> None:
        line = json.dumps(
            {
                "body": msg.body.decode(),
                "tags": msg.tags.decode() if isinstance(msg.tags, bytes) else msg.tags,
                "keys": msg.keys.decode() if isinstance(msg.keys, bytes) else msg.keys,
                "msgId": msg.id,
                "topic": msg.topic,
                "queueId": msg.queue_id,
                "queueOffset": msg.queue_offset,
                "reconsumeTimes": msg.reconsume_times,
            }
        )
        with lock:
            state["received"] += 1
            state["last"] = time.monotonic()
            print(line, flush=True)

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    if os.environ.get("ACL_ACCESS_KEY"):  # sign every request for a broker with aclEnable
        consumer.set_session_credentials(os.environ["ACL_ACCESS_KEY"], os.environ["ACL_SECRET_KEY"], "ALIYUN")
    consumer.subscribe(topic, on_message, expression)
    consumer.start()
    try:
        while True:
            with lock:
                if state["received"] >= count or time.monotonic() - state["last"] > idle:
                    break
            time.sleep(0.05)
    finally:
        consumer.shutdown()


if __name__ == "__main__":
    main()
