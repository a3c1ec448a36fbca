"""The transactional producer (RocketMQ's TransactionMQProducer): a message that is delivered only
if a local transaction commits.

    from rmq.client import LocalTransactionState, Message, TransactionProducer

    def execute(msg, arg):                 # the local transaction, run after the half message is stored
        db.insert_order(arg)
        return LocalTransactionState.COMMIT  # or ROLLBACK, or UNKNOWN: the broker asks check() later

    def check(msg):                        # the broker asks about a transaction left UNKNOWN (or lost)
        return LocalTransactionState.COMMIT if db.has_order(msg.keys[0]) else LocalTransactionState.ROLLBACK

    with TransactionProducer("order-tx", "127.0.0.1:9876", execute=execute, check=check) as producer:
        result = producer.send_message_in_transaction(Message("OrderTopic", b"...", keys="order-7"), arg=order)
        print(result.local_transaction_state)
        # from asyncio code (``execute`` may then be a coroutine function)
        result = await producer.asend_message_in_transaction(Message("OrderTopic", b"..."), arg=order)

As Java does: the message goes as a half message (properties TRAN_MSG=true, PGROUP), invisible to
consumers; ``execute`` runs once it is stored (an exception means UNKNOWN); END_TRANSACTION goes to
the broker oneway. A half message stored only degraded (FLUSH_DISK_TIMEOUT...) is rolled back. The
broker asks about transactions without an answer after transactionTimeOut with
CHECK_TRANSACTION_STATE; ``check`` answers on a small pool of threads (``check_thread_pool_size``),
from any producer of the group, which is how a transaction outlives the process that began it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rmq.client.message import Message, MessageExt
from rmq.client.producer import Producer
from rmq.client.results import SendResult, SendStatus
from rmq.client.route import TopicPublishInfo
from rmq.errors import ClientError, RemotingError
from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode
from rmq.protocol.message import MessageProperty
from rmq.protocol.record import decode_msg_id
from rmq.protocol.transaction import CheckTransactionStateHeader, EndTransactionHeader, TransactionState
from rmq.settings import DEFAULT_NAMESRV_ADDR

log = logging.getLogger("rmq.client")

__all__ = ["LocalTransactionState", "TransactionProducer", "TransactionSendResult"]

# Check requests waiting for the pool at most; more are dropped (the broker asks again next round),
# as Java's checkRequestHoldMax.
CHECK_REQUEST_HOLD_MAX = 2000


class LocalTransactionState(enum.Enum):
    """What ``execute`` and ``check`` answer (Java's LocalTransactionState; UNKNOW there)."""

    COMMIT = TransactionState.COMMIT
    ROLLBACK = TransactionState.ROLLBACK
    UNKNOWN = TransactionState.NOT_TYPE


@dataclass
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOWN


Execute = Callable[[Message, Any], "LocalTransactionState | None | Awaitable[LocalTransactionState | None]"]
Check = Callable[[MessageExt], "LocalTransactionState | None"]


class TransactionProducer(Producer):
    """A Producer that also sends messages in transactions; options as Producer's, plus
    ``check_thread_pool_size`` (default 1, as Java)."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str = DEFAULT_NAMESRV_ADDR,
        *,
        execute: Execute | None = None,
        check: Check | None = None,
        check_thread_pool_size: int = 1,
        **options: Any,
    ):
        super().__init__(group, namesrv_addr, **options)
        if check_thread_pool_size < 1:
            raise ClientError(f"check_thread_pool_size must be at least 1, got {check_thread_pool_size}")
        self.execute = execute
        self.check = check
        self.check_thread_pool_size = check_thread_pool_size
        self._checks: concurrent.futures.ThreadPoolExecutor | None = None
        self._checks_pending = 0
        self._checks_lock = threading.Lock()

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> TransactionProducer:
        if self._instance is not None:
            return self
        super().start()
        # a check arriving before the pool is there is dropped: the broker asks again next round
        self._checks = concurrent.futures.ThreadPoolExecutor(
            self.check_thread_pool_size, thread_name_prefix=f"rmq-transaction-check-{self.group}"
        )
        # As Java's producer: learn the brokers from the template topic's route and heartbeat them
        # now, so that a producer started to answer checks (its predecessor died) is asked at once.
        instance = self.instance
        self._publish.setdefault(self.config.create_topic_key, TopicPublishInfo(self.config.create_topic_key, []))
        try:
            instance.update_route(self.config.create_topic_key)
        except (RemotingError, ClientError) as exc:
            log.warning("transaction producer %s: route of %s: %s", self.group, self.config.create_topic_key, exc)
        instance.send_heartbeat_to_all()
        return self

    def shutdown(self) -> None:
        super().shutdown()
        checks, self._checks = self._checks, None
        if checks is not None:
            checks.shutdown(wait=True, cancel_futures=True)

    # -- sending --------------------------------------------------------------------------------

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``execute(msg, arg)``, end the transaction with its
        answer. Raises what ``send`` raises when the half message cannot be stored."""
        result = self.send(self._prepared(msg))
        state, error = LocalTransactionState.ROLLBACK, None
        if result.status is SendStatus.SEND_OK:
            state, error = self._run_execute(msg, arg)
        return self._end(msg, result, state, error)

    async def asend_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """``send_message_in_transaction`` for asyncio code; ``execute`` may be a coroutine function."""
        result = await self.asend(self._prepared(msg))
        state: LocalTransactionState = LocalTransactionState.ROLLBACK
        error: Exception | None = None
        if result.status is SendStatus.SEND_OK:
            assert self.execute is not None, "_prepared checked it"
            if inspect.iscoroutinefunction(self.execute):
                try:
                    state = _state_of(await self.execute(msg, arg), "execute")
                except Exception as exc:
                    state, error = LocalTransactionState.UNKNOWN, exc
                    log.warning("local transaction of %s raised: %r; state UNKNOWN", msg.uniq_key, exc)
            else:
                state, error = await asyncio.get_running_loop().run_in_executor(None, self._run_execute, msg, arg)
        return self._end(msg, result, state, error)

    def _prepared(self, msg: Message) -> Message:
        if self.execute is None:
            raise ClientError(f"transaction producer {self.group} has no execute function: pass execute=...")
        if msg.delay_level:
            msg.delay_level = 0  # a transactional message is not delayed (Java clears it too)
        msg.put_property(MessageProperty.TRANSACTION_PREPARED, "true")
        msg.put_property(MessageProperty.PRODUCER_GROUP, self.group)
        return msg

    def _run_execute(self, msg: Message, arg: Any) -> tuple[LocalTransactionState, Exception | None]:
        assert self.execute is not None, "_prepared checked it"
        try:
            return _state_of(self.execute(msg, arg), "execute"), None
        except Exception as exc:
            log.warning("local transaction of %s raised: %r; state UNKNOWN", msg.uniq_key, exc)
            return LocalTransactionState.UNKNOWN, exc

    def _end(
        self, msg: Message, result: SendResult, state: LocalTransactionState, error: Exception | None
    ) -> TransactionSendResult:
        """END_TRANSACTION, oneway (Java's endTransaction): a lost one is settled by a check."""
        remark = f"executeLocalTransactionBranch exception: {error!r}" if error is not None else None
        try:
            _, _, commit_log_offset = decode_msg_id(result.offset_msg_id)
            header = EndTransactionHeader(
                self.group,
                result.queue_offset,
                commit_log_offset,
                state.value,
                False,
                result.msg_id,
                result.transaction_id,
            )
            addr = self.instance.broker_addr_or_raise(result.message_queue.broker_name, msg.topic)
            self._end_oneway(addr, header, remark)
        except (RemotingError, ClientError, ValueError) as exc:
            # ValueError: the broker answered no usable msgId; its check settles the transaction
            log.warning("transaction %s is %s, but END_TRANSACTION failed: %s", result.msg_id, state.name, exc)
        return TransactionSendResult(
            result.status,
            result.msg_id,
            result.offset_msg_id,
            result.message_queue,
            result.queue_offset,
            result.transaction_id,
            state,
        )

    def _end_oneway(self, addr: str, header: EndTransactionHeader, remark: str | None) -> None:
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        request.remark = remark
        self.instance.remoting.invoke_oneway(addr, request)

    # -- check-backs ----------------------------------------------------------------------------

    def check_transaction_state(self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateHeader) -> None:
        """A CHECK_TRANSACTION_STATE from ``broker_addr`` (the client's loop thread): answered from
        the check pool."""
        checks = self._checks
        if checks is None or self.check is None:
            log.warning("transaction producer %s cannot check %s: no check function", self.group, msg.msg_id)
            return
        with self._checks_lock:
            if self._checks_pending >= CHECK_REQUEST_HOLD_MAX:
                log.warning(
                    "transaction producer %s: %d checks waiting, %s dropped",
                    self.group,
                    CHECK_REQUEST_HOLD_MAX,
                    msg.msg_id,
                )
                return
            self._checks_pending += 1
        try:
            checks.submit(self._answer_check, broker_addr, msg, header)
        except RuntimeError:  # shut down meanwhile
            with self._checks_lock:
                self._checks_pending -= 1

    def _answer_check(self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateHeader) -> None:
        with self._checks_lock:
            self._checks_pending -= 1
        assert self.check is not None, "check_transaction_state checked it"
        remark = None
        try:
            state = _state_of(self.check(msg), "check")
        except Exception as exc:
            state = LocalTransactionState.UNKNOWN
            remark = f"checkLocalTransactionState Exception: {exc!r}"
            log.warning("check of transaction %s raised: %r; state UNKNOWN", msg.msg_id, exc)
        end = EndTransactionHeader(
            self.group,
            header.tran_state_table_offset,
            header.commit_log_offset,
            state.value,
            True,
            msg.msg_id,
            header.transaction_id,
        )
        try:
            self._end_oneway(broker_addr, end, remark)
        except (RemotingError, ClientError) as exc:
            log.warning("answer to the check of %s failed: %s", msg.msg_id, exc)


def _state_of(answer: object, what: str) -> LocalTransactionState:
    if answer is None:
        return LocalTransactionState.UNKNOWN
    if isinstance(answer, LocalTransactionState):
        return answer
    raise ClientError(f"{what} returned {answer!r}, expected a LocalTransactionState (COMMIT, ROLLBACK, UNKNOWN)")
