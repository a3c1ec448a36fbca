"""POP consumption's state (docs/pop.md; RocketMQ 5.x's PopMessageProcessor, PopReviveService,
ConsumerOrderInfoManager and PopLongPollingService in one room): checkpoints and acks in the revive
topic, the revive rounds, FIFO queue locks and parked long polls. Everything here runs on the broker's
event loop thread (``rmq-broker-loop``); the request side is ``rmq.broker.processor.pop``.

Crash safety rests on three orderings:

1. a pop advances the queue's pop offset at once (no second pop takes the same messages), but the
   group's consume offset, and its answer, only once its checkpoint is durable in the revive topic
   (SYNC_FLUSH): the offsets file never passes a checkpoint a crash could still take;
2. an ack is answered once its ack record is durable; the revive service reads checkpoints and acks
   of a revive queue in order (an ack always follows its checkpoint there);
3. the revive offset (the group ``CID_RMQ_SYS_REVIVE_GROUP``'s offset in each revive queue) never
   passes a checkpoint that is not settled, and moves only once the re-puts it settled are durable.

At start the revive service reads every revive queue from its revive offset before the broker
serves: each checkpoint read moves its group's consume offset past the messages it holds (the offset
file is written every flushConsumerOffsetInterval, a checkpoint is on disk before its pop is
answered), and the unacked ones come back after their invisible time. Consume offsets and revive
offsets are persisted together, so a revive offset read back never passes a checkpoint whose pop
the consume offsets read back do not hold.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from rmq._clock import now_ms
from rmq.protocol.message import MessageProperty, dlq_topic
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.pop import (
    ACK_TAG,
    CK_TAG,
    POP_ORDER_REVIVE_QUEUE,
    PROPERTY_FIRST_POP_TIME,
    REVIVE_GROUP,
    AckMsg,
    PopCheckPoint,
    original_topic,
    pop_retry_topic,
    revive_topic,
)
from rmq.protocol.record import StoredMessage

if TYPE_CHECKING:
    from rmq.broker.config import BrokerConfig
    from rmq.broker.consumer_offset import ConsumerOffsetManager
    from rmq.broker.consumer_order_info import ConsumerOrderInfoManager
    from rmq.broker.subscription_group import SubscriptionGroupManager
    from rmq.broker.topic_config import TopicConfigManager
    from rmq.net.channel import Channel
    from rmq.net.codec import RemotingCommand
    from rmq.net.loop import TimerHandle
    from rmq.net.server import RemotingServer
    from rmq.store import MessageStore, PutMessageResult

log = logging.getLogger("rmq.broker")

# The POP retry topic's queues (PopAckConstants.retryQueueNum) and the DLQ's.
POP_RETRY_QUEUE_NUMS = 1
POP_DLQ_QUEUE_NUMS = 1
# How many revive-queue records one revive round reads per queue at most, so that a long backlog
# (a restart after a long stop) never holds the loop for long: the next round goes on.
REVIVE_READ_BATCH = 2048


class PopStateServices(Protocol):
    """What the POP state uses of the broker (the controller is one; rmq.broker.services' PopServices
    adds what the processor uses)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def broker_addr(self) -> str: ...
    @property
    def is_slave(self) -> bool: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def server(self) -> RemotingServer: ...
    @property
    def topic_config_manager(self) -> TopicConfigManager: ...
    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...
    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...
    @property
    def consumer_order_info_manager(self) -> ConsumerOrderInfoManager: ...
    def put_inner(
        self, topic: str, queue_id: int, body: Any, properties: Any = ..., *args: Any, **kwargs: Any
    ) -> PutMessageResult: ...


Key = tuple[str, str, int, int, int]  # (group, topic, queueId, startOffset, popTime): one checkpoint


def ck_key(cid: str, topic: str, queue_id: int, start_offset: int, pop_time: int) -> Key:
    return (cid, topic, queue_id, start_offset, pop_time)


@dataclasses.dataclass
class _Pending:
    """A checkpoint read from a revive queue and not settled yet: its record's revive-queue offset,
    the bits of the messages acked so far."""

    ck: PopCheckPoint
    revive_offset: int


class ParkedPop:
    """A POP that found nothing, waiting for a message on one of ``topics`` or its deadline."""

    __slots__ = ("channel", "request", "topics", "deadline", "timer", "done")

    def __init__(self, channel: Channel, request: RemotingCommand, topics: tuple[str, ...], deadline: float):
        self.channel = channel
        self.request = request
        self.topics = topics
        self.deadline = deadline
        self.timer: TimerHandle | None = None
        self.done = False


def put_durably(
    put: Callable[..., PutMessageResult], done: Callable[[PutMessageResult], None], **kwargs: Any
) -> PutMessageResult:
    """``put(..., callback=done)``, and ``done(result)`` at once when the store does not wait for
    the disk (ASYNC_FLUSH, or a put refused): ``done`` runs once the record is as durable as the
    store makes it. The put's result (not ``ok``: not stored)."""
    result = put(callback=done, **kwargs)
    if not result.pending:
        done(result)
    return result


class PopService:
    """The broker's POP state and its revive rounds (docs/pop.md)."""

    def __init__(self, controller: PopStateServices):
        self.controller = controller
        self.config = controller.config
        self.store = controller.store
        self.offsets = controller.consumer_offset_manager
        self.revive_topic = revive_topic(self.config.broker_cluster_name)
        self.revive_queue_num = self.config.revive_queue_num
        self._next_revive_qid = random.randrange(self.revive_queue_num)
        # revive queue -> checkpoints read and not settled, by key
        self._pending: dict[int, dict[Key, _Pending]] = {q: {} for q in range(self.revive_queue_num)}
        # revive queue -> the next offset to read
        self._scan_offset: dict[int, int] = {}
        self._revive_puts_waiting = 0
        # (revive queue, offset) to commit once the re-puts on their way to the disk are durable
        self._after_revive_puts: list[tuple[int, int]] = []
        self._revive_put_failed = False
        self.order_info = controller.consumer_order_info_manager
        # (group, topic, queueId) -> [where its next pop starts, checkpoints of it not yet durable]:
        # the consume offset moves only once they are, so the offsets file never passes a
        # checkpoint a crash could still take
        self._pop_offsets: dict[tuple[str, str, int], list[int]] = {}
        self._parked: list[ParkedPop] = []
        self._wake: Callable[[ParkedPop, bool], None] | None = None
        self.revived = 0  # messages put back to a retry topic
        self.dead_lettered = 0
        self._recovered = False

    # -- start-up ----------------------------------------------------------------------------

    def start(self) -> None:
        """Revive every reviveInterval on the loop; a master reads its revive queues back first
        (consume offsets recovered) before the broker serves. A slave's revive queues are copies:
        it revives nothing, and reads them back when it is promoted (its first pop or revive round
        as a master, whichever comes first)."""
        if not self.controller.is_slave:
            self.recover()
        self.controller.server.loop.schedule_periodic(self.config.revive_interval / 1000, self.revive_round)

    def recover_if_promoted(self) -> None:
        """Before a promoted slave's first pop (loop thread): its revive queues read back, as
        ``start`` does for a master, if no revive round did yet."""
        if not self._recovered:
            self.recover()

    def recover(self) -> None:
        topics = self.controller.topic_config_manager
        topics.create_topic_in_send_message_back(self.revive_topic, self.revive_queue_num, PERM_READ | PERM_WRITE)
        for qid in range(self.revive_queue_num):
            offset = self.offsets.query_offset(REVIVE_GROUP, self.revive_topic, qid)
            if offset < 0:
                offset = self.store.get_min_offset_in_queue(self.revive_topic, qid)
            self._scan_offset[qid] = offset
            self._pending[qid].clear()
            while self._read_revive_queue(qid, recovering=True):
                pass
        self._recovered = True

    # -- the revive topic ----------------------------------------------------------------------

    def next_revive_qid(self) -> int:
        self._next_revive_qid = (self._next_revive_qid + 1) % self.revive_queue_num
        return self._next_revive_qid

    def put_record(
        self, revive_qid: int, tag: str, body: bytes, done: Callable[[PutMessageResult], None]
    ) -> PutMessageResult:
        """A checkpoint or an ack into its revive queue; ``done(result)`` once durable."""
        props = {MessageProperty.TAGS: tag}
        return put_durably(
            self.controller.put_inner,
            done,
            topic=self.revive_topic,
            queue_id=revive_qid,
            body=body,
            properties=props,
            born_timestamp=now_ms(),
        )

    def _records(self, qid: int, start: int, limit: int) -> Iterator[tuple[int, StoredMessage | None]]:
        queue = self.store.find_consume_queue(self.revive_topic, qid)
        if queue is None:
            return
        end = min(queue.max_offset_in_queue, start + limit)
        for offset in range(max(start, queue.min_offset), end):
            yield offset, self.store.message_in_queue(queue, offset)

    def read_message(self, topic: str, queue_id: int, offset: int) -> StoredMessage | None:
        queue = self.store.find_consume_queue(topic, queue_id)
        return None if queue is None else self.store.message_in_queue(queue, offset)

    def _read_revive_queue(self, qid: int, recovering: bool = False) -> bool:
        """Read what is new in revive queue ``qid``; True when there may be more (a full batch)."""
        start = self._scan_offset[qid]
        pending = self._pending[qid]
        count = 0
        offset = start
        for offset, record in self._records(qid, start, REVIVE_READ_BATCH):
            count += 1
            if record is None:
                continue
            tag = record.tags
            try:
                if tag == CK_TAG:
                    ck = PopCheckPoint.decode(record.body)
                    key = ck_key(ck.cid, ck.topic, ck.queue_id, ck.start_offset, ck.pop_time)
                    pending[key] = _Pending(ck, offset)
                    if recovering:
                        self._recover_consume_offset(ck)
                elif tag == ACK_TAG:
                    ack = AckMsg.decode(record.body)
                    key = ck_key(ack.consumer_group, ack.topic, ack.queue_id, ack.start_offset, ack.pop_time)
                    found = pending.get(key)
                    if found is not None:
                        index = found.ck.index_of_ack(ack.ack_offset)
                        if index >= 0:
                            found.ck.bit_map |= 1 << index
                            if found.ck.bit_map == (1 << found.ck.num) - 1:
                                del pending[key]
            except Exception as e:  # one bad record must not stop the revive of the others
                log.error("revive queue %d offset %d: unusable %s record (%s); skipped", qid, offset, tag, e)
        if count:
            self._scan_offset[qid] = offset + 1
        return count >= REVIVE_READ_BATCH

    def _recover_consume_offset(self, ck: PopCheckPoint) -> None:
        if ck.num <= 0:
            return
        end = ck.ack_offset_by_index(ck.num - 1) + 1
        if self.offsets.query_offset(ck.cid, ck.topic, ck.queue_id) < end:
            self.offsets.commit_offset(ck.cid, ck.topic, ck.queue_id, end, self.controller.broker_addr)

    # -- pop offsets ----------------------------------------------------------------------------

    def pop_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Where the next pop of the queue starts (-1: the group has no offset there yet)."""
        pending = self._pop_offsets.get((group, topic, queue_id))
        return pending[0] if pending is not None else self.offsets.query_offset(group, topic, queue_id)

    def skip_to(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """The group will never pop what lies before ``offset`` (filtered out, or out of the queue)."""
        pending = self._pop_offsets.get((group, topic, queue_id))
        if pending is not None:
            pending[0] = max(pending[0], offset)
        else:
            self.offsets.commit_offset(group, topic, queue_id, offset, self.controller.broker_addr)

    def checkpoint_pending(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """A pop took the queue up to ``next_offset``; its checkpoint is on its way to the disk."""
        pending = self._pop_offsets.setdefault((group, topic, queue_id), [next_offset, 0])
        pending[0] = max(pending[0], next_offset)
        pending[1] += 1

    def checkpoint_failed(self, group: str, topic: str, queue_id: int, start_offset: int) -> None:
        """The checkpoint just put could not be stored (nothing else ran since ``checkpoint_pending``):
        its messages were not popped, the next pop takes them again."""
        key = (group, topic, queue_id)
        pending = self._pop_offsets[key]
        pending[0] = start_offset
        pending[1] -= 1
        if pending[1] == 0:
            del self._pop_offsets[key]

    def checkpoint_durable(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """That checkpoint is durable (checkpoints complete in the order they were put): the consume
        offset moves past its messages, and to the pop offset once no checkpoint of the queue waits."""
        key = (group, topic, queue_id)
        pending = self._pop_offsets[key]
        pending[1] -= 1
        if pending[1] == 0:
            next_offset = pending[0]
            del self._pop_offsets[key]
        if next_offset > self.offsets.query_offset(group, topic, queue_id):
            self.offsets.commit_offset(group, topic, queue_id, next_offset, self.controller.broker_addr)

    # -- revive ---------------------------------------------------------------------------------

    def revive_round(self) -> None:
        """Read the revive queues and put back what passed its invisible time unacked (loop thread)."""
        if self.controller.is_slave or self._revive_puts_waiting:
            return  # a round's re-puts still on their way to the disk: its offsets wait for them
        if not self._recovered:
            self.recover()
        now = now_ms()
        for qid in range(self.revive_queue_num):
            self._read_revive_queue(qid)
            due = [(key, p) for key, p in self._pending[qid].items() if p.ck.revive_time <= now]
            for key, p in due:
                del self._pending[qid][key]
                self._revive(p.ck)
            self._commit_revive_offset_when_durable(qid)

    def _commit_revive_offset_when_durable(self, qid: int) -> None:
        pending = self._pending[qid]
        offset = min((p.revive_offset for p in pending.values()), default=self._scan_offset[qid])
        if self._revive_puts_waiting == 0:
            self._commit_revive_offset(qid, offset)
            return
        # the offset is committed after the last re-put is durable (puts complete in order)
        self._after_revive_puts.append((qid, offset))

    def _commit_revive_offset(self, qid: int, offset: int) -> None:
        if offset > self.offsets.query_offset(REVIVE_GROUP, self.revive_topic, qid):
            self.offsets.commit_offset(REVIVE_GROUP, self.revive_topic, qid, offset, self.controller.broker_addr)

    def _revive(self, ck: PopCheckPoint) -> None:
        for index in range(ck.num):
            if ck.bit_map & (1 << index):
                continue
            offset = ck.ack_offset_by_index(index)
            message = self.read_message(ck.topic, ck.queue_id, offset)
            if message is None:
                log.warning("revive: %s/%d offset %d of %s is gone (retention?); dropped", ck.topic, ck.queue_id,
                            offset, ck.cid)  # fmt: skip
                continue
            self._put_back(ck, message)

    def _put_back(self, ck: PopCheckPoint, message: StoredMessage) -> None:
        """An unacked message into the group's POP retry topic with one more delivery counted, or
        into its DLQ past the group's retryMaxTimes (RocketMQ 5.x counts: a message is delivered
        at most retryMaxTimes + 1 times)."""
        c = self.controller
        group_config = c.subscription_group_manager.find_subscription_group_config(ck.cid)
        max_times = group_config.retry_max_times if group_config is not None else 16
        reconsume_times = message.reconsume_times + 1
        properties = dict(message.properties)
        properties.pop(MessageProperty.DELAY_TIME_LEVEL, None)
        properties.pop(MessageProperty.WAIT_STORE_MSG_OK, None)
        first_topic = properties.setdefault(MessageProperty.RETRY_TOPIC, original_topic(ck.topic, ck.cid))
        properties.setdefault(MessageProperty.ORIGIN_MESSAGE_ID, message.msg_id)
        properties.setdefault(PROPERTY_FIRST_POP_TIME, str(ck.pop_time))
        if reconsume_times > max_times:
            topic = dlq_topic(ck.cid)
            c.topic_config_manager.create_topic_in_send_message_back(topic, POP_DLQ_QUEUE_NUMS, PERM_READ | PERM_WRITE)
            self.dead_lettered += 1
            log.info("POP message %s of group %s goes to %s after %d deliveries",
                     properties[MessageProperty.ORIGIN_MESSAGE_ID], ck.cid, topic, reconsume_times)  # fmt: skip
        else:
            topic = pop_retry_topic(first_topic, ck.cid)
            c.topic_config_manager.create_topic_in_send_message_back(
                topic, POP_RETRY_QUEUE_NUMS, PERM_READ | PERM_WRITE
            )
            self.revived += 1
        self._revive_puts_waiting += 1
        put_durably(
            c.put_inner,
            self._revive_put_done,
            topic=topic,
            queue_id=0,
            body=message.body,
            properties=properties,
            sys_flag=message.sys_flag,
            born_timestamp=message.born_timestamp,
            born_host=message.born_host[0],
            born_port=message.born_host[1],
            flag=message.flag,
            reconsume_times=reconsume_times,
        )

    def _revive_put_done(self, result: PutMessageResult) -> None:
        if not result.ok:
            log.error("revive: a re-put failed (%s); its checkpoint is read again after a restart",
                      result.status.name)  # fmt: skip
            self._revive_put_failed = True
        self._revive_puts_waiting -= 1
        if self._revive_puts_waiting == 0:
            # a failed re-put keeps the revive offsets back: its checkpoint is revived again at restart
            if not self._revive_put_failed:
                for qid, offset in self._after_revive_puts:
                    self._commit_revive_offset(qid, offset)
                if self._after_revive_puts:
                    # on disk now, not at the next flushConsumerOffsetInterval: a crash meanwhile
                    # would read the settled checkpoints back and put their messages back once more,
                    # copies of a message its consumer may since have acked (once per restart)
                    self.controller.consumer_offset_manager.persist()
            self._after_revive_puts.clear()
            self._revive_put_failed = False

    def in_flight(self, group: str) -> int:
        """Messages of ``group`` popped and neither acked nor revived yet, as the revive service has
        read them (up to one reviveInterval behind): what a consumer progress view calls invisible."""
        return sum(self.in_flight_by_queue(group).values())

    def in_flight_by_queue(self, group: str) -> dict[tuple[str, int], int]:
        """``in_flight`` per (topic, queue id) popped from (rmq.broker.processor.pop_admin)."""
        counts: dict[tuple[str, int], int] = {}
        for pending in self._pending.values():
            for p in pending.values():
                if p.ck.cid == group:
                    key = (p.ck.topic, p.ck.queue_id)
                    counts[key] = counts.get(key, 0) + bin(~p.ck.bit_map & ((1 << p.ck.num) - 1)).count("1")
        return counts

    # -- FIFO -------------------------------------------------------------------------------------

    def order_blocked(self, group: str, topic: str, queue_id: int, now: int) -> bool:
        batch = self.order_info.get(group, topic, queue_id)
        return batch is not None and batch.blocks(now)

    def order_ack(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Ack ``offset`` of a FIFO batch; the consume offset moves to the first unacked message
        (past the batch once all are acked), then pops parked on the topic try again. False: the
        offset is not in the queue's current batch (acked already, or a batch popped again)."""
        batch = self.order_info.ack(group, topic, queue_id, offset)
        if batch is None:
            return False
        consume_offset = batch.first_unacked()
        if consume_offset > self.offsets.query_offset(group, topic, queue_id):
            self.offsets.commit_offset(group, topic, queue_id, consume_offset, self.controller.broker_addr)
        if batch.done:
            self.notify_message_arriving(topic, queue_id)
        return True

    # -- long polling (PopLongPollingService) -----------------------------------------------------

    def set_waker(self, wake: Callable[[ParkedPop, bool], None]) -> None:
        """The processor's re-run of a parked pop: ``wake(parked, expired)``."""
        self._wake = wake

    @property
    def has_parked(self) -> bool:
        return bool(self._parked)

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    def park(self, parked: ParkedPop) -> bool:
        """Hold a pop until a message arrives on its topics or its deadline; False when
        maxPopPollingSize pops wait already (answered POLLING_FULL)."""
        if len(self._parked) >= self.config.max_pop_polling_size:
            return False
        if parked.timer is None:
            parked.timer = self.controller.server.loop.call_at(parked.deadline, self._expire, parked)
        self._parked.append(parked)
        return True

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """Loop thread (``PullRequestHoldService`` hops here): wake the pops parked on ``topic``."""
        woken = [p for p in self._parked if topic in p.topics]
        if not woken:
            return
        self._parked = [p for p in self._parked if topic not in p.topics]
        for parked in woken:
            self._run(parked, expired=False)

    def _expire(self, parked: ParkedPop) -> None:
        if parked.done:
            return
        try:
            self._parked.remove(parked)
        except ValueError:
            pass
        self._run(parked, expired=True)

    def _run(self, parked: ParkedPop, expired: bool) -> None:
        if parked.done:
            return
        assert self._wake is not None
        self._wake(parked, expired)

    def finish(self, parked: ParkedPop) -> None:
        parked.done = True
        if parked.timer is not None:
            parked.timer.cancel()

    def on_channel_closed(self, channel: Any) -> None:
        for parked in [p for p in self._parked if p.channel is channel]:
            self.finish(parked)
        self._parked = [p for p in self._parked if p.channel is not channel]

    def shutdown(self) -> None:
        for parked in self._parked:
            self.finish(parked)
        self._parked.clear()


__all__ = ["POP_ORDER_REVIVE_QUEUE", "ParkedPop", "PopService", "put_durably"]
