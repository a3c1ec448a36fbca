"""EndTransaction and the recovery of orphaned transactions (RocketMQ 5.x's EndTransactionActivity,
TransactionProcessor and GrpcClientChannel's check path).

A half message's send leaves what END_TRANSACTION needs of it (its queue offset and CommitLog
offset) in a table under (producer group, transaction id); the proxy's producer group is the topic.
EndTransaction finds it there and ends the transaction by END_TRANSACTION through the client's
channel: COMMIT (8), ROLLBACK (12), or NOT_TYPE (0) for an unspecified resolution, which leaves the
broker to check again. A transaction the table does not know (the endpoint restarted, or the id is
made up) is INVALID_TRANSACTION_ID (RocketMQ answers INTERNAL_SERVER_ERROR "cannot found
transaction data").

The broker's check of a transaction left open (CHECK_TRANSACTION_STATE, sent to a producer of the
group it registered under) reaches the client's LocalChannel; it becomes a
RecoverOrphanedTransactionCommand on the client's Telemetry stream, with the half message and its
transaction id, and the table learns the transaction from the check's header, so that the client's
EndTransaction (source SOURCE_SERVER_CHECK) finds it even when this endpoint never saw the send.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode
from rmq.protocol.grpc.v2 import service_pb2 as pb
from rmq.protocol.grpc.v2.definition_pb2 import Code, TransactionResolution, TransactionSource
from rmq.protocol.message import MessageProperty
from rmq.protocol.record import decode_record
from rmq.protocol.transaction import CheckTransactionStateHeader, EndTransactionHeader, TransactionState
from rmq.proxy.bridge import LocalChannel
from rmq.proxy.calls import BrokerCalls
from rmq.proxy.context import CallContext
from rmq.proxy.convert import grpc_message
from rmq.proxy.route import check_topic
from rmq.proxy.status import OK, ProxyError, check

log = logging.getLogger("rmq.proxy")

# How long a transaction's offsets are kept for its EndTransaction (the proxy's
# maxTransactionRecoverySecond is an hour; the broker's checks bring an entry back after that).
TRANSACTION_DATA_SECONDS = 3600.0
# past this many open transactions the expired ones are dropped at once
_PRUNE_AT = 100_000

_STATES = {
    TransactionResolution.COMMIT: TransactionState.COMMIT,
    TransactionResolution.ROLLBACK: TransactionState.ROLLBACK,
}


@dataclasses.dataclass(frozen=True)
class TransactionData:
    queue_offset: int
    commit_log_offset: int
    message_id: str
    expires: float


class TransactionTable:
    """(producer group, transaction id) -> a half message's offsets (rmq-grpc loop only)."""

    def __init__(self) -> None:
        self._table: dict[tuple[str, str], TransactionData] = {}

    def add(self, group: str, transaction_id: str, queue_offset: int, commit_log_offset: int, message_id: str) -> None:
        now = time.monotonic()
        if len(self._table) >= _PRUNE_AT:
            self._table = {k: v for k, v in self._table.items() if v.expires > now}
        self._table[(group, transaction_id)] = TransactionData(
            queue_offset, commit_log_offset, message_id, now + TRANSACTION_DATA_SECONDS
        )

    def pop(self, group: str, transaction_id: str) -> TransactionData | None:
        data = self._table.pop((group, transaction_id), None)
        if data is not None and data.expires < time.monotonic():
            return None
        return data

    def __len__(self) -> int:
        return len(self._table)


class TransactionService:
    def __init__(self, calls: BrokerCalls, table: TransactionTable):
        self.calls = calls
        self.table = table

    async def end_transaction(self, ctx: CallContext, request: pb.EndTransactionRequest) -> pb.EndTransactionResponse:
        topic = check_topic(request.topic)
        if not request.transaction_id.strip():
            raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        group = topic  # the proxy's producer group
        data = self.table.pop(group, request.transaction_id)
        if data is None:
            raise ProxyError(
                Code.INVALID_TRANSACTION_ID,
                f"cannot found transaction data: no open transaction {request.transaction_id!r} of topic {topic}",
            )
        header = EndTransactionHeader(
            producer_group=group,
            tran_state_table_offset=data.queue_offset,
            commit_log_offset=data.commit_log_offset,
            commit_or_rollback=_STATES.get(request.resolution, TransactionState.NOT_TYPE),
            from_transaction_check=request.source == TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=request.message_id or data.message_id,
            transaction_id=request.transaction_id,
        )
        remoting = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        try:
            check(await self.calls.for_client(ctx, remoting))
        except ProxyError:
            if header.commit_or_rollback == TransactionState.NOT_TYPE:
                raise
            # the broker still holds the half message: a retried EndTransaction may end it
            self.table.add(group, request.transaction_id, data.queue_offset, data.commit_log_offset, data.message_id)
            raise
        if header.commit_or_rollback == TransactionState.NOT_TYPE:  # still open: the next check brings it back
            self.table.add(group, request.transaction_id, data.queue_offset, data.commit_log_offset, data.message_id)
        return pb.EndTransactionResponse(status=OK)

    def recovery_command(self, channel: LocalChannel, request: RemotingCommand) -> pb.TelemetryCommand | None:
        """What the broker's CHECK_TRANSACTION_STATE becomes on the client's stream; None (logged)
        for a request that is no check or cannot be read."""
        if request.code != RequestCode.CHECK_TRANSACTION_STATE:
            # NOTIFY_CONSUMER_IDS_CHANGED and the like: a 5.x consumer pops, it has nothing to rebalance
            log.debug("request code %d for gRPC client %s has no 5.x form: dropped", request.code, channel.client_id)
            return None
        try:
            header = CheckTransactionStateHeader.from_ext_fields(request.ext_fields)
            half = decode_record(body_bytes(request.body), check_crc=False)
        except Exception as e:
            log.error("transaction check for %s cannot be read: %s", channel.client_id, e)
            return None
        group = half.properties.get(MessageProperty.PRODUCER_GROUP, half.topic)
        message_id = half.properties.get(MessageProperty.UNIQ_KEY) or header.msg_id or half.msg_id
        transaction_id = header.transaction_id or message_id
        self.table.add(group, transaction_id, header.tran_state_table_offset, header.commit_log_offset, message_id)
        command = pb.RecoverOrphanedTransactionCommand(message=grpc_message(half), transaction_id=transaction_id)
        return pb.TelemetryCommand(status=OK, recover_orphaned_transaction_command=command)


__all__ = ["TransactionData", "TransactionService", "TransactionTable"]
