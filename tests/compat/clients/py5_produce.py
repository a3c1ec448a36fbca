"""Send COUNT messages with Apache's 5.x Python client; one JSON line per send.

usage: python py5_produce.py ENDPOINT TOPIC COUNT [OPTIONS_JSON]
OPTIONS_JSON (all optional): "prefix" (bodies <prefix>-body-<i>, keys <prefix>-key-<i>; "py5"),
"tags" (message i gets tags[i % len]), "groups" (FIFO: message i in message group g<i % groups>),
"delay" (seconds from now: a DELAY message), "properties" (user properties of every message).
A send that fails ends the script with exit status 3 and the client's exception on stderr.
"""

import json
import sys
import time

from py5_client import configuration, emit, fail
from rocketmq import Message, Producer


def main() -> None:
    endpoint, topic, count = sys.argv[1:4]
    options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    prefix = options.get("prefix", "py5")
    tags = options.get("tags", ["TagA"])
    producer = Producer(configuration(endpoint), (topic,))
    try:
        producer.startup()
    except Exception as e:
        fail("startup", e)
    try:
        for i in range(int(count)):
            msg = Message()
            msg.topic = topic
            msg.body = f"{prefix}-body-{i}".encode()
            msg.tag = tags[i % len(tags)]
            msg.keys = f"{prefix}-key-{i}"
            for key, value in options.get("properties", {}).items():
                msg.add_property(key, value)
            msg.add_property("i", str(i))
            if "groups" in options:
                msg.message_group = f"g{i % options['groups']}"
            if "delay" in options:
                msg.delivery_timestamp = int(time.time() + options["delay"])
            try:
                receipt = producer.send(msg)
            except Exception as e:
                fail(f"send {i}", e)
            emit(i=i, body=f"{prefix}-body-{i}", msgId=receipt.message_id, offset=receipt.offset, sent=time.time())
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main()
