"""Send with PyPI rocketmq==0.4.4 (the C++ RocketMQ client) one message after another until standard
input closes, each failure included: {"started": <ms>} once the producer started, one JSON line per
send, then {"done": <sends>}.

usage: python cpp_send_steadily.py NAMESRV TOPIC GROUP PREFIX PAUSE_MS
Send i carries key "<PREFIX>-key-<i>" and body "<PREFIX>-body-<i>" and is never sent again: a failed
send is reported ({"i", "ok": false, "error"}) and the next one goes on. "at" is the wall clock in ms
when the answer came (the C++ client's own retries are inside one send).
"""

import json
import sys
import threading
import time

from rocketmq.client import Message, Producer


def millis() -> int:
    return int(time.time() * 1000)


def main() -> None:
    namesrv, topic, group, prefix, pause_ms = sys.argv[1:6]
    closed = threading.Event()

    def watch_stdin() -> None:
        while sys.stdin.read(4096):
            pass
        closed.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    producer = Producer(group)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    print(json.dumps({"started": millis()}), flush=True)
    i = 0
    try:
        while not closed.is_set():
            msg = Message(topic)
            msg.set_tags("TagA")
            key = f"{prefix}-key-{i}"
            msg.set_keys(key)
            msg.set_body(f"{prefix}-body-{i}")
            try:
                result = producer.send_sync(msg)
            except Exception as e:  # the wrapper raises its own exception types, one per C error code
                line = {"i": i, "key": key, "ok": False, "at": millis(), "error": f"{type(e).__name__}: {e}"[:200]}
            else:
                line = {"i": i, "key": key, "ok": int(result.status) == 0, "at": millis(), "status": int(result.status)}
                line["offset"] = result.offset
            print(json.dumps(line), flush=True)
            i += 1
            closed.wait(int(pause_ms) / 1000)
        print(json.dumps({"done": i}), flush=True)
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main()
