"""Transactional messages on the broker (RocketMQ 4.x's TransactionalMessageBridge,
TransactionalMessageServiceImpl, EndTransactionProcessor and TransactionalMessageCheckService;
wire and disk formats in ``rmq.protocol.transaction``).

    prepare_message   a send with TRAN_MSG=true: stored as a half message in RMQ_SYS_TRANS_HALF_TOPIC
                      queue 0, its real topic and queue in REAL_TOPIC / REAL_QID (event loop)
    end_transaction   END_TRANSACTION: a commit re-puts the real message (sysFlag COMMIT, TRAN_MSG
                      dropped, every other property kept), then commit or rollback writes an op
                      record to RMQ_SYS_TRANS_OP_HALF_TOPIC (event loop)
    check             one round of the checker: half messages without an op record, older than
                      transactionTimeOut (or their CHECK_IMMUNITY_TIME_IN_SECONDS), are put back to
                      the half queue with TRANSACTION_CHECK_TIMES + 1 and the copy is sent to a
                      producer of their group as CHECK_TRANSACTION_STATE; past transactionCheckMax
                      they go to TRANS_CHECK_MAX_TIME_TOPIC (``rmq-broker-transaction-check``)

Everything is ordinary records in the store, so a restart, a crash and a slave see the same state;
the checker's progress is the consumer offsets of ``CID_RMQ_SYS_TRANS`` in the half and op queues.

Beyond RocketMQ, a transaction ends once: RocketMQ commits again on a second END for the same half
message (or for another copy of it the checker put back), which delivers the message twice. Here
the ended transactions (their UNIQ_KEY) are remembered, written on every op record as
``__transactionId__``, and read back from the op queue at start for the last ENDED_MEMORY_MS; a
second END and the checker skip them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import TYPE_CHECKING, Protocol

from rmq._clock import now_ms
from rmq._service import ServiceThread
from rmq.errors import RecordError, RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    MessageProperty,
    MessageSysFlag,
    decode_properties,
    encode_properties,
)
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.record import StoredMessage, decode_record, encode_record, ipv4_to_int
from rmq.protocol.transaction import (
    CHECK_MAX_TIME_QUEUE_NUMS,
    HALF_QUEUE_ID,
    OP_REMOVE_TAG,
    TRANSACTION_CHECK_GROUP,
    CheckTransactionStateHeader,
    EndTransactionHeader,
    TransactionState,
    decode_op_body,
    encode_op_body,
    reset_transaction_value,
)
from rmq.store import PutMessageResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from rmq.broker.client_manager import ClientManager
    from rmq.broker.config import BrokerConfig
    from rmq.broker.consumer_offset import ConsumerOffsetManager
    from rmq.broker.timer import TimerMessageStore
    from rmq.broker.topic_config import TopicConfigManager
    from rmq.store import MessageStore

log = logging.getLogger("rmq.broker")

# One check round stops after this long and goes on at the next (RocketMQ's MAX_PROCESS_TIME_LIMIT).
MAX_PROCESS_TIME_MS = 60_000
# Op records read per round at most: the ones not yet passed by the checker are few.
MAX_OPS_PER_ROUND = 100_000
# How long an ended transaction is remembered, at least (longer when the checker's cycle is).
ENDED_MEMORY_MS = 3_600_000
# Properties only a half message has: its committed message goes without them.
_HALF_ONLY_PROPERTIES = (
    MessageProperty.REAL_TOPIC,
    MessageProperty.REAL_QUEUE_ID,
    MessageProperty.TRANSACTION_PREPARED,
)


class TransactionServices(Protocol):
    """What the transaction service touches of the broker (the controller passes itself). Here
    rather than in rmq.broker.services, which names this module's service for the processors."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def broker_addr(self) -> str: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def topic_config_manager(self) -> TopicConfigManager: ...
    @property
    def client_manager(self) -> ClientManager: ...
    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...
    @property
    def timer_message_store(self) -> TimerMessageStore: ...
    def put_inner(
        self,
        topic: str,
        queue_id: int,
        body,
        properties: dict[str, str] | bytes | str = b"",
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str | int = 0,
        flag: int = 0,
        reconsume_times: int = 0,
        *,
        born_port: int = 0,
        callback: Callable[[PutMessageResult], None] | None = None,
        prepared_tx_offset: int = 0,
    ) -> PutMessageResult: ...


class TransactionalMessageService:
    """Half messages in, committed messages and op records out, and the check rounds."""

    def __init__(self, controller: TransactionServices):
        self.controller = controller
        self.store = controller.store
        self.config = controller.config
        # transaction key (UNIQ_KEY) -> when it ended (ms); the checker thread and the loop share it
        self._ended: dict[str, int] = {}
        self._ended_lock = threading.Lock()
        self._topics_ready = False
        self.checks_sent = 0
        self.discarded = 0

    @property
    def ended_memory_ms(self) -> int:
        c = self.config
        cycle = (c.transaction_check_max + 1) * (c.transaction_check_interval + c.transaction_time_out)
        return max(ENDED_MEMORY_MS, 2 * cycle)

    # -- prepare (event loop) -----------------------------------------------------------------

    def prepare_message(
        self,
        topic: str,
        queue_id: int,
        body,
        properties: str,
        sys_flag: int,
        born_timestamp: int,
        flag: int,
        reconsume_times: int,
        born_host: int,
        born_port: int,
        callback,
    ) -> PutMessageResult:
        """Store a prepared message as a half message (RocketMQ's parseHalfMessageInner)."""
        if self.config.reject_transaction_message:
            raise RequestRefused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.controller.broker_addr}] sending transaction message is forbidden "
                "(rejectTransactionMessage=true)",
            )
        # a timed message's time is checked now (its sender hears a bad one), and counts from the commit
        self.controller.timer_message_store.redirect(topic, queue_id, properties)
        props = decode_properties(properties)
        props[MessageProperty.REAL_TOPIC] = topic
        props[MessageProperty.REAL_QUEUE_ID] = str(queue_id)
        self._ensure_topics()
        return self.store.put_message(
            TRANS_HALF_TOPIC,
            HALF_QUEUE_ID,
            body,
            encode_properties(props),
            sys_flag=reset_transaction_value(sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE),
            born_timestamp=born_timestamp,
            flag=flag,
            reconsume_times=reconsume_times,
            born_host=born_host,
            born_port=born_port,
            callback=callback,
        )

    def _ensure_topics(self) -> None:
        # RocketMQ makes both on first use, one queue each, through createTopicInSendMessageBackMethod
        if not self._topics_ready:
            topics = self.controller.topic_config_manager
            for topic in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC):
                topics.create_topic_in_send_message_back(topic, 1, PERM_READ | PERM_WRITE)
            self._topics_ready = True

    # -- END_TRANSACTION (event loop) -----------------------------------------------------------

    def end_transaction(self, header: EndTransactionHeader, remark: str | None = None) -> int | None:
        """Commit or roll back the half message the header names; the response code, None when
        there is nothing to answer (the producer does not know yet). RequestRefused when the half
        message is missing or does not match the header (RocketMQ's checkPrepareMessage)."""
        state = header.commit_or_rollback
        source = "a check-back answer" if header.from_transaction_check else "the producer"
        if state not in (TransactionState.COMMIT, TransactionState.ROLLBACK):
            log.warning(
                "transaction %s of group %s: %s does not know its state yet (commitOrRollback %d)%s",
                header.msg_id,
                header.producer_group,
                source,
                state,
                f": {remark}" if remark else "",
            )
            return None
        half = self._find_half(header)
        key = transaction_key(half)
        if self.is_ended(key):
            log.info(
                "transaction %s of group %s already ended: %s's %s ignored",
                key,
                header.producer_group,
                source,
                TransactionState(state).name,
            )
            return ResponseCode.SUCCESS
        if state == TransactionState.COMMIT:
            result = self._put_committed(half)
            if not result.ok:
                raise RequestRefused(
                    ResponseCode.SYSTEM_ERROR,
                    f"commit of transaction {key}: storing the message to "
                    f"{half.properties.get(MessageProperty.REAL_TOPIC)} failed ({result.status.name}); "
                    "the broker checks it back later",
                )
        elif header.from_transaction_check or remark:
            log.warning(
                "transaction %s of group %s rolled back by %s%s",
                key,
                header.producer_group,
                source,
                f": {remark}" if remark else "",
            )
        self._put_op(half, key)
        return ResponseCode.SUCCESS

    def _find_half(self, header: EndTransactionHeader) -> StoredMessage:
        offset = header.commit_log_offset
        record = self.store.look_message_by_offset(offset) if offset >= 0 else None
        half = None
        if record is not None:
            try:
                half = decode_record(record, check_crc=False)
            except RecordError:
                half = None
        if half is None or half.physical_offset != offset or half.topic != TRANS_HALF_TOPIC:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"Find prepared transaction message failed: no half message at commitLogOffset {offset} "
                f"(transaction {header.msg_id} of group {header.producer_group})",
            )
        group = half.properties.get(MessageProperty.PRODUCER_GROUP)
        if group != header.producer_group:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"The producer group wrong: the half message at {offset} is of group {group!r}, "
                f"the END_TRANSACTION names {header.producer_group!r}",
            )
        if half.queue_offset != header.tran_state_table_offset:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"The transaction state table offset wrong: the half message at {offset} has queue offset "
                f"{half.queue_offset}, the END_TRANSACTION says {header.tran_state_table_offset}",
            )
        return half

    def _put_committed(self, half: StoredMessage) -> PutMessageResult:
        """The real message back where the producer sent it (RocketMQ's endMessageTransaction)."""
        props = {k: v for k, v in half.properties.items() if k not in _HALF_ONLY_PROPERTIES}
        topic = half.properties.get(MessageProperty.REAL_TOPIC, "")
        queue_id = half.properties.get(MessageProperty.REAL_QUEUE_ID, "")
        if not topic or not queue_id.isdigit():
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the half message at {half.physical_offset} has no real destination "
                f"(REAL_TOPIC {topic!r}, REAL_QID {queue_id!r}): nothing to commit",
            )
        # a DELAY level or TIMER_* property makes the committed message wait for its time from now
        topic, queue, properties = self.controller.timer_message_store.redirect(
            topic, int(queue_id), encode_properties(props).decode()
        )
        return self.controller.put_inner(
            topic,
            queue,
            half.body,
            properties,
            reset_transaction_value(half.sys_flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE),
            half.born_timestamp,
            half.born_host[0],
            half.flag,
            half.reconsume_times,
            born_port=half.born_host[1],
            prepared_tx_offset=half.physical_offset,
        )

    def _put_op(self, half: StoredMessage, key: str) -> None:
        """The op record that ends ``half`` (RocketMQ's addRemoveTagInTransactionOp), then the key
        is remembered as ended."""
        props = {MessageProperty.TAGS: OP_REMOVE_TAG, MessageProperty.TRANSACTION_ID: key}
        result = self.controller.put_inner(
            TRANS_OP_HALF_TOPIC, half.queue_id, encode_op_body(half.queue_offset), props, born_timestamp=now_ms()
        )
        if not result.ok:
            # the message is committed (or rolled back) all the same; the checker will ask once more
            log.error(
                "op record of transaction %s (half offset %d) not stored: %s",
                key,
                half.queue_offset,
                result.status.name,
            )
        self.mark_ended(key)

    # -- ended transactions ---------------------------------------------------------------------

    def is_ended(self, key: str) -> bool:
        with self._ended_lock:
            return key in self._ended

    def mark_ended(self, key: str, when: int | None = None) -> None:
        with self._ended_lock:
            self._ended[key] = now_ms() if when is None else when

    def _forget_old_ended(self, now: int) -> None:
        horizon = now - self.ended_memory_ms
        with self._ended_lock:
            for key in [k for k, when in self._ended.items() if when < horizon]:
                del self._ended[key]

    def load_ended(self) -> int:
        """Read back the transactions ended within ``ended_memory_ms`` from the op queue (newest
        first); at start and on promotion. Returns how many."""
        op_queue = self.store.find_consume_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        if op_queue is None:
            return 0
        horizon = now_ms() - self.ended_memory_ms
        loaded = 0
        offset = op_queue.max_offset_in_queue - 1
        while offset >= op_queue.min_offset:
            op = self._read_entry(op_queue, offset)
            offset -= 1
            if op is None:
                continue
            if op.store_timestamp < horizon:
                break
            key = op.properties.get(MessageProperty.TRANSACTION_ID)
            if key is None:  # an op record RocketMQ wrote: the key is on its half message
                half_offset = decode_op_body(op.body)
                half = None if half_offset is None else self._read_half(half_offset)
                key = None if half is None else transaction_key(half)
            if key is not None:
                with self._ended_lock:
                    self._ended.setdefault(key, op.store_timestamp)
                loaded += 1
        if loaded:
            log.info("%d ended transactions read back from %s", loaded, TRANS_OP_HALF_TOPIC)
        return loaded

    def _read_entry(self, queue, offset: int) -> StoredMessage | None:
        return self.store.message_in_queue(queue, offset)

    def _read_half(self, offset: int) -> StoredMessage | None:
        queue = self.store.find_consume_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        return None if queue is None else self._read_entry(queue, offset)

    # -- the check round (checker thread) -------------------------------------------------------

    def check(self, should_stop=lambda: False) -> None:
        """One round over the half queue (RocketMQ's TransactionalMessageServiceImpl.check)."""
        half_queue = self.store.find_consume_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        if half_queue is None:
            return
        start = now_ms()
        self._forget_old_ended(start)
        timeout = self.config.transaction_time_out
        check_max = self.config.transaction_check_max
        half_offset = self._checker_offset(TRANS_HALF_TOPIC)
        op_offset = self._checker_offset(TRANS_OP_HALF_TOPIC)
        remove_map: dict[int, int] = {}  # half queue offset -> op queue offset
        done_ops: list[int] = []
        self._read_ops(op_offset, half_offset, remove_map, done_ops)
        i = half_offset
        new_offset = half_offset
        while not should_stop() and now_ms() - start < MAX_PROCESS_TIME_MS:
            if i in remove_map:
                done_ops.append(remove_map.pop(i))
                i += 1
                new_offset = i
                continue
            if i < half_queue.min_offset:  # retention removed the start of the queue
                i = new_offset = half_queue.min_offset
            if i >= half_queue.max_offset_in_queue:
                break
            half = self._read_entry(half_queue, i)
            if half is None:
                log.warning("half queue offset %d: no readable message (removed by retention?); skipped", i)
            elif self.is_ended(transaction_key(half)):
                pass  # ended since the op records were read, or a copy of an ended one
            elif self._need_discard(half, check_max) or self._need_skip(half, start):
                self._discard(half)
            elif half.store_timestamp >= start:
                break  # put back in this round: checked at the next
            else:
                age = now_ms() - half.born_timestamp
                immunity_text = half.properties.get(MessageProperty.CHECK_IMMUNITY_TIME_IN_SECONDS)
                immunity = timeout if immunity_text is None else _immunity_ms(immunity_text, timeout)
                if 0 <= age < immunity:
                    if immunity_text is None or not self._keep_immune(half, remove_map, done_ops):
                        break  # too young: this one and every later one wait for the next round
                else:
                    copy = self._put_back(half)
                    if copy is None:
                        break  # the store refused: try again next round
                    self._send_check(copy)
            i += 1
            new_offset = i
        if new_offset != half_offset:
            self._commit_checker_offset(TRANS_HALF_TOPIC, new_offset)
        new_op_offset = op_offset
        for done in sorted(done_ops):
            if done == new_op_offset:
                new_op_offset += 1
            elif done > new_op_offset:
                break
        if new_op_offset != op_offset:
            self._commit_checker_offset(TRANS_OP_HALF_TOPIC, new_op_offset)

    def _read_ops(self, op_offset: int, half_offset: int, remove_map: dict[int, int], done_ops: list[int]) -> None:
        """RocketMQ's fillOpRemoveMap over every op record from ``op_offset``: those naming a half
        offset the checker passed are done, the others wait in ``remove_map``."""
        op_queue = self.store.find_consume_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        if op_queue is None:
            return
        end = min(op_queue.max_offset_in_queue, op_offset + MAX_OPS_PER_ROUND)
        for offset in range(max(op_offset, op_queue.min_offset), end):
            op = self._read_entry(op_queue, offset)
            target = None if op is None else decode_op_body(op.body)
            if op is None or target is None or op.tags != OP_REMOVE_TAG:
                log.error("op queue offset %d: not an op record of a half offset (%r); skipped", offset, op)
                done_ops.append(offset)
            elif target < half_offset:
                done_ops.append(offset)
            else:
                remove_map[target] = offset

    def _need_discard(self, half: StoredMessage, check_max: int) -> bool:
        """Past transactionCheckMax checks; else TRANSACTION_CHECK_TIMES counts this one."""
        text = half.properties.get(MessageProperty.TRANSACTION_CHECK_TIMES)
        times = 1
        if text is not None:
            times = _int_or(text, -1)
            if times >= check_max:
                return True
            times += 1
        half.properties[MessageProperty.TRANSACTION_CHECK_TIMES] = str(times)
        return False

    def _need_skip(self, half: StoredMessage, now: int) -> bool:
        """Older than the CommitLog keeps files (fileReservedTime): given up like an unanswered one."""
        return now - half.born_timestamp > self.store.config.file_reserved_time * 3_600_000

    def _keep_immune(self, half: StoredMessage, remove_map: dict[int, int], done_ops: list[int]) -> bool:
        """A half message still within its CHECK_IMMUNITY time is put back (with the original's queue
        offset, TRAN_PREPARED_QUEUE_OFFSET), unless the original has an op record: RocketMQ's
        checkPrepareQueueOffset. True when the checker may pass it."""
        text = half.properties.get(MessageProperty.TRANSACTION_PREPARED_QUEUE_OFFSET)
        if text is not None:
            original = _int_or(text, -1)
            if original == -1:
                return False
            if original in remove_map:
                done_ops.append(remove_map.pop(original))
                return True
        else:
            half.properties[MessageProperty.TRANSACTION_PREPARED_QUEUE_OFFSET] = str(half.queue_offset)
        return self._put_back(half) is not None

    def _put_back(self, half: StoredMessage) -> StoredMessage | None:
        """A copy of ``half`` at the end of the half queue (RocketMQ's putBackHalfMsgQueue), as the
        copy was stored; None when the store refused it."""
        self._ensure_topics()
        result = self._put_copy(half, TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        if not result.ok:
            log.error(
                "putting half message %s back to %s failed: %s", half.msg_id, TRANS_HALF_TOPIC, result.status.name
            )
            return None
        return dataclasses.replace(
            half,
            queue_offset=result.queue_offset,
            physical_offset=result.wrote_offset,
            store_timestamp=result.store_timestamp,
        )

    def _send_check(self, half: StoredMessage) -> None:
        """CHECK_TRANSACTION_STATE to one live producer of the group, oneway (RocketMQ's
        sendCheckMessage); the body is the message as its producer sent it."""
        group = half.properties.get(MessageProperty.PRODUCER_GROUP, "")
        uniq_key = half.properties.get(MessageProperty.UNIQ_KEY)
        header = CheckTransactionStateHeader(half.queue_offset, half.physical_offset, uniq_key, uniq_key, half.msg_id)
        message = dataclasses.replace(
            half,
            topic=half.properties.get(MessageProperty.REAL_TOPIC, half.topic),
            queue_id=_int_or(half.properties.get(MessageProperty.REAL_QUEUE_ID, ""), 0),
        )
        channel = self.controller.client_manager.producers.get_available_channel(group) if group else None
        if channel is None:
            log.warning("check of transaction %s: no producer of group %r is online", uniq_key or half.msg_id, group)
            return
        channel.send_oneway(
            RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), encode_record(message))
        )
        self.checks_sent += 1
        log.info(
            "check of transaction %s (check %s) sent to %s of group %s",
            uniq_key or half.msg_id,
            half.properties.get(MessageProperty.TRANSACTION_CHECK_TIMES),
            channel.remote_address,
            group,
        )

    def _discard(self, half: StoredMessage) -> None:
        """Past the checks: to TRANS_CHECK_MAX_TIME_TOPIC, logged (RocketMQ's resolveDiscardMsg)."""
        log.error(
            "transaction %s of group %s checked %s times without an answer: moved to %s "
            "(real topic %s); it is neither committed nor rolled back",
            transaction_key(half),
            half.properties.get(MessageProperty.PRODUCER_GROUP),
            half.properties.get(MessageProperty.TRANSACTION_CHECK_TIMES),
            TRANS_CHECK_MAX_TIME_TOPIC,
            half.properties.get(MessageProperty.REAL_TOPIC),
        )
        self.controller.topic_config_manager.create_topic_in_send_message_back(
            TRANS_CHECK_MAX_TIME_TOPIC, CHECK_MAX_TIME_QUEUE_NUMS, PERM_READ | PERM_WRITE
        )
        result = self._put_copy(half, TRANS_CHECK_MAX_TIME_TOPIC, 0)
        if not result.ok:
            log.error("putting %s to %s failed: %s", half.msg_id, TRANS_CHECK_MAX_TIME_TOPIC, result.status.name)
        self.discarded += 1

    def _put_copy(self, half: StoredMessage, topic: str, queue_id: int) -> PutMessageResult:
        """``half`` as it is (properties included) into ``topic``: the store's put, not the
        broker's, so that a DELAY property diverts nothing."""
        return self.store.put_message(
            topic,
            queue_id,
            half.body,
            encode_properties(half.properties),
            sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp,
            flag=half.flag,
            reconsume_times=half.reconsume_times,
            born_host=ipv4_to_int(half.born_host[0]),
            born_port=half.born_host[1],
        )

    def _checker_offset(self, topic: str) -> int:
        offset = self.controller.consumer_offset_manager.query_offset(TRANSACTION_CHECK_GROUP, topic, HALF_QUEUE_ID)
        if offset < 0:
            offset = self.store.get_min_offset_in_queue(topic, HALF_QUEUE_ID)
        return offset

    def _commit_checker_offset(self, topic: str, offset: int) -> None:
        self.controller.consumer_offset_manager.commit_offset(
            TRANSACTION_CHECK_GROUP, topic, HALF_QUEUE_ID, offset, self.controller.broker_addr
        )


class TransactionalMessageCheckService(ServiceThread):
    """A check round every transactionCheckInterval, on a master only (RocketMQ's
    TransactionalMessageCheckService)."""

    def __init__(self, transactions: TransactionalMessageService, interval_ms: int):
        super().__init__("rmq-broker-transaction-check")
        self.transactions = transactions
        self.interval = interval_ms / 1000
        self.rounds = 0

    def start(self) -> None:
        self.transactions.load_ended()
        super().start()

    def run_once(self) -> None:
        self.wait_for_running(self.interval)
        if self.is_stopped:
            return
        began = time.monotonic()
        self.transactions.check(lambda: self.is_stopped)
        self.rounds += 1
        log.debug("transaction check round took %.3f s", time.monotonic() - began)


def transaction_key(half: StoredMessage) -> str:
    """What names a transaction across the copies of its half message: its UNIQ_KEY (every 4.x
    client sets it), else the CommitLog offset of this copy."""
    return half.properties.get(MessageProperty.UNIQ_KEY) or f"@{half.physical_offset}"


def _int_or(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def _immunity_ms(text: str, timeout_ms: int) -> int:
    """CHECK_IMMUNITY_TIME_IN_SECONDS in ms; -1 (or garbage) means transactionTimeOut."""
    seconds = _int_or(text, -1)
    return timeout_ms if seconds == -1 else seconds * 1000
