"""Bodies of the admin requests whose tables are keyed by MessageQueue, as RocketMQ writes them.

Java's fastjson writes a ``Map<MessageQueue, V>`` with the queue *object* as the key, which is not
standard JSON; Java tools (mqadmin) and clients read only that form:

    TopicStatsTable  (GET_TOPIC_STATS_INFO 202)
        {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":..,"maxOffset":..,"minOffset":..}}}
    ConsumeStats     (GET_CONSUME_STATS 208)
        {"consumeTps":0.0,"offsetTable":{{mq}:{"brokerOffset":..,"consumerOffset":..,"lastTimestamp":..}}}
    ResetOffsetBody  (INVOKE_BROKER_TO_RESET_OFFSET 222 reply, RESET_CONSUMER_CLIENT_OFFSET 220)
        {"offsetTable":{{mq}:<offset>}}
    ResetOffsetBodyForC (220 to C++ clients)
        {"offsetTable":[{"brokerName":"b","queueId":0,"topic":"T","offset":12}]}

Queue keys are written with fastjson's (alphabetical) field order. ``loads_mq_tables`` reads the
form back for rmq-admin: every object used as a key becomes a MessageQueue.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from rmq.protocol.message_queue import MessageQueue

_COMPACT = (",", ":")
# An object used as a map key: `{` or `,`, then a brace-free object, then `:`. Topic and broker
# names cannot hold braces, so a queue object never contains one.
_OBJECT_KEY = re.compile(r"(?<=[{,])\s*(\{[^{}]*\})\s*:")


def mq_key(mq: MessageQueue) -> str:
    return json.dumps({"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic},
                      separators=_COMPACT)


def dumps_mq_table(table: Mapping[MessageQueue, Any]) -> str:
    """``{mq: value}`` in fastjson's form (queues in order)."""
    return "{" + ",".join(f"{mq_key(mq)}:{json.dumps(value, separators=_COMPACT)}"
                          for mq, value in sorted(table.items())) + "}"


def encode_with_mq_tables(fields: Mapping[str, Any], tables: Mapping[str, Mapping[MessageQueue, Any]]) -> bytes:
    """A JSON object of plain ``fields`` and MessageQueue-keyed ``tables``."""
    parts = [f"{json.dumps(k)}:{json.dumps(v, separators=_COMPACT)}" for k, v in fields.items()]
    parts += [f"{json.dumps(k)}:{dumps_mq_table(t)}" for k, t in tables.items()]
    return ("{" + ",".join(parts) + "}").encode()


def loads_mq_tables(data: bytes | str) -> dict[str, Any]:
    """Parse a body of the forms above: maps keyed by queue objects come back as
    ``{MessageQueue: value}``; everything else as plain JSON."""
    text = data.decode() if isinstance(data, (bytes, bytearray, memoryview)) else data
    quoted = _OBJECT_KEY.sub(lambda m: json.dumps(m.group(1)) + ":", text)
    return _queue_keys(json.loads(quoted))


def _queue_keys(value: Any) -> Any:
    if isinstance(value, dict):
        converted = {}
        for key, item in value.items():
            if key.startswith("{"):
                key = MessageQueue.from_json(json.loads(key))
            converted[key] = _queue_keys(item)
        return converted
    if isinstance(value, list):
        return [_queue_keys(item) for item in value]
    return value


def encode_reset_offset_body_for_c(offsets: Mapping[MessageQueue, int]) -> bytes:
    return json.dumps({"offsetTable": [
        {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic, "offset": offset}
        for mq, offset in sorted(offsets.items())]}, separators=_COMPACT).encode()
