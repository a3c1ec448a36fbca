"""POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053), as RocketMQ
5.x's PopMessageProcessor, AckMessageProcessor and ChangeInvisibleTimeProcessor serve them
(docs/pop.md; the state they share, checkpoints and revive, is ``rmq.broker.pop``'s).

Refusals, in RocketMQ's order and codes:

    POP_MESSAGE   bornTime + pollTime more than 500 ms ago        POLLING_TIMEOUT
                  the broker not readable, a slave                  NO_PERMISSION, SERVICE_NOT_AVAILABLE
                  maxMsgNums > 32 (or < 1), invisibleTime <= 0      INVALID_PARAMETER
                  no such topic / not readable                      TOPIC_NOT_EXIST / NO_PERMISSION
                  queueId >= the topic's read queues               INVALID_PARAMETER
                  no such group (autoCreateSubscriptionGroup off)   SUBSCRIPTION_GROUP_NOT_EXIST
                  the group may not consume                          NO_PERMISSION
                  exp does not parse / SQL92 off                    SUBSCRIPTION_PARSE_FAILED / SYSTEM_ERROR
    ACK, CHANGE   extraInfo unusable                                SYSTEM_ERROR naming it
                  no such topic                                     TOPIC_NOT_EXIST
                  queueId or reviveQid out of range                 MESSAGE_ILLEGAL
                  offset not in the queue                           NO_MESSAGE
                  invisibleTime < 0 (CHANGE; 0: visible again now)  INVALID_PARAMETER

A pop answers once the checkpoints of what it took are durable (SYNC_FLUSH), an ack once its ack
record is: what a consumer was told is what a restart finds.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from functools import partial
from typing import Any

from rmq._clock import now_ms
from rmq.broker.pop import ParkedPop
from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.services import PopServices
from rmq.broker.subscription_filter import NOT_BUILT, Built, Key
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers import ack_header, pop_header
from rmq.protocol.perm import is_readable
from rmq.protocol.pop import (
    ACK_TAG,
    CK_TAG,
    INIT_MODE_MAX,
    MAX_POP_NUMS,
    POLL_LATE_MILLIS,
    POP_ORDER_REVIVE_QUEUE,
    PROPERTY_POP_CK,
    AckMsg,
    ChangeInvisibleTimeResponse,
    ExtraInfo,
    PopCheckPoint,
    PopRequest,
    PopResponse,
    offset_info_entry,
    pop_retry_topic,
    real_topic,
    retry_kind,
)
from rmq.protocol.record import decode_record, encode_record
from rmq.protocol.subscription import ExpressionType
from rmq.store import GetMessageStatus, PutMessageResult

log = logging.getLogger("rmq.broker")

# what one pop reads at most (RocketMQ's maxTransferBytesOnMessageInMemory)
MAX_POP_BYTES = 256 * 1024
_CORRECTED_STATUSES = (
    GetMessageStatus.OFFSET_TOO_SMALL,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY,
    GetMessageStatus.OFFSET_FOUND_NULL,
)


@dataclasses.dataclass
class _Taken:
    """What a pop took from one queue."""

    topic: str
    queue_id: int
    start_offset: int
    next_offset: int
    queue_offsets: list[int]
    records: list[Any]
    attempts: dict[int, int] | None = None  # FIFO: offset -> times popped


class PopProcessor(Processor[PopServices]):
    def __init__(self, controller: PopServices):
        super().__init__(controller)
        self.pop = controller.pop_service
        self.store = controller.store
        self.server = controller.server
        self.pop.set_waker(self._wake)

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.POP_MESSAGE: self.pop_message,
            RequestCode.ACK_MESSAGE: self.ack_message,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible_time,
        }

    # -- POP_MESSAGE ----------------------------------------------------------------------------

    def pop_message(
        self,
        channel: Any,
        request: RemotingCommand,
        built: tuple[Key, Built] | None = None,
        parked: ParkedPop | None = None,
        expired: bool = False,
    ) -> RemotingCommand | None:
        c = self.controller
        header = pop_header(request)  # the one the ACL check read
        now = now_ms()
        if parked is None and now - header.born_time - header.poll_time > POLL_LATE_MILLIS:
            raise RequestRefused(
                ResponseCode.POLLING_TIMEOUT,
                f"the broker[{c.broker_addr}] pop message is timeout too much: bornTime {header.born_time} + "
                f"pollTime {header.poll_time} is more than {POLL_LATE_MILLIS} ms before now ({now})",
            )
        try:
            queue_nums, tag_filter = self._check(header, channel, request, built, parked, expired)
        except RequestRefused:
            if parked is not None:  # refused now (a topic deleted meanwhile): answered once, not again
                self.pop.finish(parked)
            raise
        if tag_filter is NOT_BUILT:
            return None
        taken, rest = self._take(header, queue_nums, tag_filter, now)
        if not taken:
            if header.poll_time > 0 and not expired:
                if parked is None:
                    parked = ParkedPop(
                        channel,
                        request,
                        (header.topic, pop_retry_topic(header.topic, header.consumer_group)),
                        time.monotonic() + header.poll_time / 1000,
                    )
                if self.pop.park(parked):
                    return None
                code = ResponseCode.POLLING_FULL
            else:
                code = ResponseCode.POLLING_TIMEOUT
            if parked is not None:
                self.pop.finish(parked)
            revive_qid = POP_ORDER_REVIVE_QUEUE if header.order else 0
            fields = PopResponse(now, header.invisible_time, revive_qid, rest).fields()
            return RemotingCommand.response_to(request, code, remark="NO_MESSAGE_IN_QUEUE", ext_fields=fields)
        if parked is not None:
            self.pop.finish(parked)
        return self._checkpoint_and_answer(channel, request, header, taken, rest, now)

    def _wake(self, parked: ParkedPop, expired: bool) -> None:
        self.server.answer_later(
            parked.channel, parked.request, partial(self.pop_message, parked=parked, expired=expired)
        )

    def _check(
        self,
        header: PopRequest,
        channel: Any,
        request: RemotingCommand,
        built: tuple[Key, Built] | None,
        parked: ParkedPop | None,
        expired: bool,
    ) -> tuple[int, Any]:
        """The topic's read queues and the pop's filter once every check passed (NOT_BUILT: it is
        being compiled, and the pop comes back here with it)."""
        c = self.controller
        if not is_readable(c.config.broker_permission):
            raise RequestRefused(ResponseCode.NO_PERMISSION, f"the broker[{c.broker_addr}] pop message is forbidden")
        if c.is_slave:
            raise RequestRefused(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                f"the broker[{c.broker_addr}] is a slave: POP writes checkpoints, pop from the master",
            )
        # a slave promoted since: its consume offsets are the old master's as last synced, behind
        # what the checkpoints it replicated popped (and acked): those move them first
        self.pop.recover_if_promoted()
        if not 0 < header.max_msg_nums <= MAX_POP_NUMS:
            raise RequestRefused(
                ResponseCode.INVALID_PARAMETER,
                f"the broker[{c.broker_addr}] pop message's num is {header.max_msg_nums}, expected 1 to {MAX_POP_NUMS}",
            )
        if header.invisible_time <= 0:
            raise RequestRefused(
                ResponseCode.INVALID_PARAMETER, f"invisibleTime {header.invisible_time} is illegal, expected > 0 ms"
            )
        topic_config = c.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            raise RequestRefused(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!")
        if not is_readable(topic_config.perm):
            raise RequestRefused(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] peeking message is forbidden")
        if header.queue_id >= topic_config.read_queue_nums:
            raise RequestRefused(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}]",
            )
        group_config = c.subscription_group_manager.find_subscription_group_config(header.consumer_group)
        if group_config is None:
            raise RequestRefused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist",
            )
        if not group_config.consume_enable:
            raise RequestRefused(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}"
            )
        expression_type = (header.exp_type or ExpressionType.TAG).strip().upper()
        if expression_type == ExpressionType.SQL92 and not c.config.enable_property_filter:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by SQL92 (set enablePropertyFilter=true)",
            )
        return topic_config.read_queue_nums, c.subscription_filters.find(
            header.topic,
            header.exp or "*",
            expression_type,
            built,
            lambda built: self.server.answer_later(
                channel, request, partial(self.pop_message, built=built, parked=parked, expired=expired)
            ),
        )

    def _take(self, header: PopRequest, queue_nums: int, tag_filter: Any, now: int) -> tuple[list[_Taken], int]:
        """Read up to maxMsgNums from the queues the pop names, the retry topic first in
        popFromRetryProbability percent of pops (else last, if room is left). Consume offsets move
        past what is taken at once; FIFO queues stay at their batch until it is acked."""
        group, topic = header.consumer_group, header.topic
        if header.queue_id >= 0:
            queues = [header.queue_id]
        else:
            first = random.randrange(queue_nums)
            queues = [(first + i) % queue_nums for i in range(queue_nums)]
        plan = [(topic, q) for q in queues]
        retry = pop_retry_topic(topic, group)
        retry_config = self.controller.topic_config_manager.select_topic_config(retry)
        if retry_config is not None:
            retry_queues = [(retry, q) for q in range(retry_config.read_queue_nums)]
            if random.randrange(100) < self.controller.config.pop_from_retry_probability:
                plan = retry_queues + plan
            else:
                plan = plan + retry_queues
        taken: list[_Taken] = []
        rest = 0
        room = header.max_msg_nums
        for queue_topic, queue_id in plan:
            if room <= 0:
                rest += self._backlog(group, queue_topic, queue_id)
                continue
            if header.order and self.pop.order_blocked(group, queue_topic, queue_id, now):
                continue
            got = self._take_queue(header, queue_topic, queue_id, room, tag_filter, now)
            if got is not None:
                item, backlog = got
                rest += backlog
                if item is not None:
                    taken.append(item)
                    room -= len(item.records)
        return taken, rest

    def _backlog(self, group: str, topic: str, queue_id: int) -> int:
        offset = self.pop.pop_offset(group, topic, queue_id)
        return max(0, self.store.get_max_offset_in_queue(topic, queue_id) - max(offset, 0))

    def _pop_offset(self, header: PopRequest, topic: str, queue_id: int) -> int:
        offset = self.pop.pop_offset(header.consumer_group, topic, queue_id)
        if offset >= 0:
            return offset
        if header.init_mode == INIT_MODE_MAX and topic == header.topic:
            return self.store.get_max_offset_in_queue(topic, queue_id)
        return self.store.get_min_offset_in_queue(topic, queue_id)

    def _take_queue(
        self, header: PopRequest, topic: str, queue_id: int, room: int, tag_filter: Any, now: int
    ) -> tuple[_Taken | None, int] | None:
        group = header.consumer_group
        offset = self._pop_offset(header, topic, queue_id)
        result = self.store.get_message(group, topic, queue_id, offset, room, MAX_POP_BYTES, tag_filter)
        if result.status in _CORRECTED_STATUSES and result.next_begin_offset != offset:
            offset = result.next_begin_offset
            self.pop.skip_to(group, topic, queue_id, offset)
            result = self.store.get_message(group, topic, queue_id, offset, room, MAX_POP_BYTES, tag_filter)
        backlog = max(0, result.max_offset - result.next_begin_offset)
        if result.status != GetMessageStatus.FOUND or not result.messages:
            if result.next_begin_offset > offset:  # filtered out: never to be popped by this group
                self.pop.skip_to(group, topic, queue_id, result.next_begin_offset)
            return None, backlog
        item = _Taken(topic, queue_id, offset, result.next_begin_offset, list(result.queue_offsets), result.messages)
        if header.order:
            batch = self.pop.order_info.popped(
                group, topic, queue_id, item.queue_offsets, item.next_offset, now + header.invisible_time
            )
            item.attempts = batch.attempts
        return item, backlog

    def _checkpoint_and_answer(
        self, channel: Any, request: RemotingCommand, header: PopRequest, taken: list[_Taken], rest: int, now: int
    ) -> RemotingCommand | None:
        c = self.controller
        broker_name = c.config.broker_name
        revive_qid = POP_ORDER_REVIVE_QUEUE if header.order else self.pop.next_revive_qid()
        kept: list[_Taken] = []
        waiting = [1]  # one for this call: the answer goes out when the last checkpoint is durable
        body: list[bytes] = []
        start_infos: list[str] = []
        msg_infos: list[str] = []
        order_infos: list[str] = []

        def answer() -> RemotingCommand:
            fields = PopResponse(
                now,
                header.invisible_time,
                revive_qid,
                rest,
                ";".join(start_infos),
                ";".join(msg_infos),
                ";".join(order_infos),
            ).fields()
            if not body:  # no checkpoint could be stored: as if nothing was there
                return RemotingCommand.response_to(
                    request, ResponseCode.POLLING_TIMEOUT, remark="checkpoint not stored", ext_fields=fields
                )
            c.get_counts.add(header.consumer_group, header.topic, len(body), sum(map(len, body)))
            return success(request, fields, body=body, remark="FOUND")

        def answer_when_durable(_result: PutMessageResult | None = None) -> None:
            waiting[0] -= 1
            if waiting[0] == 0:
                channel.send_response(answer())

        def durable(item: _Taken, result: PutMessageResult) -> None:
            if result.ok:
                self.pop.checkpoint_durable(header.consumer_group, item.topic, item.queue_id, item.next_offset)
            answer_when_durable()

        for item in taken:
            if header.order:
                # the queue stays at its batch: an ack moves it (ConsumerOrderInfoManager)
                c.consumer_offset_manager.commit_offset(
                    header.consumer_group, item.topic, item.queue_id, item.start_offset, channel.remote_address
                )
                kept.append(item)
                continue
            ck = PopCheckPoint(
                item.start_offset,
                now,
                header.invisible_time,
                0,
                len(item.records),
                item.queue_id,
                item.topic,
                header.consumer_group,
                0,
                [o - item.start_offset for o in item.queue_offsets],
                broker_name,
            )
            waiting[0] += 1
            # the next pop starts past these at once; the consume offset follows once the checkpoint is durable
            self.pop.checkpoint_pending(header.consumer_group, item.topic, item.queue_id, item.next_offset)
            if not self.pop.put_record(revive_qid, CK_TAG, ck.encode(), partial(durable, item)).ok:
                log.error("POP checkpoint of %s/%d not stored: its messages stay to be popped", item.topic,
                          item.queue_id)  # fmt: skip
                self.pop.checkpoint_failed(header.consumer_group, item.topic, item.queue_id, item.start_offset)
                continue
            kept.append(item)
        for item in kept:
            start_infos.append(offset_info_entry(item.topic, item.queue_id, item.start_offset))
            msg_infos.append(offset_info_entry(item.topic, item.queue_id, item.queue_offsets))
            if item.attempts is not None:
                order_infos.append(
                    offset_info_entry(item.topic, item.queue_id, max(item.attempts.values(), default=1) - 1)
                )
            for record, queue_offset in zip(item.records, item.queue_offsets, strict=True):
                extra = ExtraInfo(
                    item.start_offset,
                    now,
                    header.invisible_time,
                    revive_qid,
                    retry_kind(item.topic),
                    broker_name,
                    item.queue_id,
                    queue_offset,
                )
                attempts = item.attempts.get(queue_offset, 1) if item.attempts is not None else None
                body.append(_with_pop_ck(record, extra.encode(), header.topic, attempts))
        waiting[0] -= 1
        return answer() if waiting[0] == 0 else None

    # -- ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME ----------------------------------------------

    def _acked_message(self, request: RemotingCommand) -> tuple[ExtraInfo, str]:
        """The extraInfo and the real topic (the POP retry topic for a retried message) of an ack
        or change, once its fields name a message of this broker."""
        c = self.controller
        header = ack_header(request)
        info = ExtraInfo.decode(header.extra_info)
        topic_config = c.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            raise RequestRefused(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!")
        topic = real_topic(header.topic, header.consumer_group, info.retry)
        queue_nums = topic_config.read_queue_nums
        if topic != header.topic:
            retry_config = c.topic_config_manager.select_topic_config(topic)
            queue_nums = retry_config.read_queue_nums if retry_config is not None else 0
        if not 0 <= header.queue_id < queue_nums:
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{header.queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{queue_nums}]",
            )
        if not info.order and not 0 <= info.revive_qid < self.pop.revive_queue_num:
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"reviveQid {info.revive_qid} of extraInfo is illegal, expected 0 to {self.pop.revive_queue_num - 1}",
            )
        low = self.store.get_min_offset_in_queue(topic, header.queue_id)
        high = self.store.get_max_offset_in_queue(topic, header.queue_id)
        if not low <= header.offset < high:
            raise RequestRefused(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{header.queue_id}, old:{header.offset}, min:{low}, max:{high}",
            )
        return info, topic

    def ack_message(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        header = ack_header(request)
        info, topic = self._acked_message(request)
        if info.order:
            self.pop.order_ack(header.consumer_group, topic, header.queue_id, header.offset)
            return success(request)
        ack = AckMsg(
            header.offset,
            info.ck_queue_offset,
            header.consumer_group,
            topic,
            header.queue_id,
            info.pop_time,
            self.controller.config.broker_name,
        )
        self._put_then_answer(channel, request, [(info.revive_qid, ACK_TAG, ack.encode())], {})
        return None

    def change_invisible_time(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        header = ack_header(request)
        invisible_time = header.invisible_time or 0
        # 0 is a nack (visible again at the next revive round), as RocketMQ's broker and the 5.x
        # clients' ChangeInvisibleDuration use it
        if invisible_time < 0:
            raise RequestRefused(
                ResponseCode.INVALID_PARAMETER, f"invisibleTime {header.invisible_time} is illegal, expected >= 0 ms"
            )
        info, topic = self._acked_message(request)
        now = now_ms()
        group, queue_id, offset = header.consumer_group, header.queue_id, header.offset
        if info.order:
            self.pop.order_info.change_visible_at(group, topic, queue_id, offset, now + invisible_time)
            return success(request, ChangeInvisibleTimeResponse(now, invisible_time, POP_ORDER_REVIVE_QUEUE).fields())
        # RocketMQ's order: the new checkpoint first, then the ack of the old one; a crash between
        # the two revives the message twice at worst, never loses it
        revive_qid = self.pop.next_revive_qid()
        broker_name = self.controller.config.broker_name
        ck = PopCheckPoint(offset, now, invisible_time, 0, 1, queue_id, topic, group, 0, [0], broker_name)
        ack = AckMsg(offset, info.ck_queue_offset, group, topic, queue_id, info.pop_time, broker_name)
        records = [(revive_qid, CK_TAG, ck.encode()), (info.revive_qid, ACK_TAG, ack.encode())]
        self._put_then_answer(
            channel, request, records, ChangeInvisibleTimeResponse(now, invisible_time, revive_qid).fields()
        )
        return None

    def _put_then_answer(
        self, channel: Any, request: RemotingCommand, records: list[tuple[int, str, bytes]], fields: dict[str, str]
    ) -> None:
        """Store ``records`` in their revive queues, then answer SUCCESS with ``fields`` once all are
        durable (SYSTEM_ERROR if one could not be stored)."""
        waiting = [len(records)]
        failed: list[str] = []

        def done(result: PutMessageResult) -> None:
            if not result.ok:
                failed.append(result.status.name)
            waiting[0] -= 1
            if waiting[0] == 0:
                if failed:
                    response = RemotingCommand.response_to(
                        request, ResponseCode.SYSTEM_ERROR, remark=f"revive record not stored: {failed[0]}"
                    )
                else:
                    response = success(request, fields)
                channel.send_response(response)

        for revive_qid, tag, body in records:
            self.pop.put_record(revive_qid, tag, body, done)


def _with_pop_ck(record: Any, extra_info: str, topic: str, attempts: int | None) -> bytes:
    """The stored record as a popped message: POP_CK set, the request's topic for a retried one
    (RocketMQ's popResponseReturnActualRetryTopic false), and for FIFO the attempt as reconsumeTimes."""
    message = decode_record(record, check_crc=False)
    message.properties[PROPERTY_POP_CK] = extra_info
    message.topic = topic
    if attempts is not None:
        message.reconsume_times = max(message.reconsume_times, attempts - 1)
    return encode_record(message)
