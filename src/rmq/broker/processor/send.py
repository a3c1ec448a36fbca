"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320), as RocketMQ's
SendMessageProcessor serves them (docs/protocol.md#sends).

Header fields (V2 short key / long name)::

    a producerGroup   b topic          c defaultTopic   d defaultTopicQueueNums  e queueId
    f sysFlag         g bornTimestamp  h flag           i properties             j reconsumeTimes
    k unitMode        l maxReconsumeTimes               m batch                  (n brokerName: ignored)

Batch bodies (code 320, or 310 with m=true) are ``rmq.protocol.batch``'s.

Reply extFields: msgId (the broker's offset msgId; comma-joined for a batch), queueId, queueOffset.
The body is stored as it came: compressed bodies (sysFlag bit 0) stay compressed for the consumer.

The handler runs on the event loop thread and never waits for the disk: under SYNC_FLUSH the put
is left pending, and the loop answers it when the flush round that made it durable ends.

Overload: RocketMQ's send queue, mapped onto one loop
----------------------------------------------------
RocketMQ queues each send for its send thread pool (``sendThreadPoolQueueCapacity`` 10000; a full
queue is answered SYSTEM_BUSY ``[OVERLOAD]`` by NettyRemotingAbstract) and BrokerFastFailure looks
at that queue every 10 ms: while the CommitLog's put lock has been held longer than
``osPageCacheBusyTimeOutMills`` (isOSPageCacheBusy) it answers the queued sends ``[PCBUSY_CLEAN_QUEUE]``
(new ones get ``[REJECTREQUEST]``), and a send queued longer than ``waitTimeMillsInSendQueue`` gets
``[TIMEOUT_CLEAN_QUEUE]``. rmq has no send thread pool: the loop puts a send as soon as it is read,
so what can pile up is elsewhere, and each bound sits where it is:

=====================================  ===========================================================
RocketMQ                               rmq
=====================================  ===========================================================
a send queued for a send thread        a send read but not yet served: the rest of a read held by a
                                       connection whose peer does not read its answers (the
                                       channel's backlog, at most one read); served when the peer
                                       reads, or refused ``[TIMEOUT_CLEAN_QUEUE]`` when it waited
                                       past waitTimeMillsInSendQueue (``Channel.read_at``)
the send thread pool queue's size      sends stored and not yet answered: waiting for the disk
(sendThreadPoolQueueSize)              (SYNC_FLUSH) or a slave (SYNC_MASTER), the store's
                                       ``commit_queue_size``; past sendThreadPoolQueueCapacity a
                                       new send is refused ``[OVERLOAD]`` before it is stored
the put lock held past                 the oldest send waiting for the disk waited past
osPageCacheBusyTimeOutMills            osPageCacheBusyTimeOutMills (the store's
                                       ``disk_wait_seconds``): new sends are refused
                                       ``[PCBUSY_CLEAN_QUEUE]`` (a send rmq refuses is one it has
                                       read, RocketMQ's queued case) until the flush catches up
answers not yet written                the connection's output buffer; past max_pending_output the
                                       connection is not read (``rmq.net.channel``)
=====================================  ===========================================================

A send refused busy was not stored; a stored send is never answered busy (one waiting too long for
the disk gets FLUSH_DISK_TIMEOUT at syncFlushTimeout, as RocketMQ's). Clients retry SYSTEM_BUSY on
another broker (RocketMQ 5.x's producer, ``rmq.client.producer``). ``busy_refusals`` counts the
refusals by reason for the metrics (``rmq_system_busy_total``). A consumer's CONSUMER_SEND_MSG_BACK
runs on RocketMQ's send thread pool too, and gets the same refusals (``busy_answer``).
"""

from __future__ import annotations

import logging
import random
from time import monotonic

from rmq.broker.processor.base import Lane, Processor, require_writeable_broker
from rmq.broker.services import SendServices
from rmq.broker.topic_config import TopicConfig
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.net.frame import FLAG_ONEWAY, FLAG_RESPONSE
from rmq.protocol.batch import decode_batch
from rmq.protocol.codes import DEGRADED_SEND_CODES, RequestCode, ResponseCode
from rmq.protocol.headers import SendHeader, send_header
from rmq.protocol.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    NAME_VALUE_SEPARATOR,
    NOT_ALLOWED_SEND_TOPICS,
    PROPERTIES_MAX_LENGTH,
    RETRY_GROUP_TOPIC_PREFIX,
    TIMER_PROPERTY_MARK,
    MessageProperty,
    decode_properties,
    dlq_topic,
    encode_properties,
    topic_error,
)
from rmq.protocol.perm import PERM_READ, PERM_WRITE, is_writeable
from rmq.protocol.record import ipv4_to_int
from rmq.protocol.topic_attributes import message_type_of, type_conflict
from rmq.protocol.transaction import PREPARED_MARK, is_prepared
from rmq.store import MessageStore, PutMessageStatus

log = logging.getLogger("rmq.broker")


# Dead letters of a group go to one queue.
DLQ_NUMS_PER_GROUP = 1

_DELAY_MARK = MessageProperty.DELAY_TIME_LEVEL + NAME_VALUE_SEPARATOR
_NO_WAIT_MARK = MessageProperty.WAIT_STORE_MSG_OK + NAME_VALUE_SEPARATOR + "false"
_TIMER_MARK = TIMER_PROPERTY_MARK  # the timer store decides the rest (rmq.broker.timer)
_TIMER_MARK_BYTES = _TIMER_MARK.encode()

# Why a send was answered SYSTEM_BUSY (RocketMQ's remark prefixes; module docstring).
_OVERLOAD = "OVERLOAD"
_PCBUSY_CLEAN_QUEUE = "PCBUSY_CLEAN_QUEUE"
_TIMEOUT_CLEAN_QUEUE = "TIMEOUT_CLEAN_QUEUE"
BUSY_REASONS = (_OVERLOAD, _PCBUSY_CLEAN_QUEUE, _TIMEOUT_CLEAN_QUEUE)

# RocketMQ's remark of a send its store refused; {usage}: " [<diskUtil()>]" where the processor reads
# it (service_not_available), "" in a store's late refusal (_PUT_OUTCOMES: the store shut down, or
# went full, between the processor's checks and the put).
_SERVICE_NOT_AVAILABLE_REMARK = (
    "service not available now. It may be caused by one of the following reasons: the broker's disk "
    "is full{usage}, messages are put to the slave, message store has been shut down, etc."
)

# PutMessageStatus -> (response code, remark); codes 10-12 mean "stored, but degraded".
_PUT_OUTCOMES: dict[int, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, "stored, but not flushed to disk in time"),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, "stored, but no slave acked in time"),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, "stored, but no slave is available"),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        _SERVICE_NOT_AVAILABLE_REMARK.format(usage=""),
    ),
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, the disk may be full or broken",
    ),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal: too large, or its topic or queue is invalid",
    ),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        f"the message properties are longer than {PROPERTIES_MAX_LENGTH} bytes",
    ),
    PutMessageStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "unknown store error"),
}

# The hot path names plain ints: on Python 3.11 every use of an enum member is a class-attribute
# lookup (~50 ns), and a send names several.
# PUT_OK up to SLAVE_NOT_AVAILABLE: the message is stored (the others are degraded outcomes)
_STORED_DEGRADED = int(PutMessageStatus.SLAVE_NOT_AVAILABLE)
# _PUT_OUTCOMES as the reply needs it: status -> (code, remark, whether the reply says where the
# message went: it did, when stored, even if degraded).
_PUT_REPLIES: dict[int, tuple[int, str | None, bool]] = {
    int(status): (int(code), remark, code == ResponseCode.SUCCESS or code in DEGRADED_SEND_CODES)
    for status, (code, remark) in _PUT_OUTCOMES.items()
}
_UNKNOWN_PUT_REPLY = (int(ResponseCode.SYSTEM_ERROR), "unknown store status", False)


def _check_message_type(topic_config: TopicConfig, properties: str) -> None:
    """Refuse (MESSAGE_ILLEGAL, as RocketMQ 5.x's proxy answers a remoting send) a message whose type
    is not its topic's ``message.type`` attribute; retry and dead-letter topics, and messages a
    replicator moved (TRANSFER_FLAG), are not checked, as there."""
    topic = topic_config.topic_name
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return
    props = decode_properties(properties)
    if MessageProperty.TRANSFER_FLAG in props:
        return
    conflict = type_conflict(topic_config.message_type, message_type_of(props))
    if conflict is not None:
        raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, f"{conflict} (topic {topic})")


class SendProcessor(Processor[SendServices]):
    """Stores what producers send; wakes the pulls parked on the queue it went to."""

    def __init__(self, controller: SendServices):
        super().__init__(controller)
        # the compiled lane that serves the plain sends before they reach this processor
        # (rmq.broker._send_lane), told when the role changes
        self.lane: Lane | None = None
        self.store = controller.store
        self.topics = controller.topic_config_manager
        self.broker_config = controller.config
        self.max_message_size = controller.store.max_message_size
        self.role_changed()
        self.wait_limit = controller.config.wait_time_mills_in_send_queue / 1000
        self.queue_capacity = controller.config.send_thread_pool_queue_capacity
        self.disk_busy_limit = controller.store.config.os_page_cache_busy_time_out_mills / 1000
        self.busy_refusals = dict.fromkeys(BUSY_REASONS, 0)
        self._born_hosts: dict[str, tuple[int, int]] = {}
        self._writable_topics: dict[str, TopicConfig] = {}
        self._topics_version = -1
        self._hold = controller.pull_hold
        self._loop = controller.server.loop
        self._timer = controller.timer_message_store

    def role_changed(self) -> None:
        controller = self.controller
        # a send waits for the disk (SYNC_FLUSH) or for a slave (SYNC_MASTER) unless WAIT=false
        self.waits = controller.store.sync_flush or controller.store.sync_master
        self.slave = controller.store.slave
        self._request_flush_round = controller.flush_rounds.request if controller.flush_rounds else None
        if self.lane is not None:
            self.lane.role_changed()

    def handlers(self):
        return {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
        }

    # -- the request ------------------------------------------------------------------------

    def busy_answer(self, channel, request: RemotingCommand) -> RemotingCommand | None:
        """RocketMQ's fast failure (module docstring) of a request its send thread pool would queue,
        before it costs anything: SYSTEM_BUSY when it waited too long since it was read, or the
        sends held unanswered are too many or too old; None to serve it. A send, and a consumer's
        CONSUMER_SEND_MSG_BACK (RocketMQ runs both on that pool, so BrokerFastFailure clears both)."""
        waited = monotonic() - channel.read_at
        if waited > self.wait_limit:
            return self._busy(request, _TIMEOUT_CLEAN_QUEUE, waited)
        if self.waits:  # in RocketMQ's order: a busy disk is noticed before the queue is full
            if self.store.disk_wait_seconds > self.disk_busy_limit:
                return self._busy(request, _PCBUSY_CLEAN_QUEUE, waited)
            if self.store.commit_queue_size >= self.queue_capacity:
                return self._busy(request, _OVERLOAD, waited)
        return None

    def _not_taking_sends(self) -> str | None:
        """Why this broker takes no send now (SERVICE_NOT_AVAILABLE's remark), or None."""
        where = f"broker {self.broker_config.broker_name} at {self.controller.broker_addr}"
        if self.slave:
            # RocketMQ's store: "message store is slave mode, so putMessage is forbidden"
            return (
                f"service not available now: {where} is a slave (brokerId {self.broker_config.broker_id}); "
                "messages are put to its master"
            )
        if self.store.fenced:
            return (
                f"service not available now: {where} was refused as master by the name servers (another "
                f"master of that name has a newer epoch than its {self.store.epoch}): send to the routed "
                "master, or restart this one as a slave"
            )
        if self.store.master_lease_expired:
            return (
                f"service not available now: {where} stalled past its master lease; it takes sends again "
                "once the controllers confirm it is still master (else its set's new master does)"
            )
        if self.store.disk_full:
            return service_not_available(self.store)
        return None

    def send_message(self, channel, request: RemotingCommand):
        busy = self.busy_answer(channel, request)
        if busy is not None:
            return busy
        refused = self._not_taking_sends()
        if refused is not None:
            return RemotingCommand.response_to(request, ResponseCode.SERVICE_NOT_AVAILABLE, remark=refused)
        controller = self.controller
        # the header the ACL check read, if it ran (rmq.protocol.headers)
        header = send_header(request)
        topic = header.topic
        queue_id = header.queue_id
        sys_flag = header.sys_flag
        born_timestamp = header.born_timestamp
        reconsume_times = header.reconsume_times
        properties = header.properties

        # _check_topic's and _born_host's cache hits inline: on this path a call costs more than them
        topic_config = self._writable_topics.get(topic)
        if topic_config is None or self._topics_version != self.topics.data_version.counter:
            topic_config = self._check_topic(channel, header)
        if topic_config.attributes and self.broker_config.enable_topic_message_type_check:
            _check_message_type(topic_config, properties)
        if queue_id < 0:
            queue_id = random.randrange(max(1, topic_config.write_queue_nums))
        elif queue_id >= topic_config.write_queue_nums and queue_id >= topic_config.read_queue_nums:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal: topic {topic!r} has "
                f"{topic_config.write_queue_nums} write queues (0-{topic_config.write_queue_nums - 1})",
            )
        remote_address = channel.remote_address
        born_host, born_port = self._born_hosts.get(remote_address) or self._born_host(remote_address)
        wait = self.waits and _NO_WAIT_MARK not in properties

        if header.batch:
            return self._send_batch(
                channel, request, topic, queue_id, sys_flag, born_timestamp, born_host, born_port, properties, wait
            )

        body = request.body
        if len(body) > self.max_message_size:
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"message body is {len(body)} bytes, more than maxMessageSize {self.max_message_size}",
            )
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            topic, queue_id = self._retry_or_dlq(header, queue_id)
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                properties = _without_delay(properties)
        if PREPARED_MARK in properties and is_prepared(properties):  # a half message (rmq.broker.transaction)
            callback = self._durable_callback(channel, request, queue_id) if wait else None
            result = controller.transactions.prepare_message(
                topic, queue_id, body, properties, sys_flag, born_timestamp, header.flag, reconsume_times,
                born_host, born_port, callback,
            )  # fmt: skip
            return self._answer_put(request, result, topic, queue_id)
        if _TIMER_MARK in properties:
            topic, queue_id, properties = self._timer.redirect(topic, queue_id, properties)
        if _DELAY_MARK in properties:
            topic, queue_id, props = controller.schedule_redirect(topic, queue_id, properties)
        else:
            props = properties.encode()
        if len(props) > PROPERTIES_MAX_LENGTH:
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"message properties are {len(props)} bytes, more than {PROPERTIES_MAX_LENGTH}",
            )
        callback = self._durable_callback(channel, request, queue_id) if wait else None
        result = self.store.put_message(
            topic,
            queue_id,
            body,
            props,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            flag=header.flag,
            reconsume_times=reconsume_times,
            born_host=born_host,
            born_port=born_port,
            callback=callback,
        )
        return self._answer_put(request, result, topic, queue_id)

    def _busy(self, request: RemotingCommand, reason: str, waited: float) -> RemotingCommand:
        """SYSTEM_BUSY with RocketMQ's remark for ``reason``; nothing was stored."""
        self.busy_refusals[reason] += 1
        if reason == _OVERLOAD:
            remark = "[OVERLOAD]system busy, start flow control for a while"
        else:
            remark = (
                f"[{reason}]broker busy, start flow control for a while, period in queue: "
                f"{int(waited * 1000)}ms, size of queue: {self.store.commit_queue_size}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SYSTEM_BUSY, remark=remark)

    def _send_batch(
        self,
        channel,
        request,
        topic,
        queue_id,
        sys_flag,
        born_timestamp,
        born_host,
        born_port,
        properties: str,
        wait: bool,
    ):
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"batch send to retry topic {topic!r}: batches do not support retry topics",
            )
        records = decode_batch(request.body)
        total = sum(len(body) for body, _, _ in records)
        if total > self.max_message_size:
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"batch bodies are {total} bytes, more than maxMessageSize {self.max_message_size}",
            )
        # The batch header's own properties (if any) are appended to every message's, as RocketMQ does.
        extra = properties.encode()
        messages: list[tuple[bytes, bytes | dict[str, str], int]] = []
        for body, props, flag in records:
            if extra:
                props = props + extra if not props or props.endswith(b"\x02") else props + b"\x02" + extra
            if _DELAY_MARK.encode() in props:
                raise RequestRefused(
                    ResponseCode.MESSAGE_ILLEGAL, "batch messages do not support delay levels (DELAY property)"
                )
            if _TIMER_MARK_BYTES in props:
                raise RequestRefused(
                    ResponseCode.MESSAGE_ILLEGAL, "batch messages do not support timer properties (TIMER_*)"
                )
            if len(props) > PROPERTIES_MAX_LENGTH:
                raise RequestRefused(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"message properties are {len(props)} bytes, more than {PROPERTIES_MAX_LENGTH}",
                )
            messages.append((body, props, flag))
        callback = self._durable_callback(channel, request, queue_id) if wait else None
        result = self.store.put_messages(
            topic,
            queue_id,
            messages,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            born_host=born_host,
            born_port=born_port,
            callback=callback,
        )
        return self._answer_put(request, result, topic, queue_id)

    def _answer_put(self, request, result, topic: str, queue_id: int):
        """Wake the pulls parked on the queue; the reply now, or (waiting for the disk) a flush
        round asked for and the reply left to the completion."""
        if result.status_code <= _STORED_DEGRADED and self._hold.has_parked:
            self._hold.notify_message_arriving(topic, queue_id)
        if self._request_flush_round is not None:  # a flush round, new bytes for the slaves
            self._request_flush_round()
        if result.pending:  # the completion answers
            return None
        return _put_response(request, result, queue_id)

    # -- SYNC_FLUSH completions ----------------------------------------------------------------

    def _durable_callback(self, channel, request, queue_id: int):
        """The store's completion for a put that waits for the disk. The loop runs it when the
        flush round ends; only the puts still waiting at shutdown complete on another thread."""
        loop = self._loop

        def on_durable(result):
            if request.flag & FLAG_ONEWAY:  # stored and waited for, as RocketMQ's, but not answered
                return
            response = _put_response(request, result, queue_id)
            if loop.in_loop_thread():
                channel.send_response(response)
            else:
                try:
                    loop.call_soon_threadsafe(channel.send_response, response)
                except RuntimeError:
                    pass  # the loop is closed: so is the connection

        return on_durable

    def _check_topic(self, channel, header: SendHeader) -> TopicConfig:
        # The topic table changes rarely; its version says when the cached configs are stale.
        version = self.topics.data_version.counter
        if version != self._topics_version:
            self._topics_version = version
            self._writable_topics.clear()
        topic = header.topic
        topic_config = self._writable_topics.get(topic)
        if topic_config is not None:
            return topic_config
        topic_config = self._select_and_check_topic(channel, header)
        self._writable_topics[topic] = topic_config
        return topic_config

    def _select_and_check_topic(self, channel, header: SendHeader) -> TopicConfig:
        topic = header.topic
        topic_config = self.topics.select_topic_config(topic)
        if topic_config is None:
            reason = topic_error(topic)
            if reason is not None:
                raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, reason)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise RequestRefused(
                ResponseCode.NO_PERMISSION, f"sending message to topic {topic!r} is forbidden: it is the broker's own"
            )
        require_writeable_broker(self.controller)
        if topic_config is None:
            default_topic = header.default_topic or AUTO_CREATE_TOPIC_KEY_TOPIC
            try:
                topic_config = self.topics.create_topic_in_send_message(
                    topic, default_topic, header.default_topic_queue_nums, 0, channel.remote_address
                )
            except RequestRefused:
                if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    raise
                topic_config = self.topics.create_topic_in_send_message_back(topic, 1, PERM_READ | PERM_WRITE)
        if not is_writeable(topic_config.perm):
            raise RequestRefused(
                ResponseCode.NO_PERMISSION, f"topic {topic!r} is not writeable (perm {topic_config.perm})"
            )
        return topic_config

    def _retry_or_dlq(self, header: SendHeader, queue_id: int) -> tuple[str, int]:
        """A send straight to ``%RETRY%<group>`` (newer clients' consume-failure path): past the
        group's max reconsume times it goes to ``%DLQ%<group>`` (RocketMQ's handleRetryAndDLQ).
        ``queue_id``: the retry queue, already picked for a negative queueId, as RocketMQ picks it
        before handleRetryAndDLQ."""
        topic = header.topic
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group_config = self.controller.subscription_group_manager.find_subscription_group_config(group)
        if group_config is None:
            raise RequestRefused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group {group!r} does not exist"
            )
        max_times = header.max_reconsume_times
        if max_times is None:
            max_times = group_config.retry_max_times
        if header.reconsume_times < max_times:
            return topic, queue_id
        dlq = dlq_topic(group)
        self.topics.create_topic_in_send_message_back(dlq, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
        return dlq, 0

    def _born_host(self, remote_address: str) -> tuple[int, int]:
        known = self._born_hosts.get(remote_address)
        if known is None:
            host, _, port = remote_address.rpartition(":")
            try:
                known = (ipv4_to_int(host), int(port))
            except (OSError, ValueError):
                known = (0, 0)
            if len(self._born_hosts) > 10_000:
                self._born_hosts.clear()
            self._born_hosts[remote_address] = known
        return known


def service_not_available(store: MessageStore) -> str:
    """RocketMQ's remark of a send the store refused, with its disk usage (its ``diskUtil()``)."""
    try:
        usage = str(store.disk_usage())
    except OSError as e:
        usage = f"unknown: {e}"
    return _SERVICE_NOT_AVAILABLE_REMARK.format(usage=f" [{usage}]")


def _without_delay(properties: str) -> str:
    """Properties without DELAY: a dead letter is not delayed."""
    if _DELAY_MARK not in properties:
        return properties
    props = decode_properties(properties)
    props.pop(MessageProperty.DELAY_TIME_LEVEL, None)
    return encode_properties(props).decode()


def _put_response(request: RemotingCommand, result, queue_id: int) -> RemotingCommand:
    return put_reply(request.opaque, result.status_code, result.msg_id, queue_id, result.queue_offset)


def put_reply(opaque: int, status_code: int, msg_id: str | None, queue_id: int, queue_offset: int) -> RemotingCommand:
    """The answer to a send whose put ended with ``status_code`` (a PutMessageStatus); the send
    lane's answers to deferred puts that did not end PUT_OK are these."""
    code, remark, stored = _PUT_REPLIES.get(status_code, _UNKNOWN_PUT_REPLY)
    if stored:
        ext = {"msgId": msg_id or "", "queueId": str(queue_id), "queueOffset": str(queue_offset)}
        return RemotingCommand(code, opaque=opaque, flag=FLAG_RESPONSE, remark=remark, ext_fields=ext)
    return RemotingCommand(code, opaque=opaque, flag=FLAG_RESPONSE, remark=remark)
