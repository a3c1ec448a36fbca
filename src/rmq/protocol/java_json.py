"""JSON as Java peers write it (fastjson), both directions. Two quirks are not standard JSON:

    integer map keys left unquoted          {0:"127.0.0.1:10911"}                 (routes, offset files)
    objects used as map keys                {{"brokerName":"b","queueId":0,"topic":"T"}:12}
                                            (a Map<MessageQueue, V>: admin bodies)

``loads_java_json`` reads the first, ``loads_mq_tables`` both (queue keys come back as MessageQueue),
``dumps_mq_table`` writes the second the way Java tools (mqadmin) and clients read it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rmq.protocol.message_queue import MessageQueue

COMPACT = (",", ":")
# An integer key left unquoted by fastjson: `{0:12,` or `, 3:` (names never contain { , :).
_BARE_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")
# An object used as a map key: `{` or `,`, then a brace-free object, then `:`. Topic and broker
# names cannot hold braces, so a queue object never contains one.
_OBJECT_KEY = re.compile(r"(?<=[{,])\s*(\{[^{}]*\})\s*:")


def loads_java_json(text: str) -> Any:
    """``json.loads`` that also accepts fastjson's unquoted integer map keys."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        quoted = _BARE_INT_KEY.sub(r'\1"\2"\3', text)
        if quoted == text:
            raise
        return json.loads(quoted)


def mq_key(mq: MessageQueue) -> str:
    """A queue as fastjson writes it when it is a map key (fields in alphabetical order)."""
    return json.dumps({"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}, separators=COMPACT)


def dumps_mq_table(table: Mapping[MessageQueue, Any]) -> str:
    """``{mq: value}`` in fastjson's form (queues in order)."""
    return (
        "{"
        + ",".join(f"{mq_key(mq)}:{json.dumps(value, separators=COMPACT)}" for mq, value in sorted(table.items()))
        + "}"
    )


def loads_mq_tables(data: bytes | str) -> dict[str, Any]:
    """Parse JSON in which maps may be keyed by queue objects: those come back as
    ``{MessageQueue: value}``; everything else as plain JSON."""
    text = data.decode() if isinstance(data, (bytes, bytearray, memoryview)) else data
    quoted = _OBJECT_KEY.sub(lambda m: json.dumps(m.group(1)) + ":", text)
    tables: dict[str, Any] = _queue_keys(json.loads(quoted))
    return tables


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
