"""Bodies of the admin requests whose tables are keyed by MessageQueue, as RocketMQ writes them
(Java tools and clients read only fastjson's queue-object keys; ``rmq.protocol.java_json`` has them):

    TopicStatsTable  (GET_TOPIC_STATS_INFO 202)
        {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":..,"maxOffset":..,"minOffset":..}}}
    ConsumeStats     (GET_CONSUME_STATS 208)
        {"consumeTps":0.0,"offsetTable":{{mq}:{"brokerOffset":..,"consumerOffset":..,"lastTimestamp":..}}}
    ResetOffsetBody  (INVOKE_BROKER_TO_RESET_OFFSET 222 reply, RESET_CONSUMER_CLIENT_OFFSET 220)
        {"offsetTable":{{mq}:<offset>}}
    ResetOffsetBodyForC (220 to C++ clients)
        {"offsetTable":[{"brokerName":"b","queueId":0,"topic":"T","offset":12}]}

The broker writes them, the admin client reads them back with ``java_json.loads_mq_tables``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rmq.protocol.java_json import COMPACT, dumps_mq_table
from rmq.protocol.message_queue import MessageQueue


def encode_with_mq_tables(fields: Mapping[str, Any], tables: Mapping[str, Mapping[MessageQueue, Any]]) -> bytes:
    """A JSON object of plain ``fields`` and MessageQueue-keyed ``tables``."""
    parts = [f"{json.dumps(k)}:{json.dumps(v, separators=COMPACT)}" for k, v in fields.items()]
    parts += [f"{json.dumps(k)}:{dumps_mq_table(t)}" for k, t in tables.items()]
    return ("{" + ",".join(parts) + "}").encode()


def encode_reset_offset_body_for_c(offsets: Mapping[MessageQueue, int]) -> bytes:
    return json.dumps(
        {
            "offsetTable": [
                {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic, "offset": offset}
                for mq, offset in sorted(offsets.items())
            ]
        },
        separators=COMPACT,
    ).encode()
