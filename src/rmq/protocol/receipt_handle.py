"""The receipt handle a 5.x client gets with each received message (SystemProperties.receipt_handle)
and hands back to ack it, change its invisible time or forward it to the DLQ: RocketMQ's proxy
ReceiptHandle, the message's POP_CK extraInfo (rmq.protocol.pop) with the message's CommitLog offset
appended, KEY_SEPARATOR " " between the fields::

    ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId msgQueueOffset commitLogOffset
    0             1       2             3         4     5          6       7              8

The client treats it as opaque; the proxy reads the broker, queue and offset from it, and the
commitLogOffset is what CONSUMER_SEND_MSG_BACK needs to forward the message to the DLQ. It expires at
popTime + invisibleTime: a handle past it is answered INVALID_RECEIPT_HANDLE without asking the
broker (its message may already be on its way back to a consumer).
"""

from __future__ import annotations

import dataclasses

from rmq.protocol.fields import BadRequest
from rmq.protocol.message import KEY_SEPARATOR
from rmq.protocol.pop import ExtraInfo

_FIELDS = "ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId msgQueueOffset [commitLogOffset]"


@dataclasses.dataclass(frozen=True)
class ReceiptHandle:
    extra_info: ExtraInfo
    commit_log_offset: int = -1

    @property
    def next_visible_time(self) -> int:
        return self.extra_info.pop_time + self.extra_info.invisible_time

    def is_expired(self, now_ms: int) -> bool:
        return self.next_visible_time <= now_ms

    def encode(self) -> str:
        return self.extra_info.encode() + KEY_SEPARATOR + str(self.commit_log_offset)

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """BadRequest saying what is wrong when ``text`` is not a handle the proxy handed out."""
        parts = text.split(KEY_SEPARATOR)
        if not 8 <= len(parts) <= 9:
            raise BadRequest(f"receipt handle {text!r} has {len(parts)} fields, expected {_FIELDS}")
        try:
            extra_info = ExtraInfo.decode(KEY_SEPARATOR.join(parts[:8]))
            commit_log_offset = int(parts[8]) if len(parts) == 9 else -1
        except (BadRequest, ValueError) as e:
            raise BadRequest(f"receipt handle {text!r} is not {_FIELDS}: {e}") from None
        return cls(extra_info, commit_log_offset)
