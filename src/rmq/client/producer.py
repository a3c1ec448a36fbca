"""The producer: sends messages to a topic's queues (RocketMQ's DefaultMQProducer).

    from rmq.client import Message, Producer

    with Producer("order-producers", namesrv_addr="127.0.0.1:9876") as producer:
        result = producer.send(Message("OrderTopic", b"hello", tags="created", keys="order-7"))
        print(result.status, result.msg_id, result.message_queue, result.queue_offset)
        future = producer.send_async(Message("OrderTopic", b"async"))      # concurrent.futures.Future
        producer.send_oneway(Message("OrderTopic", b"fire and forget"))
        producer.send_batch([Message("OrderTopic", b"a"), Message("OrderTopic", b"b")])
        producer.send_orderly(Message("OrderTopic", b"step 1"), sharding_key="order-7")

    # from asyncio code
    result = await producer.asend(Message("OrderTopic", b"hi"))

Queues are chosen round robin over the masters' write queues, skipping brokers that were recently
slow or failed (``rmq.client.fault``) and, on a retry, the broker that just failed. A failed send
is retried ``retry_times_when_send_failed`` times (default 2) within ``send_msg_timeout`` in all.
FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE answers are results (the message is
stored), other refusals raise ``ResponseError``, transport failures the ``RemotingError`` of the last
try, naming every try.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rmq._clock import now_ms
from rmq.client import send_wire
from rmq.client.fault import LatencyFaultTolerance
from rmq.client.futures import LightFuture
from rmq.client.instance import ClientConfig, InstanceMember, check_group, option_fields
from rmq.client.message import (
    Message,
    encode_batch,
    encode_properties_checked,
    validate_message,
)
from rmq.client.msg_id import create_uniq_id
from rmq.client.results import SendResult, SendStatus
from rmq.client.route import TopicPublishInfo, TopicRouteData, why_unwritable
from rmq.errors import ClientError, RemotingError, RemotingTimeoutError, ResponseError
from rmq.net import RemotingCommand
from rmq.net.channel import COPY_LIMIT
from rmq.net.codec_py import next_opaque
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.compression import (
    COMPRESS_LEVEL,
    COMPRESS_OVER,
    DEFAULT_COMPRESSION,
    check_compression,
    compress_body,
)
from rmq.protocol.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageProperty,
    MessageSysFlag,
    java_string_hash,
)
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.send_header import V2
from rmq.settings import DEFAULT_NAMESRV_ADDR

log = logging.getLogger("rmq.client")

__all__ = ["Producer", "ProducerConfig", "MessageQueueSelector", "select_by_hash"]

# Refusals after which the next try goes to another broker (RocketMQ 5.x's retryResponseCodes; 4.9's
# producer gave up at a SYSTEM_BUSY, 5.x tries another broker: an overloaded one stored nothing).
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
    }
)

_SEND_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(mqs: Sequence[MessageQueue], msg: Message, key: Any) -> MessageQueue:
    """``mqs[|hash(key)| % len(mqs)]`` with Java's String.hashCode, so that every client language
    puts one key on the same queue (RocketMQ's SelectMessageQueueByHash)."""
    return mqs[abs(java_string_hash(str(key)) % len(mqs))]


@dataclass
class ProducerConfig(ClientConfig):
    send_msg_timeout: float = 3.0
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    compress_msg_body_over_howmuch: int = COMPRESS_OVER
    compress_level: int = COMPRESS_LEVEL
    # "zlib" (what every 4.x and 5.x consumer reads), or "lz4" / "zstd" (RocketMQ 5.x consumers only)
    compression: str = DEFAULT_COMPRESSION
    send_latency_fault_enable: bool = True
    # A degraded answer (FLUSH_DISK_TIMEOUT...) is retried on another broker instead of returned.
    retry_another_broker_when_not_store_ok: bool = False
    # For a topic the name server does not know: send along the route of this template topic and
    # let the broker create the topic (when its autoCreateTopicEnable is on).
    create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC
    default_topic_queue_nums: int = 4


@dataclass(slots=True)
class _SendJob:
    """One send (single or batch) moving through its tries: its header either as ``ext`` fields, or
    encoded once as ``fields`` (``rmq.client.send_wire``) and framed for each try without a dict."""

    topic: str
    code: int
    body: bytes
    ext: dict[str, Any] | None
    msg_id: str
    info: TopicPublishInfo
    deadline: float
    max_attempts: int
    future: concurrent.futures.Future[SendResult]
    fixed_queue: MessageQueue | None = None
    attempt: int = 0
    last_broker: str | None = None
    errors: list[str] = field(default_factory=list)
    last_error: BaseException | None = None
    started: float = 0.0  # monotonic, when the send began (set by _new_job)
    fields: bytes | None = None
    # a thread waits for the outcome (send, send_batch, send_orderly): written by that thread
    waited: bool = False


class Producer(InstanceMember):
    """A producer of ``group``; see the module docstring for examples. Options are the fields of
    ProducerConfig (``send_msg_timeout``, ``retry_times_when_send_failed``, ``instance_name``...)."""

    kind = "producer"

    def __init__(self, group: str, namesrv_addr: str = DEFAULT_NAMESRV_ADDR, **options: Any):
        check_group(group)
        self.group = group
        self.config: ProducerConfig = option_fields(ProducerConfig, dict(options, namesrv_addr=namesrv_addr))
        self.config.compression = check_compression(self.config.compression)
        self.fault = LatencyFaultTolerance()
        self._publish: dict[str, TopicPublishInfo] = {}
        self._lock = threading.Lock()
        # send_wire.fixed_fields for (single, batch), and the config values they were made of
        self._fixed: tuple[tuple[Any, ...], bytes, bytes] | None = None

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> Producer:
        if self._instance is not None:
            return self
        instance = self._join()
        instance.scheduler.run_soon(instance.send_heartbeat_to_all)
        log.info("producer %s started in client %s", self.group, instance.client_id)
        return self

    def shutdown(self) -> None:
        if self._instance is not None:
            self._leave()
            log.info("producer %s shut down", self.group)

    # -- what the instance asks -----------------------------------------------------------------

    def topics_in_use(self) -> set[str]:
        return set(self._publish)

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        info = TopicPublishInfo.from_route(topic, route)
        if info.ok:
            with self._lock:
                old = self._publish.get(topic)
                if old is not None:
                    info._counter = old._counter  # keep the round robin going where it was
                self._publish[topic] = info

    # -- sending --------------------------------------------------------------------------------

    def send(self, msg: Message, timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer; retries on other brokers when a try fails."""
        retries = self.config.retry_times_when_send_failed
        return self._wait(self.send_async(msg, timeout, _retries=retries, _waited=True))

    def send_async(
        self, msg: Message, timeout: float | None = None, *, _retries: int | None = None, _waited: bool = False
    ) -> concurrent.futures.Future[SendResult]:
        """Send without waiting: a Future of the SendResult (or of the error)."""
        retries = self.config.retry_times_when_send_async_failed if _retries is None else _retries
        job = self._job_for(msg, timeout, 1 + retries)
        job.waited = _waited
        self._dispatch(job)
        return job.future

    async def asend(self, msg: Message, timeout: float | None = None) -> SendResult:
        """``send`` for asyncio code: awaits the answer without blocking the event loop."""
        return await asyncio.wrap_future(self.send_async(msg, timeout))

    def send_oneway(self, msg: Message) -> None:
        """Send with no answer and no retry: cheapest, and a message may be lost unnoticed."""
        job = self._job_for(msg, None, 1, pre_encode=False)
        mq = self._select_queue(job.info, None)
        addr = self.instance.broker_addr_or_raise(mq.broker_name, msg.topic)
        self.instance.remoting.invoke_oneway(addr, self._request(job, mq))

    def send_batch(self, msgs: Sequence[Message], timeout: float | None = None) -> SendResult:
        """Send ``msgs`` (one topic, no delay levels) in one SEND_BATCH_MESSAGE request; they land
        in one queue, in order. ``msg_id`` of the result joins their ids with commas."""
        return self._wait(self.send_batch_async(msgs, timeout, _waited=True))

    def send_batch_async(
        self, msgs: Sequence[Message], timeout: float | None = None, *, _waited: bool = False
    ) -> concurrent.futures.Future[SendResult]:
        msgs = list(msgs)
        if not msgs:
            raise ClientError("cannot send an empty batch")
        topic = msgs[0].topic
        msg_ids = []
        for msg in msgs:
            validate_message(msg, self.config.max_message_size)
            if msg.topic != topic:
                raise ClientError(f"a batch goes to one topic: {msg.topic!r} differs from {topic!r}")
            if msg.delay_level > 0:
                raise ClientError("messages of a batch cannot have a delay level")
            if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise ClientError(f"cannot send a batch to the retry topic {msg.topic!r}")
            msg_ids.append(_uniq_key(msg))
        body = encode_batch(msgs)
        if len(body) > self.config.max_message_size:
            raise ClientError(
                f"the batch is {len(body)} bytes encoded, more than the maximum message "
                f"size {self.config.max_message_size}: split it"
            )
        fields = self._message_fields(topic, 0, 0, "", batch=True)
        ext = None if fields is not None else self._header(topic, 0, 0, {}, batch=True)
        job = self._new_job(
            topic,
            RequestCode.SEND_BATCH_MESSAGE,
            body,
            ext,
            ",".join(msg_ids),
            timeout,
            1 + self.config.retry_times_when_send_failed,
        )
        job.fields = fields
        job.waited = _waited
        self._dispatch(job)
        return job.future

    def send_orderly(
        self,
        msg: Message,
        sharding_key: Any = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send to the queue chosen by ``sharding_key`` (messages of one key keep their order), or by
        ``selector(queues, msg, arg)``. One try only: another queue would break the order."""
        if selector is None:
            if sharding_key is None:
                raise ClientError("send_orderly needs a sharding_key or a selector")
            selector, arg = select_by_hash, sharding_key
        job = self._job_for(msg, timeout, 1)
        queues = job.info.message_queues
        mq = selector(queues, msg, arg)
        if mq not in queues:
            raise ClientError(f"the selector chose {mq}, which is not a write queue of {msg.topic!r}")
        job.fixed_queue = mq
        job.waited = True
        self._dispatch(job)
        return self._wait(job.future)

    # -- internals ------------------------------------------------------------------------------

    def _wait(self, future: concurrent.futures.Future[SendResult]) -> SendResult:
        # The job itself ends by its deadline; the margin only covers the loop reporting it.
        try:
            return future.result(self.config.send_msg_timeout + 5)
        except concurrent.futures.TimeoutError:
            raise RemotingTimeoutError(
                f"producer {self.group}: no outcome of a send within {self.config.send_msg_timeout + 5}s"
            ) from None

    def _header(
        self, topic: str, sys_flag: int, flag: int, properties: dict[str, str], batch: bool = False
    ) -> dict[str, Any]:
        ext: dict[str, Any] = {
            V2["producerGroup"]: self.group,
            V2["topic"]: topic,
            V2["defaultTopic"]: self.config.create_topic_key,
            V2["defaultTopicQueueNums"]: self.config.default_topic_queue_nums,
            V2["queueId"]: 0,
            V2["sysFlag"]: sys_flag,
            V2["bornTimestamp"]: now_ms(),
            V2["flag"]: flag,
            V2["properties"]: encode_properties_checked(properties).decode(),
            V2["reconsumeTimes"]: 0,
            V2["unitMode"]: False,
            V2["batch"]: batch,
        }
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            ext[V2["reconsumeTimes"]] = properties.get(MessageProperty.RECONSUME_TIME, 0)
            if MessageProperty.MAX_RECONSUME_TIMES in properties:
                ext[V2["maxReconsumeTimes"]] = properties[MessageProperty.MAX_RECONSUME_TIMES]
        return ext

    def _fixed_fields(self, batch: bool) -> bytes:
        config = self.config
        key = (self.group, config.create_topic_key, config.default_topic_queue_nums)
        fixed = self._fixed
        if fixed is None or fixed[0] != key:
            fixed = self._fixed = (
                key,
                send_wire.fixed_fields(self.group, config.create_topic_key, config.default_topic_queue_nums, False),
                send_wire.fixed_fields(self.group, config.create_topic_key, config.default_topic_queue_nums, True),
            )
        return fixed[2] if batch else fixed[1]

    def _message_fields(
        self, topic: str, sys_flag: int, flag: int, properties: str, batch: bool = False
    ) -> bytes | None:
        """The header of a send encoded once (``send_wire``); None when it takes ``_header``'s
        fields: a retry topic's reconsume counts, or a client that signs every request's fields."""
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or self.instance.remoting.credentials is not None:
            return None
        return send_wire.message_fields(self._fixed_fields(batch), topic, sys_flag, now_ms(), flag, properties)

    def _job_for(self, msg: Message, timeout: float | None, max_attempts: int, pre_encode: bool = True) -> _SendJob:
        validate_message(msg, self.config.max_message_size)
        msg_id = _uniq_key(msg)
        config = self.config
        body, sys_flag = compress_body(
            msg.body, config.compress_msg_body_over_howmuch, config.compress_level, config.compression
        )
        if msg.get_property(MessageProperty.TRANSACTION_PREPARED) == "true":
            sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        fields = None
        if pre_encode:
            properties = encode_properties_checked(msg.properties).decode()
            fields = self._message_fields(msg.topic, sys_flag, msg.flag, properties)
        ext = None if fields is not None else self._header(msg.topic, sys_flag, msg.flag, msg.properties)
        job = self._new_job(msg.topic, RequestCode.SEND_MESSAGE_V2, body, ext, msg_id, timeout, max_attempts)
        job.fields = fields
        return job

    def _new_job(
        self,
        topic: str,
        code: int,
        body: bytes,
        ext: dict[str, Any] | None,
        msg_id: str,
        timeout: float | None,
        max_attempts: int,
    ) -> _SendJob:
        timeout = self.config.send_msg_timeout if timeout is None else timeout
        info = self._publish_info(topic)
        now = time.monotonic()
        job = _SendJob(topic, code, body, ext, msg_id, info, now + timeout, max_attempts, LightFuture())
        job.started = now
        return job

    def _publish_info(self, topic: str) -> TopicPublishInfo:
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        instance = self.instance
        with self._lock:
            self._publish.setdefault(topic, TopicPublishInfo(topic, []))
        route = instance.update_route(topic)
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        if route is None and self.config.create_topic_key:
            template = instance.update_route(self.config.create_topic_key)
            if template is not None:
                info = TopicPublishInfo.from_route(topic, _capped(template, self.config.default_topic_queue_nums))
                if info.ok:
                    log.info(
                        "topic %s has no route: sending along %s's for the broker to create it",
                        topic,
                        self.config.create_topic_key,
                    )
                    return info
        if route is not None:
            # the topic exists: its brokers are down or closed to writes, and creating it would not help
            raise ClientError(
                f"cannot send to topic {topic!r}: name server {self.config.namesrv_addr} routes it, but "
                f"{why_unwritable(route)}"
            )
        raise ClientError(
            f"no route for topic {topic!r} from name server {self.config.namesrv_addr}: "
            "create the topic first (or enable autoCreateTopicEnable on the broker)"
        )

    def _select_queue(self, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        if not self.config.send_latency_fault_enable:
            return info.select_one(last_broker)
        queues = info.message_queues
        if not queues:
            raise ClientError(f"topic {info.topic!r} has no writable queue")
        start = info.next_index()
        fallback = None
        for i in range(len(queues)):
            mq = queues[(start + i) % len(queues)]
            if self.fault.is_available(mq.broker_name):
                if mq.broker_name != last_broker:
                    return mq
                fallback = fallback or mq
        if fallback is not None:
            return fallback
        least_bad = self.fault.pick_one_at_least()
        if least_bad:
            count = info.write_queue_nums(least_bad)
            if count:
                return MessageQueue(info.topic, least_bad, info.next_index() % count)
            self.fault.remove(least_bad)
        return info.select_one(last_broker)

    def _request(self, job: _SendJob, mq: MessageQueue) -> RemotingCommand:
        assert job.ext is not None
        ext = dict(job.ext)
        ext["e"] = mq.queue_id
        return RemotingCommand.request(job.code, ext, job.body)

    def _dispatch(self, job: _SendJob) -> None:
        """Start the job's next try (any thread: nothing here blocks), or end it."""
        instance = self.instance
        while True:
            now = time.monotonic()
            remaining = job.deadline - now
            if job.attempt >= job.max_attempts or remaining <= 0:
                self._fail(job, remaining <= 0)
                return
            job.attempt += 1
            try:
                mq = job.fixed_queue or self._select_queue(job.info, job.last_broker)
            except ClientError as exc:
                job.future.set_exception(exc)
                return
            addr = instance.find_broker_addr(mq.broker_name)
            if addr is None:
                job.errors.append(f"{mq.broker_name}: no master address")
                job.last_broker = mq.broker_name
                continue
            token = self.fault.send_started(mq.broker_name)
            on_answer = functools.partial(self._on_answer, job, mq, addr, now, token)
            remoting = instance.remoting
            if job.fields is None:
                remoting.invoke_callback(addr, self._request(job, mq), remaining, on_answer)
            else:
                opaque = next_opaque()
                body = job.body
                if len(body) <= COPY_LIMIT:  # one copy into the frame, no iovec of its own
                    frame = send_wire.send_frame(job.code, opaque, job.fields, mq.queue_id, body)
                    remoting.invoke_frame(addr, opaque, job.code, frame, remaining, on_answer, b"", job.waited)
                else:  # a big body (a batch) is written from where it is
                    frame = send_wire.send_frame(job.code, opaque, job.fields, mq.queue_id, body, with_body=False)
                    remoting.invoke_frame(addr, opaque, job.code, frame, remaining, on_answer, body, job.waited)
            return

    def _on_answer(
        self,
        job: _SendJob,
        mq: MessageQueue,
        addr: str,
        began: float,
        token: int,
        response: RemotingCommand | None,
        error: BaseException | None,
    ) -> None:
        latency_ms = (time.monotonic() - began) * 1000
        status = None if response is None else _SEND_STATUS.get(response.code)
        # a send that got no send status isolates its broker for a while
        self.fault.send_done(mq.broker_name, token, latency_ms, isolation=status is None)
        if response is not None:
            if status is not None:
                try:
                    result = self._result(job, mq, addr, response, status)
                except ResponseError as exc:
                    job.future.set_exception(exc)
                    return
                if (
                    status is not SendStatus.SEND_OK
                    and self.config.retry_another_broker_when_not_store_ok
                    and job.attempt < job.max_attempts
                ):
                    job.errors.append(f"{addr}: {status.name}")
                    job.last_broker = mq.broker_name
                    self._dispatch(job)
                    return
                job.future.set_result(result)
                return
            error = ResponseError(response.code, response.remark, addr)
            if response.code not in RETRY_RESPONSE_CODES:
                job.future.set_exception(error)
                return
        log.warning("send to %s (%s) failed, try %d of %d: %s", addr, mq, job.attempt, job.max_attempts, error)
        self.instance.send_failed(job.topic)
        job.errors.append(f"{addr}: {error}")
        job.last_error = error
        job.last_broker = mq.broker_name
        try:
            self._dispatch(job)
        except ClientError as exc:  # shut down meanwhile
            job.future.set_exception(exc)

    def _result(
        self, job: _SendJob, mq: MessageQueue, addr: str, response: RemotingCommand, status: SendStatus
    ) -> SendResult:
        ext = response.ext_fields
        try:
            queue_id = int(ext["queueId"])
            queue_offset = int(ext["queueOffset"])
        except (KeyError, ValueError):
            raise ResponseError(response.code, f"send answer lacks queueId/queueOffset: {ext}", addr) from None
        if queue_id != mq.queue_id or mq.topic != job.topic:  # else the queue sent to (frozen: shared)
            mq = MessageQueue(job.topic, mq.broker_name, queue_id)
        return SendResult(status, job.msg_id, ext.get("msgId", ""), mq, queue_offset, ext.get("transactionId"))

    def _fail(self, job: _SendJob, timed_out: bool) -> None:
        elapsed = time.monotonic() - job.started
        tries = "; ".join(job.errors) or "no try was made"
        what = (
            f"send to topic {job.topic!r} failed after {job.attempt} tr{'y' if job.attempt == 1 else 'ies'} "
            f"in {elapsed:.2f}s{' (timeout)' if timed_out else ''}: {tries}"
        )
        last = job.last_error
        if isinstance(last, ResponseError):
            error: BaseException = last
        elif isinstance(last, RemotingError):
            error = type(last)(what)
            error.__cause__ = last
        elif timed_out:
            error = RemotingTimeoutError(what)
        else:
            error = ClientError(what)
        job.future.set_exception(error)


def _uniq_key(msg: Message) -> str:
    """The client message id (UNIQ_KEY) of ``msg``; a new one is set first when it has none."""
    key = msg.uniq_key
    if key is None:
        key = create_uniq_id()
        msg.put_property(MessageProperty.UNIQ_KEY, key)
    return key


def _capped(route: TopicRouteData, queue_nums: int) -> TopicRouteData:
    """The template topic's route with at most ``queue_nums`` queues per broker."""
    return replace(
        route,
        queue_datas=tuple(
            replace(
                q,
                read_queue_nums=min(q.read_queue_nums, queue_nums),
                write_queue_nums=min(q.write_queue_nums, queue_nums),
            )
            for q in route.queue_datas
        ),
    )
