"""PULL_MESSAGE (11), as RocketMQ's PullMessageProcessor serves it (docs/protocol.md#pulls).

Request fields: consumerGroup, topic, queueId, queueOffset, maxMsgNums, sysFlag, commitOffset,
suspendTimeoutMillis, subscription ("*", "TagA || TagB" or an SQL92 expression), subVersion,
expressionType (TAG or SQL92). sysFlag bits: 1 commit offset too, 2 suspend (long poll),
4 subscription given in the request, 8 class filter.

SQL92 subscriptions, as RocketMQ's PullMessageProcessor: an expression that does not parse is answered
SUBSCRIPTION_PARSE_FAILED (23, the remark names the position); without enablePropertyFilter a parsed
one is answered SYSTEM_ERROR "The broker does not support consumer to filter message by SQL92". The
expression is compiled once, off the event loop (``rmq.broker.subscription_filter``: the pull is
answered when its compile is done, cached per topic and expression, the outcome too), and runs on
each record's properties in the mapped CommitLog, before anything is copied into the answer. A pull that
matched nothing in its scan answers PULL_RETRY_IMMEDIATELY with nextBeginOffset past what it scanned,
as a tag miss does, so a long run of misses never stalls a consumer.

Reply extFields, all four on every code (some clients read them only when they are strings, and
read them whatever the code): nextBeginOffset, minOffset, maxOffset, suggestWhichBrokerId. A FOUND
reply's body is the stored records back to back, written from the CommitLog mapping without a copy.

Store outcome -> response code, as RocketMQ maps them:

    FOUND                                      0  SUCCESS
    NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING  20  PULL_RETRY_IMMEDIATELY (next offset past the scan)
    NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE  21 PULL_OFFSET_MOVED if the offset asked is not 0,
                                               19 PULL_NOT_FOUND otherwise
    OFFSET_FOUND_NULL, OFFSET_OVERFLOW_ONE    19  PULL_NOT_FOUND (nothing new: a long poll parks here)
    OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL   21  PULL_OFFSET_MOVED (nextBeginOffset corrected)

A pull with nothing new and the suspend bit is parked (``rmq.broker.long_polling``) and answered as
soon as a message arrives on its queue, or with PULL_NOT_FOUND after suspendTimeoutMillis.

suggestWhichBrokerId, as RocketMQ 4.x sets it: without slaveReadEnable always the master (0). With
it, the group's whichBrokerWhenConsumeSlowly (a slave, 1 by default) when the messages just read lie
further behind the CommitLog's end than accessMessageInMemoryMaxRatio percent of physical memory
(they are likely no longer in the page cache: let a slave serve that consumer), else the group's
brokerId (0). Clients pull that queue from the suggested broker next.

A slave serves what it holds. An offset out of its range is not corrected there (its copy may just
be behind the master's): PULL_OFFSET_MOVED becomes PULL_RETRY_IMMEDIATELY with nextBeginOffset the
offset asked, suggesting the group's brokerId (the master), as RocketMQ's slave answers
(offsetCheckInSlave false).
"""

from __future__ import annotations

import logging
import os
import struct
from functools import partial
from typing import TYPE_CHECKING

from rmq.broker.config import BrokerRole
from rmq.broker.long_polling import ParkedPull
from rmq.broker.processor.base import Lane, Processor
from rmq.broker.services import PullServices
from rmq.broker.subscription_filter import NOT_BUILT, Built, Key
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers import DEFAULT_PULL_MAX_MSG_NUMS, pull_header
from rmq.protocol.heartbeat import MessageModel
from rmq.protocol.layout import REC_PHYSICALOFFSET
from rmq.protocol.perm import is_readable
from rmq.protocol.request_flags import PullSysFlag
from rmq.protocol.route import MASTER_ID
from rmq.protocol.subscription import ExpressionType
from rmq.store import GetMessageStatus

if TYPE_CHECKING:
    from rmq.broker.subscription_group import SubscriptionGroupConfig
    from rmq.store import TagFilter

log = logging.getLogger("rmq.broker")


# RocketMQ's maxTransferCountOnMessageInMemory / maxTransferBytesOnMessageInMemory.
MAX_TRANSFER_COUNT = DEFAULT_PULL_MAX_MSG_NUMS
MAX_TRANSFER_BYTES = 256 * 1024

_NOT_FOUND_STATUSES = (GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.OFFSET_OVERFLOW_ONE)
_MOVED_STATUSES = (GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_TOO_SMALL)
_EMPTY_QUEUE_STATUSES = (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE)
_PHYSICAL_OFFSET = struct.Struct(">q")


def total_physical_memory() -> int:
    """Bytes of RAM of this host (RocketMQ's StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 1 << 34  # 16 GiB when the host does not say


def pull_response(
    request: RemotingCommand,
    code: int,
    next_begin_offset: int,
    min_offset: int,
    max_offset: int,
    suggest_broker_id: int = MASTER_ID,
    remark: str | None = None,
    body=b"",
) -> RemotingCommand:
    return RemotingCommand.response_to(
        request,
        code,
        remark=remark,
        body=body,
        ext_fields={
            "nextBeginOffset": str(next_begin_offset),
            "minOffset": str(min_offset),
            "maxOffset": str(max_offset),
            "suggestWhichBrokerId": str(suggest_broker_id),
        },
    )


class PullProcessor(Processor[PullServices]):
    # what a pull reads at most, for the compiled pull lane too
    max_transfer_count = MAX_TRANSFER_COUNT
    max_transfer_bytes = MAX_TRANSFER_BYTES

    def __init__(self, controller: PullServices):
        super().__init__(controller)
        self.store = controller.store
        self.hold = controller.pull_hold
        self.get_counts = controller.get_counts
        self.filters = controller.subscription_filters
        self.server = controller.server
        self.enable_property_filter = controller.config.enable_property_filter
        self.hold.set_executor(self.execute)
        self.lane: Lane | None = None  # the compiled pull lane, if the broker runs one
        self.role_changed()
        # how far behind the CommitLog's end a read may lie before the answer suggests a slave
        ratio = controller.store_config.access_message_in_memory_max_ratio
        self.in_memory_bytes = total_physical_memory() * ratio // 100

    def role_changed(self) -> None:
        self.slave = self.controller.config.broker_role is BrokerRole.SLAVE
        if self.lane is not None:
            self.lane.role_changed()

    def handlers(self):
        return {RequestCode.PULL_MESSAGE: self.pull_message}

    def pull_message(self, channel, request: RemotingCommand, built: tuple[Key, Built] | None = None):
        """``built``: the subscription's filter, when its compile hands the pull back."""
        ext = request.ext_fields
        try:
            pull = self._parse(channel, request, built)
        except RequestRefused as e:
            # Refusals carry the four fields too: offsets unchanged, so a client that reads them
            # anyway does not jump.
            offset = ext.get("queueOffset", "0")
            return pull_response(
                request, e.code, int(offset) if offset.lstrip("-").isdigit() else 0, 0, 0, remark=e.remark
            )
        if pull is None:
            return None  # answered once its filter is compiled
        return self.execute(pull, allow_suspend=True)

    # -- parsing and checks (before any read) --------------------------------------------------

    def _parse(self, channel, request: RemotingCommand, built: tuple[Key, Built] | None) -> ParkedPull | None:
        controller = self.controller
        header = pull_header(request)  # the one the ACL check read
        group = header.consumer_group
        topic = header.topic
        queue_id = header.queue_id
        sys_flag = header.sys_flag
        group_config = self._check(group, topic, queue_id, header.queue_offset)
        sub_string, expression_type = self._subscription(
            group_config, topic, sys_flag, header.subscription, header.expression_type
        )
        tag_filter = self.filters.find(
            topic,
            sub_string,
            expression_type,
            built,
            lambda built: self.server.answer_later(channel, request, partial(self.pull_message, built=built)),
        )
        if tag_filter is NOT_BUILT:
            return None
        if expression_type.strip().upper() == ExpressionType.SQL92 and not self.enable_property_filter:
            # RocketMQ's words, which its clients show
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by SQL92 (set enablePropertyFilter=true)",
            )
        self._commit(group, topic, queue_id, sys_flag, header.commit_offset, channel.remote_address)
        if sys_flag & PullSysFlag.SUSPEND:
            if controller.config.long_polling_enable:
                timeout_ms = header.suspend_timeout_millis
            else:
                timeout_ms = controller.config.short_polling_time_mills
        else:
            timeout_ms = 0
        return ParkedPull(
            channel,
            request,
            group,
            topic,
            queue_id,
            header.queue_offset,
            min(max(header.max_msg_nums, 1), MAX_TRANSFER_COUNT),
            tag_filter,
            timeout_ms,
            group_config.broker_id,
            group_config.which_broker_when_consume_slowly,
        )

    def _check(self, group: str, topic: str, queue_id: int, queue_offset: int) -> SubscriptionGroupConfig:
        """The pull's group config, once the group may consume from this queue of a readable topic."""
        controller = self.controller
        group_config = controller.subscription_group_manager.find_subscription_group_config(group)
        if group_config is None:
            raise RequestRefused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group {group!r} does not exist"
            )
        if not group_config.consume_enable:
            # 4.x's words: clients and operators match on them
            raise RequestRefused(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        topic_config = controller.topic_config_manager.select_topic_config(topic)
        if topic_config is None:
            raise RequestRefused(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist on this broker")
        if not is_readable(topic_config.perm):
            raise RequestRefused(ResponseCode.NO_PERMISSION, f"topic {topic!r} is not readable")
        if queue_id < 0 or queue_id >= topic_config.read_queue_nums:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal: topic {topic!r} has {topic_config.read_queue_nums} read queues",
            )
        if queue_offset < 0:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR, f"queueOffset {queue_offset} is illegal: offsets start at 0"
            )
        return group_config

    def _subscription(
        self,
        group_config: SubscriptionGroupConfig,
        topic: str,
        sys_flag: int,
        subscription: str | None,
        expression_type: str | None,
    ) -> tuple[str, str]:
        """(expression, its type): the pull's own (sysFlag's subscription bit), else the one the
        group's consumers registered by heartbeat, once the group may consume the way they said
        (consumeBroadcastEnable, checked here as 4.x checks it: Java's consumers do not send the
        subscription bit)."""
        if sys_flag & PullSysFlag.SUBSCRIPTION:
            return subscription or "*", expression_type or ExpressionType.TAG
        group = group_config.group_name
        consumers = self.controller.client_manager.consumers
        info = consumers.get_consumer_group_info(group)
        if (
            info is not None
            and info.message_model is MessageModel.BROADCASTING
            and not group_config.consume_broadcast_enable
        ):
            raise RequestRefused(
                ResponseCode.NO_PERMISSION, f"the consumer group[{group}] can not consume by broadcast way"
            )
        registered = consumers.find_subscription_data(group, topic)
        if registered is None:
            raise RequestRefused(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"group {group!r} has no subscription to {topic!r}: send a heartbeat first, "
                "or give the subscription in the pull",
            )
        return registered.sub_string, registered.expression_type

    def _commit(self, group: str, topic: str, queue_id: int, sys_flag: int, offset: int, client: str) -> None:
        """The offset a pull carries (commitOffset), committed on a master."""
        if sys_flag & PullSysFlag.COMMIT_OFFSET and offset >= 0 and not self.slave:
            self.controller.consumer_offset_manager.commit_offset(group, topic, queue_id, offset, client)

    # -- the compiled pull lane's two calls per pull (rmq.broker._pull_lane) ---------------------

    def lane_filter(
        self,
        group: str,
        topic: str,
        queue_id: int,
        sys_flag: int,
        subscription: str | None,
        expression_type: str | None,
    ) -> tuple[SubscriptionGroupConfig, TagFilter | None] | None:
        """The group config and tag filter of a pull the lane may serve (it checked the queue
        offset), as ``_parse`` finds them; None when the lane leaves the pull here: a refusal, an
        SQL92 subscription, a filter not yet built."""
        try:
            group_config = self._check(group, topic, queue_id, 0)
            sub_string, expression_type = self._subscription(
                group_config, topic, sys_flag, subscription, expression_type
            )
        except RequestRefused:
            return None
        if expression_type.strip().upper() != ExpressionType.TAG:
            return None
        found = self.filters.lookup(topic, sub_string, expression_type)
        if found is NOT_BUILT or isinstance(found, tuple):
            return None
        return group_config, found

    def lane_served(
        self,
        group_config: SubscriptionGroupConfig,
        group: str,
        topic: str,
        queue_id: int,
        sys_flag: int,
        commit_offset: int,
        client: str,
        count: int,
        size: int,
        last_physical_offset: int,
    ) -> int:
        """What a pull the lane answered FOUND does besides its answer: its offset committed, its
        messages counted. Its suggestWhichBrokerId."""
        suggest = self._suggest_after(
            last_physical_offset, group_config.broker_id, group_config.which_broker_when_consume_slowly
        )
        self._commit(group, topic, queue_id, sys_flag, commit_offset, client)
        self.get_counts.add(group, topic, count, size)
        return suggest

    # -- reading -------------------------------------------------------------------------------

    def execute(self, pull: ParkedPull, allow_suspend: bool, expired: bool = False) -> RemotingCommand | None:
        """Read for ``pull``; the response, or None when the pull is parked (again).

        ``allow_suspend`` is True on the first pass; a parked pull woken by an arrival that brought
        nothing for it (another tag) parks again until its deadline (``expired``)."""
        while True:
            result = self.store.get_message(
                pull.group,
                pull.topic,
                pull.queue_id,
                pull.queue_offset,
                pull.max_msgs,
                MAX_TRANSFER_BYTES,
                pull.tag_filter,
            )
            status = result.status_code
            if allow_suspend or expired or status != GetMessageStatus.NO_MATCHED_MESSAGE or pull.timeout_ms <= 0:
                break
            # Woken, but what arrived is not for this subscription: skip it, then look further or
            # wait on.
            pull.queue_offset = result.next_begin_offset
            if result.next_begin_offset >= result.max_offset:
                self.hold.park(pull)
                return None
        if status == GetMessageStatus.FOUND:
            messages = result.messages
            self.get_counts.add(pull.group, pull.topic, len(messages), sum(map(len, messages)))
            return pull_response(
                pull.request,
                ResponseCode.SUCCESS,
                result.next_begin_offset,
                result.min_offset,
                result.max_offset,
                self._suggest(pull, messages),
                body=messages,
            )
        if status in _NOT_FOUND_STATUSES:
            code = ResponseCode.PULL_NOT_FOUND
        elif status in _MOVED_STATUSES:
            code = ResponseCode.PULL_OFFSET_MOVED
        elif status in _EMPTY_QUEUE_STATUSES:
            code = ResponseCode.PULL_OFFSET_MOVED if pull.queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:  # NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        if code == ResponseCode.PULL_NOT_FOUND and pull.timeout_ms > 0 and not expired:
            self.hold.park(pull)
            return None
        next_begin_offset = result.next_begin_offset
        suggest = self._suggest(pull)
        if code == ResponseCode.PULL_OFFSET_MOVED and self.slave:
            # the slave's copy may be behind the master's: no correction here (module docstring)
            code, next_begin_offset = ResponseCode.PULL_RETRY_IMMEDIATELY, pull.queue_offset
            suggest = pull.suggest_broker_id
        return pull_response(pull.request, code, next_begin_offset, result.min_offset, result.max_offset, suggest)

    def _suggest(self, pull: ParkedPull, messages=()) -> int:
        """suggestWhichBrokerId (module docstring)."""
        last = _PHYSICAL_OFFSET.unpack_from(messages[-1], REC_PHYSICALOFFSET)[0] if messages else -1
        return self._suggest_after(last, pull.suggest_broker_id, pull.slow_broker_id)

    def _suggest_after(self, last_physical_offset: int, broker_id: int, slow_broker_id: int) -> int:
        """Far behind: the last message read (at ``last_physical_offset``, -1: none) lies further
        from the CommitLog's end than fits in memory (RocketMQ's isSuggestPullingFromSlave)."""
        if not self.controller.config.slave_read_enable:  # read here: it changes live
            return MASTER_ID
        if last_physical_offset >= 0 and self.store.get_max_phy_offset() - last_physical_offset > self.in_memory_bytes:
            return slow_broker_id
        return broker_id
