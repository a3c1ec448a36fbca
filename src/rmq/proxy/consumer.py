"""The 5.x consumer's calls, as RocketMQ's proxy serves them (grpc/v2/consumer/*Activity,
route/RouteActivity#queryAssignment, producer/ForwardMessageToDLQActivity), each one or two broker
requests through the seam (rmq.proxy.bridge):

==============================  =================================================================
call                            broker request(s)
==============================  =================================================================
QueryAssignment                 the topic's route; the group's config (FIFO: one assignment per
                                queue, else one per broker with queue id -1, "all its queues")
ReceiveMessage                  POP_MESSAGE, queueId -1 whatever queue the client names (the Node
                                client names 0), initMode MIN (a new group starts at each queue's
                                first offset); a message past the client's max attempts goes to
                                the DLQ instead (CONSUMER_SEND_MSG_BACK + ACK_MESSAGE)
AckMessage                      ACK_MESSAGE per entry
ChangeInvisibleDuration         CHANGE_MESSAGE_INVISIBLETIME; answers the new receipt handle
ForwardMessageToDeadLetterQueue CONSUMER_SEND_MSG_BACK (delayLevel -1: %DLQ%<group> at once),
                                then ACK_MESSAGE
==============================  =================================================================

ReceiveMessage answers a stream: one ``status``, the messages (when found), then one
``delivery_timestamp`` (the proxy's clock), also after a refusal (ReceiveMessageResponseStreamWriter).
Its invisible duration is checked against minInvisibleTimeMillsForRecv (10 s) and
maxInvisibleTimeMills (12 h), ILLEGAL_INVISIBLE_TIME outside; ChangeInvisibleDuration's only against
the maximum (RocketMQ's minimum there is 0). ``auto_renew`` (the push consumers') pops for
defaultInvisibleTimeMills instead (enableProxyAutoRenew). The long polling time is the client's (or
its deadline less half its request timeout), bounded by grpcClientConsumerMin/MaxLongPollingTimeoutMillis
and by the call's deadline less longPollingReserveTimeInMillis, the time the answer needs to travel.

A receipt handle (rmq.protocol.receipt_handle) that does not parse, or whose invisible time is over,
is INVALID_RECEIPT_HANDLE without asking the broker.

What a receive popped for a client that went away (the call cancelled while the broker held its
long poll, or the stream ended before its messages were written) is nacked: changed to
NACK_INVISIBLE_TIME_MS, on a task of its own, so it comes back at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Coroutine
from typing import Any, Protocol

import orjson
from google.protobuf import timestamp_pb2

from rmq._clock import now_ms
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol import pop
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import BadRequest
from rmq.protocol.grpc.v2 import definition_pb2, service_pb2
from rmq.protocol.grpc.v2.definition_pb2 import Code
from rmq.protocol.message import MessageProperty
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.receipt_handle import ReceiptHandle
from rmq.protocol.record import decode_records
from rmq.protocol.route import MASTER_ID
from rmq.protocol.subscription import ExpressionType, build_subscription_data
from rmq.proxy.calls import BrokerCalls
from rmq.proxy.client import DEFAULT_RETRY_MAX_TIMES, check_group
from rmq.proxy.convert import grpc_message
from rmq.proxy.route import RouteService, check_topic, endpoints
from rmq.proxy.status import OK, ProxyError, check, from_exception, from_response, status

log = logging.getLogger("rmq.proxy")

# A broker answers a POP at its poll time at the latest; the call to it may take this much longer.
POP_CALL_MARGIN_S = 3.0
# What a group the broker has no config of is served with: not FIFO, and the attempts of a group's
# default retryMaxTimes + 1.
DEFAULT_MAX_ATTEMPTS = DEFAULT_RETRY_MAX_TIMES + 1
# How long a group's config (FIFO, max attempts) is reused: a change reaches receives within this.
GROUP_CACHE_SECONDS = 1.0
# A message popped for a client that never got it is visible again this soon (the proxy's
# ReceiveMessageResponseStreamWriter.NACK_INVISIBLE_TIME).
NACK_INVISIBLE_TIME_MS = 1000


class Call(Protocol):
    """A request to the broker for the calling client, its answer (the bridge, on its channel)."""

    def __call__(self, request: RemotingCommand, timeout: float | None = None) -> Awaitable[RemotingCommand]: ...


class ConsumerConfig(Protocol):
    """The ProxyConfig keys the consumer side reads (rmq.settings declares them)."""

    min_invisible_time_mills_for_recv: int
    max_invisible_time_mills: int
    default_invisible_time_mills: int
    enable_proxy_auto_renew: bool
    grpc_client_consumer_min_long_polling_timeout_millis: int
    grpc_client_consumer_max_long_polling_timeout_millis: int
    long_polling_reserve_time_in_millis: int


@dataclasses.dataclass(frozen=True)
class GroupSettings:
    """What a receive takes from its group's config, as GrpcClientSettingsManager merges it into a
    consumer's settings: FIFO is consumeMessageOrderly, the attempts retryMaxTimes + 1."""

    fifo: bool = False
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    @classmethod
    def of(cls, config: dict[str, Any] | None) -> GroupSettings:
        if config is None:
            return cls()
        retry_max_times = int(config.get("retryMaxTimes", DEFAULT_RETRY_MAX_TIMES))
        return cls(bool(config.get("consumeMessageOrderly")), retry_max_times + 1)


def validate_invisible_time(config: ConsumerConfig, invisible_ms: int, minimum: int) -> None:
    if invisible_ms < minimum:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}")
    maximum = config.max_invisible_time_mills
    if 0 < maximum < invisible_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {maximum}")


def decode_handle(text: str) -> ReceiptHandle:
    """The handle, INVALID_RECEIPT_HANDLE when it does not parse or its invisible time is over."""
    try:
        handle = ReceiptHandle.decode(text)
    except BadRequest as e:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, str(e)) from None
    if handle.is_expired(now_ms()):
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    return handle


def _timestamp_now() -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromMilliseconds(now_ms())
    return stamp


class ConsumerActivities:
    """The calls above, for one endpoint. ``call`` sends a request to the broker for the calling
    client (the bridge, on its LocalChannel); the servicer hands each call the client's ``call``."""

    def __init__(self, config: ConsumerConfig, calls: BrokerCalls, routes: RouteService) -> None:
        self.config = config
        self.calls = calls
        self.routes = routes
        self._groups: dict[str, tuple[float, GroupSettings]] = {}
        # nacks of messages popped for a client that went away (kept: the loop holds tasks weakly)
        self._tasks: set[asyncio.Future[None]] = set()

    async def group_settings(self, group: str, call: Call | None = None) -> GroupSettings:
        """The group's FIFO flag and max attempts, at most GROUP_CACHE_SECONDS old; asked with
        ``call`` (the client's, its signature checked by the broker) when given, else by the
        endpoint itself."""
        now = time.monotonic()
        cached = self._groups.get(group)
        if call is None and cached is not None and cached[0] > now:
            return cached[1]
        request = RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
        response = await (call(request) if call is not None else self.calls.local(request))
        if response.code == ResponseCode.NO_PERMISSION:
            check(response)
        config = orjson.loads(body_bytes(response.body)) if response.code == ResponseCode.SUCCESS else None
        settings = GroupSettings.of(config)
        if len(self._groups) > 10_000:
            self._groups.clear()  # groups come and go: keep the cache from growing without bound
        self._groups[group] = (now + GROUP_CACHE_SECONDS, settings)
        return settings

    # -- QueryAssignment -----------------------------------------------------------------------

    async def query_assignment(
        self, request: service_pb2.QueryAssignmentRequest, call: Call
    ) -> service_pb2.QueryAssignmentResponse:
        """RouteActivity#queryAssignment: per broker of the route with readable queues, its master
        (its lowest id when the master is gone, so a slave serves receives) at its gRPC endpoint;
        a FIFO group one assignment per queue, others one for all (queue id -1). The group's config
        is asked with the client's call: with aclEnable a wrong signature is UNAUTHORIZED."""
        topic = check_topic(request.topic)
        group = check_group(request.group)
        fifo = (await self.group_settings(group, call)).fifo
        route = await self.routes.topic_route(topic)
        brokers: dict[str, definition_pb2.Broker] = {}
        for broker_data in route.get("brokerDatas", []):
            for broker_id, addr in sorted(broker_data.get("brokerAddrs", {}).items(), key=lambda kv: int(kv[0])):
                port = await self.routes.grpc_port(addr)
                if port is None:
                    continue
                name = broker_data["brokerName"]
                member = definition_pb2.Broker(
                    name=name, id=int(broker_id), endpoints=endpoints(addr.rpartition(":")[0], port)
                )
                brokers.setdefault(name, member)
                if int(broker_id) == MASTER_ID:
                    brokers[name] = member
        assignments = []
        for queue_data in route.get("queueDatas", []):
            perm, read_nums = int(queue_data.get("perm", 0)), int(queue_data.get("readQueueNums", 0))
            broker = brokers.get(queue_data["brokerName"])
            if not perm & PERM_READ or read_nums <= 0 or broker is None:
                continue
            permission = _PERMISSIONS[(bool(perm & PERM_READ), bool(perm & PERM_WRITE))]
            for queue_id in range(read_nums) if fifo else (-1,):
                queue = definition_pb2.MessageQueue(
                    topic=request.topic, id=queue_id, permission=permission, broker=broker
                )
                assignments.append(definition_pb2.Assignment(message_queue=queue))
        if not assignments:
            return service_pb2.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        return service_pb2.QueryAssignmentResponse(status=OK, assignments=assignments)

    # -- ReceiveMessage ------------------------------------------------------------------------

    def polling_time(
        self, request: service_pb2.ReceiveMessageRequest, request_timeout_ms: int, remaining_ms: float | None
    ) -> int:
        """ReceiveMessageActivity's: ProxyError ILLEGAL_POLLING_TIME when the deadline leaves too little."""
        c = self.config
        if request.HasField("long_polling_timeout"):
            polling = request.long_polling_timeout.ToMilliseconds()
        elif remaining_ms is not None:
            polling = int(remaining_ms - request_timeout_ms / 2)
        else:
            polling = c.grpc_client_consumer_max_long_polling_timeout_millis
        polling = max(polling, c.grpc_client_consumer_min_long_polling_timeout_millis)
        polling = min(polling, c.grpc_client_consumer_max_long_polling_timeout_millis)
        if remaining_ms is not None:
            usable = int(remaining_ms) - c.long_polling_reserve_time_in_millis
            if polling > usable:
                if usable < c.grpc_client_consumer_min_long_polling_timeout_millis:
                    raise ProxyError(
                        Code.ILLEGAL_POLLING_TIME,
                        "The deadline time remaining is not enough for polling, please check network condition",
                    )
                polling = usable
        return polling

    async def receive_message(
        self,
        request: service_pb2.ReceiveMessageRequest,
        call: Call,
        request_timeout_ms: int,
        remaining_ms: float | None,
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        """The answers of one ReceiveMessage: a status, the messages, the delivery timestamp.
        ``request_timeout_ms``: the client's request timeout (its settings), ``remaining_ms``: what
        is left of the call's deadline (None: it has none)."""
        try:
            answer, messages = await self._receive(request, call, request_timeout_ms, remaining_ms)
        except Exception as exc:  # every refusal still ends with the delivery timestamp
            answer, messages = from_exception(exc), []
        written = 0
        try:
            yield service_pb2.ReceiveMessageResponse(status=answer)
            for message in messages:
                yield service_pb2.ReceiveMessageResponse(message=message)
                written += 1
            yield service_pb2.ReceiveMessageResponse(delivery_timestamp=_timestamp_now())
        finally:
            if written < len(messages):  # the stream ended under them: the client never got these
                handles = [m.system_properties.receipt_handle for m in messages[written:]]
                self._background(self._nack(request, handles, call))

    async def _receive(
        self,
        request: service_pb2.ReceiveMessageRequest,
        call: Call,
        request_timeout_ms: int,
        remaining_ms: float | None,
    ) -> tuple[definition_pb2.Status, list[definition_pb2.Message]]:
        c = self.config
        polling = self.polling_time(request, request_timeout_ms, remaining_ms)
        topic = check_topic(request.message_queue.topic)
        group = check_group(request.group)
        settings = await self.group_settings(group)
        if c.enable_proxy_auto_renew and request.auto_renew:
            invisible = c.default_invisible_time_mills
        else:
            invisible = request.invisible_duration.ToMilliseconds()
            validate_invisible_time(c, invisible, c.min_invisible_time_mills_for_recv)
        expression = request.filter_expression
        expression_type = ExpressionType.SQL92 if expression.type == definition_pb2.SQL else ExpressionType.TAG
        try:
            subscription = build_subscription_data(topic, expression.expression, expression_type)
        except RequestRefused as e:
            raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, e.remark) from None
        pop_request = pop.PopRequest(
            consumer_group=group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=min(max(request.batch_size, 1), pop.MAX_POP_NUMS),
            invisible_time=invisible,
            poll_time=polling,
            born_time=now_ms(),
            init_mode=pop.INIT_MODE_MIN,
            exp_type=subscription.expression_type,
            exp=subscription.sub_string,
            order=settings.fifo,
            attempt_id=request.attempt_id if request.HasField("attempt_id") else None,
        )
        pop_call = RemotingCommand.request(RequestCode.POP_MESSAGE, pop_request.fields())
        popping = asyncio.ensure_future(call(pop_call, polling / 1000 + POP_CALL_MARGIN_S))
        try:
            response = await asyncio.shield(popping)
        except asyncio.CancelledError:
            # the client went away while the broker held its pop: what it pops reaches nobody
            self._background(self._nack_popped(request, popping, call))
            raise
        if response.code == ResponseCode.POLLING_FULL:
            return status(Code.TOO_MANY_REQUESTS, "polling full"), []
        if response.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            return status(Code.MESSAGE_NOT_FOUND, "no new message"), []
        check(response)
        messages = await self._deliverable(topic, group, settings, response, call)
        if not messages:
            return status(Code.MESSAGE_NOT_FOUND, "no match message"), []
        return OK, messages

    async def _deliverable(
        self,
        topic: str,
        group: str,
        settings: GroupSettings,
        response: RemotingCommand,
        call: Call,
    ) -> list[definition_pb2.Message]:
        """The popped messages to hand the client; those past its max attempts go to the DLQ
        (PopMessageResultFilterImpl)."""
        out = []
        for record in decode_records(body_bytes(response.body)):
            ck = record.properties.get(pop.PROPERTY_POP_CK)
            if ck is None:
                log.error("popped message %s of %s carries no %s", record.msg_id, topic, pop.PROPERTY_POP_CK)
                continue
            handle = ReceiptHandle(pop.ExtraInfo.decode(ck), record.physical_offset)
            # a FIFO pop's attempts are the record's reconsume times too (the broker sets them)
            if record.reconsume_times >= settings.max_attempts:
                await self._to_dlq(
                    topic, group, handle, record.properties.get(MessageProperty.UNIQ_KEY) or record.msg_id, call
                )
                continue
            out.append(grpc_message(record, topic, handle))
        return out

    def close(self) -> None:
        """Shutdown: the nacks still running stop (their messages come back after their invisible time)."""
        for task in list(self._tasks):
            task.cancel()

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _nack_popped(
        self, request: service_pb2.ReceiveMessageRequest, popping: asyncio.Future[RemotingCommand], call: Call
    ) -> None:
        try:
            response = await popping
        except Exception:
            return  # nothing popped, or the endpoint is shutting down (the messages come back anyway)
        if response.code != ResponseCode.SUCCESS:
            return
        handles = []
        for record in decode_records(body_bytes(response.body)):
            ck = record.properties.get(pop.PROPERTY_POP_CK)
            if ck is not None:
                handles.append(ReceiptHandle(pop.ExtraInfo.decode(ck), record.physical_offset).encode())
        await self._nack(request, handles, call)

    async def _nack(self, request: service_pb2.ReceiveMessageRequest, handles: list[str], call: Call) -> None:
        """Messages popped for a client that never got them come back after NACK_INVISIBLE_TIME_MS,
        not after their whole invisible time (ReceiveMessageResponseStreamWriter's nack)."""
        topic, group = request.message_queue.topic.name, request.group.name
        for text in handles:
            try:
                change = _ack_request(topic, group, ReceiptHandle.decode(text), NACK_INVISIBLE_TIME_MS)
                await call(RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change.fields()))
            except Exception as e:  # they come back after their invisible time anyway
                log.warning("nack of a message %s of %s never delivered failed: %s", topic, group, e)

    # -- AckMessage ----------------------------------------------------------------------------

    async def ack_message(self, request: service_pb2.AckMessageRequest, call: Call) -> service_pb2.AckMessageResponse:
        try:
            topic = check_topic(request.topic)
            group = check_group(request.group)
        except ProxyError as e:
            return service_pb2.AckMessageResponse(status=status(e.code, e.message))

        async def ack_one(entry: service_pb2.AckMessageEntry) -> definition_pb2.Status:
            try:
                return _ack_status(await self._ack(topic, group, decode_handle(entry.receipt_handle), call), "ack")
            except Exception as exc:
                return from_exception(exc)

        # all at once, as the proxy's ackMessageOneByOne: a batch costs one round of broker writes
        statuses = await asyncio.gather(*(ack_one(entry) for entry in request.entries))
        entries = [
            service_pb2.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=s)
            for e, s in zip(request.entries, statuses, strict=True)
        ]
        codes = {e.status.code for e in entries}
        if len(codes) > 1:
            overall = status(Code.MULTIPLE_RESULTS)
        elif codes:
            overall = status(codes.pop())
        else:
            overall = status(Code.INTERNAL_SERVER_ERROR, "ack message result is empty")
        return service_pb2.AckMessageResponse(status=overall, entries=entries)

    async def _ack(self, topic: str, group: str, handle: ReceiptHandle, call: Call) -> RemotingCommand:
        ack = _ack_request(topic, group, handle)
        return await call(RemotingCommand.request(RequestCode.ACK_MESSAGE, ack.fields()))

    # -- ChangeInvisibleDuration ---------------------------------------------------------------

    async def change_invisible_duration(
        self, request: service_pb2.ChangeInvisibleDurationRequest, call: Call
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        try:
            topic = check_topic(request.topic)
            group = check_group(request.group)
            invisible = request.invisible_duration.ToMilliseconds()
            validate_invisible_time(self.config, invisible, 0)
            handle = decode_handle(request.receipt_handle)
            extra = handle.extra_info
            change = _ack_request(topic, group, handle, invisible)
            answer = await call(RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change.fields()))
            if answer.code != ResponseCode.SUCCESS:
                return service_pb2.ChangeInvisibleDurationResponse(
                    status=_ack_status(answer, "changeInvisibleDuration")
                )
            changed = pop.ChangeInvisibleTimeResponse.from_fields(answer.ext_fields)
            # the broker checkpointed the message anew, from its own offset (ChangeInvisibleTimeProcessor)
            renewed = ReceiptHandle(
                extra.changed(extra.msg_queue_offset, changed.pop_time, changed.invisible_time, changed.revive_qid),
                handle.commit_log_offset,
            )
        except Exception as exc:
            return service_pb2.ChangeInvisibleDurationResponse(status=from_exception(exc))
        return service_pb2.ChangeInvisibleDurationResponse(status=OK, receipt_handle=renewed.encode())

    # -- ForwardMessageToDeadLetterQueue -------------------------------------------------------

    async def forward_message_to_dead_letter_queue(
        self, request: service_pb2.ForwardMessageToDeadLetterQueueRequest, call: Call
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        try:
            topic = check_topic(request.topic)
            group = check_group(request.group)
            handle = decode_handle(request.receipt_handle)
            answer = await self._to_dlq(topic, group, handle, request.message_id, call)
        except Exception as exc:
            return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=from_exception(exc))
        return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=from_response(answer))

    async def _to_dlq(
        self, topic: str, group: str, handle: ReceiptHandle, message_id: str, call: Call
    ) -> RemotingCommand:
        """ProducerProcessor#forwardMessageToDeadLetterQueue: the message goes to %DLQ%<group> at
        once (delayLevel -1), then its pop is acked so it never comes back."""
        if handle.commit_log_offset < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        fields = {
            "group": group,
            "offset": str(handle.commit_log_offset),
            "delayLevel": "-1",
            "originMsgId": message_id,
            "originTopic": pop.real_topic(topic, group, handle.extra_info.retry),
            "maxReconsumeTimes": "0",
        }
        answer = await call(RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields))
        if answer.code == ResponseCode.SUCCESS:
            acked = await self._ack(topic, group, handle, call)
            if acked.code != ResponseCode.SUCCESS:
                log.warning("message %s of %s is in the DLQ but its ack failed: %s", message_id, group, acked.remark)
        return answer


_PERMISSIONS = {
    (True, True): definition_pb2.READ_WRITE,
    (True, False): definition_pb2.READ,
    (False, True): definition_pb2.WRITE,
    (False, False): definition_pb2.NONE,
}


def _ack_request(topic: str, group: str, handle: ReceiptHandle, invisible_time: int | None = None) -> pop.AckRequest:
    """ACK_MESSAGE's header, with ``invisible_time`` CHANGE_MESSAGE_INVISIBLETIME's. The topic is
    the one asked for: the broker reads the retry topic off the extraInfo (docs/pop.md)."""
    extra = handle.extra_info
    return pop.AckRequest(group, topic, extra.queue_id, extra.encode(), extra.msg_queue_offset, invisible_time)


def _ack_status(answer: RemotingCommand, what: str) -> definition_pb2.Status:
    """An ack's or change's status: a broker refusal of the client's permission is UNAUTHORIZED (the
    proxy refuses it before asking the broker); any other failure "status is abnormal", as the
    proxy answers a broker's NO_EXIST."""
    if answer.code in (ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION):
        return from_response(answer)
    return _abnormal(what)


def _abnormal(what: str) -> definition_pb2.Status:
    return status(Code.INTERNAL_SERVER_ERROR, f"{what} failed: status is abnormal")
