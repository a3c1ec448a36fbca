"""What sends and pulls return, and the statuses listeners answer with (RocketMQ's names)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmq.protocol.heartbeat import ConsumeFromWhere, MessageModel
from rmq.protocol.message_queue import MessageQueue

if TYPE_CHECKING:
    from rmq.client.message import MessageExt

__all__ = [
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "MessageModel",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
]


class SendStatus(enum.Enum):
    """SEND_OK, or stored but degraded (the message is on the master; a flush or a slave lagged)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)  # one per send, often kept: no instance dict for the collector to walk
class SendResult:
    """``msg_id`` is the client-side id (UNIQ_KEY; comma-joined for a batch), ``offset_msg_id`` the
    broker's (store host + commit-log offset)."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is SendStatus.SEND_OK


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


class ConsumeConcurrentlyStatus(enum.Enum):
    """What a concurrent listener answers: done, or deliver again later (via the retry topic)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """What an orderly listener answers: done, or stop this queue a moment and retry the same batch."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"
