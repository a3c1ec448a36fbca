"""Transactional messages as producers and brokers share them (docs/messaging.md#transactions; RocketMQ 4.x's
EndTransactionRequestHeader, CheckTransactionStateRequestHeader and TransactionalMessageUtil).

    END_TRANSACTION (37), producer -> broker, oneway        CHECK_TRANSACTION_STATE (39), broker -> producer, oneway
      producerGroup         the half message's PGROUP         tranStateTableOffset  queue offset of the half message
      tranStateTableOffset  its queue offset (half topic)     commitLogOffset       its CommitLog offset
      commitLogOffset       its CommitLog offset              msgId                 its UNIQ_KEY
      commitOrRollback      0 NOT_TYPE, 8 COMMIT, 12 ROLLBACK transactionId         its UNIQ_KEY
      fromTransactionCheck  true when it answers a check      offsetMsgId           its broker msgId
      msgId, transactionId  the message's UNIQ_KEY            body: the half message as a stored record
                                                              (rmq.protocol.record), with its real topic and queue

A half message waits in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC / REAL_QID in its
properties and its sysFlag's transaction bits cleared. Ending it writes an op record to
RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0: tag ``d``, body the half message's queue offset as decimal
ASCII. The broker's checker keeps its progress in both queues as consumer offsets of the group
``CID_RMQ_SYS_TRANS``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from rmq.protocol.fields import int_field, str_field
from rmq.protocol.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageProperty, MessageSysFlag

# The consumer group whose offsets in the half and op queues are the checker's progress
# (RocketMQ's MixAll.CID_SYS_RMQ_TRANS).
TRANSACTION_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
# The tag of an op record: the half message at the body's offset is done (committed or rolled back).
OP_REMOVE_TAG = "d"
# The half and op topics have one queue each; an op record goes to the op queue of its half queue.
HALF_QUEUE_ID = 0
# A half message past transactionCheckMax checks goes to TRANS_CHECK_MAX_TIME_TOPIC's one queue.
CHECK_MAX_TIME_QUEUE_NUMS = 1


class TransactionState(enum.IntEnum):
    """``commitOrRollback``: the sysFlag transaction type a producer ends a transaction with."""

    NOT_TYPE = MessageSysFlag.TRANSACTION_NOT_TYPE  # unknown yet: the broker asks again later
    COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
    ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


# What a prepared message's encoded properties hold (Java's producer writes "true").
PREPARED_MARK = MessageProperty.TRANSACTION_PREPARED + NAME_VALUE_SEPARATOR + "true"


def is_prepared(properties: str) -> bool:
    """Whether encoded properties say TRAN_MSG=true: a half message. Senders test
    ``PREPARED_MARK in properties`` first (cheap); this rules out a key or value that only ends or
    starts with those characters."""
    start = properties.find(PREPARED_MARK)
    while start >= 0:
        end = start + len(PREPARED_MARK)
        if (start == 0 or properties[start - 1] == PROPERTY_SEPARATOR) and (
            end == len(properties) or properties[end] == PROPERTY_SEPARATOR
        ):
            return True
        start = properties.find(PREPARED_MARK, start + 1)
    return False


def reset_transaction_value(sys_flag: int, transaction_type: int) -> int:
    """``sys_flag`` with its transaction bits set to ``transaction_type`` (MessageSysFlag's)."""
    return (sys_flag & ~MessageSysFlag.TRANSACTION_MASK) | transaction_type


def encode_op_body(half_queue_offset: int) -> bytes:
    return str(half_queue_offset).encode()


def decode_op_body(body: bytes) -> int | None:
    """The half queue offset an op record names, None when its body is no integer."""
    try:
        return int(body.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class EndTransactionHeader:
    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    from_transaction_check: bool = False
    msg_id: str = ""
    transaction_id: str | None = None

    def to_ext_fields(self) -> dict[str, str]:
        return _ext_fields(
            producerGroup=self.producer_group,
            tranStateTableOffset=self.tran_state_table_offset,
            commitLogOffset=self.commit_log_offset,
            commitOrRollback=self.commit_or_rollback,
            fromTransactionCheck="true" if self.from_transaction_check else "false",
            msgId=self.msg_id,
            transactionId=self.transaction_id,
        )

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> EndTransactionHeader:
        """The header of a request; BadRequest naming a missing or malformed field."""
        return cls(
            str_field(ext, "producerGroup"),
            int_field(ext, "tranStateTableOffset"),
            int_field(ext, "commitLogOffset"),
            int_field(ext, "commitOrRollback"),
            _java_boolean(ext.get("fromTransactionCheck")),
            ext.get("msgId", ""),
            ext.get("transactionId"),
        )


@dataclasses.dataclass(frozen=True)
class CheckTransactionStateHeader:
    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None

    def to_ext_fields(self) -> dict[str, str]:
        return _ext_fields(
            tranStateTableOffset=self.tran_state_table_offset,
            commitLogOffset=self.commit_log_offset,
            msgId=self.msg_id,
            transactionId=self.transaction_id,
            offsetMsgId=self.offset_msg_id,
        )

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> CheckTransactionStateHeader:
        return cls(
            int_field(ext, "tranStateTableOffset"),
            int_field(ext, "commitLogOffset"),
            ext.get("msgId"),
            ext.get("transactionId"),
            ext.get("offsetMsgId"),
        )


def _java_boolean(value: str | None) -> bool:
    """A Boolean header field as Java's broker reads it (Boolean.parseBoolean: anything but "true"
    is false), except that the C++ client's "1" (it streams a bool) is taken for the true it means."""
    return value is not None and value.strip().lower() in ("true", "1")


def _ext_fields(**fields: object) -> dict[str, str]:
    """Header fields as strings; a None field is left out (Java sends no null fields)."""
    return {name: str(value) for name, value in fields.items() if value is not None}
