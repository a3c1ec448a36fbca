"""Receive with Apache's 5.x Python SimpleConsumer until COUNT messages were acked (received, with
"ack": "none") or IDLE seconds passed without one; one JSON line per delivery and per ack.

usage: python py5_simple_consume.py ENDPOINT TOPIC GROUP COUNT IDLE [OPTIONS_JSON]
COUNT 0 and "until_closed": true: run until standard input closes, acking all (the crash test).
OPTIONS_JSON (all optional): "filter" (a tag expression, or SQL92:<sql>; "*"), "batch" (max
messages a receive, 16), "invisible" (seconds a received message stays invisible, 15), "await"
(the long-polling wait of a receive, seconds, 2), "ack": "all" (default), "none", or "retry-first"
(a first delivery is not acked: its invisible duration is changed to "retry_after" seconds (1), so
it comes back with delivery attempt 2, which is acked). "leave_first": bodies ending so (a list) are
not acked on their first delivery (they come back once their invisible duration passed);
"count_left": true counts such a delivery toward COUNT (the run ends only once they were received).
Lines: {"delivered": ...message...}, {"acked": msgId, "body"}, {"changed": msgId, "body"}, and
{"failed": "receive"|"ack"|"change", "error"} for a request that failed (it goes on).
"""

import json
import sys
import threading
import time

from py5_client import configuration, emit, fail, filter_expression, message_line
from rocketmq import SimpleConsumer


def main() -> None:
    endpoint, topic, group, count, idle = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    options = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    mode = options.get("ack", "all")
    closed = threading.Event()
    if options.get("until_closed"):
        threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    consumer = SimpleConsumer(
        configuration(endpoint),
        group,
        {topic: filter_expression(options.get("filter", "*"))},
        await_duration=options.get("await", 2),
    )
    try:
        consumer.startup()
    except Exception as e:
        fail("startup", e)
    done, last = set(), time.monotonic()
    try:
        while not closed.is_set():
            if count and len(done) >= count:
                break
            if not options.get("until_closed") and time.monotonic() - last > idle:
                break
            try:
                messages = consumer.receive(options.get("batch", 16), options.get("invisible", 15))
            except Exception as e:
                emit(failed="receive", error=f"{type(e).__name__}: {e}")
                time.sleep(0.2)
                continue
            for message in messages or ():
                last = time.monotonic()
                line = message_line(message)
                emit(delivered=line["body"], **line)
                if mode == "none":
                    done.add(line["body"])
                elif message.delivery_attempt <= 1 and line["body"].endswith(tuple(options.get("leave_first", ()))):
                    emit(left=message.message_id, body=line["body"])
                    if options.get("count_left"):
                        done.add(line["body"])
                elif mode == "retry-first" and message.delivery_attempt <= 1:
                    try:
                        consumer.change_invisible_duration(message, options.get("retry_after", 1))
                        emit(changed=message.message_id, body=line["body"])
                    except Exception as e:
                        emit(failed="change", error=f"{type(e).__name__}: {e}", body=line["body"])
                else:
                    try:
                        consumer.ack(message)
                    except Exception as e:
                        emit(failed="ack", error=f"{type(e).__name__}: {e}", body=line["body"])
                        continue
                    emit(acked=message.message_id, body=line["body"], at=time.time())
                    done.add(line["body"])
    finally:
        consumer.shutdown()


if __name__ == "__main__":
    main()
