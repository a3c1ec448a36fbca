"""Send COUNT messages with PyPI rocketmq==0.4.4 (the C++ RocketMQ client); one JSON line per send.

usage: python cpp_produce.py NAMESRV TOPIC GROUP COUNT TAGS_CSV [PREFIX]
Runs in its own virtual environment (the package installs a top-level ``rocketmq``).
"""

import json
import os
import sys

from rocketmq.client import Message, Producer


def main() -> None:
    namesrv, topic, group, count, tags_csv = sys.argv[1:6]
    prefix = sys.argv[6] if len(sys.argv) > 6 else "cpp"
    tags = tags_csv.split(",")
    producer = Producer(group)
    producer.set_namesrv_addr(namesrv)
    if os.environ.get("ACL_ACCESS_KEY"):  # sign every request for a broker with aclEnable
        producer.set_session_credentials(os.environ["ACL_ACCESS_KEY"], os.environ["ACL_SECRET_KEY"], "ALIYUN")
    producer.start()
    try:
        for i in range(int(count)):
            msg = Message(topic)
            msg.set_tags(tags[i % len(tags)])
            msg.set_keys(f"{prefix}-key-{i}")
            msg.set_body(f"{prefix}-body-{i}")
            result = producer.send_sync(msg)
            print(
                json.dumps({"i": i, "status": int(result.status), "msgId": result.msg_id, "offset": result.offset}),
                flush=True,
            )
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main()
