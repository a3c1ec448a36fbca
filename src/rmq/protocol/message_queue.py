"""A message queue (topic, broker name, queue id) and the LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies.

request  {"consumerGroup", "clientId", "mqSet": [{"topic", "brokerName", "queueId"}]}
response {"lockOKMQSet": [{"topic", "brokerName", "queueId"}]}
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode


@dataclasses.dataclass(frozen=True, order=True, slots=True)  # one in every SendResult: no dict each
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json(cls, obj: Any) -> MessageQueue:
        return cls(str(obj["topic"]), str(obj["brokerName"]), int(obj["queueId"]))


@dataclasses.dataclass
class LockBatchRequest:
    consumer_group: str
    client_id: str
    mqs: set[MessageQueue]


def parse_lock_batch_body(body: bytes | str | None) -> LockBatchRequest:
    """The body of LOCK_BATCH_MQ / UNLOCK_BATCH_MQ; raises RequestRefused (SYSTEM_ERROR)."""
    try:
        obj = json.loads(body or b"")
        return LockBatchRequest(
            str(obj["consumerGroup"]),
            str(obj["clientId"]),
            {MessageQueue.from_json(mq) for mq in obj.get("mqSet") or []},
        )
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, f"malformed lock request body: {type(e).__name__}: {e}"
        ) from None


def encode_lock_batch_result(locked: Iterable[MessageQueue]) -> bytes:
    return json.dumps({"lockOKMQSet": [mq.to_json() for mq in sorted(locked)]}).encode()
