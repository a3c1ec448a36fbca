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
defaultInvisibleTimeMills instead (enableProxyAutoRenew), and the message is renewed while its client
holds it (``_renew_rounds``, every renewSchedulePeriodMillis: RocketMQ's receipt handle manager); an
ack, change or forward of it uses its latest handle, not the one the client received. The long
polling time is the client's (or its deadline less half its request timeout), bounded by
grpcClientConsumerMin/MaxLongPollingTimeoutMillis and by the call's deadline less
longPollingReserveTimeInMillis, the time the answer needs to travel.

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
from rmq.proxy.bridge import LocalChannel
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
    renew_schedule_period_millis: int
    renew_ahead_time_millis: int
    renew_max_time_millis: int
    max_renew_retry_times: int
    invisible_time_millis_when_clear: int


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


@dataclasses.dataclass
class _Renewing:
    """A message received with auto_renew, renewed until its client acks, changes or forwards it
    (RocketMQ's MessageReceiptHandle): its latest handle is the one those use."""

    topic: str
    group: str
    handle: str
    received_at: int
    owner: LocalChannel
    call: Call
    failures: int = 0
    # a renewal in flight: an ack waits for it, and takes the handle it makes
    busy: asyncio.Future[None] | None = None


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
        # (client id, group, message id) -> a message auto_renew keeps invisible (ReceiptHandleManager)
        self._renewing: dict[tuple[str, str, str], _Renewing] = {}
        self._renewer: asyncio.Future[None] | None = None

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
        owner: LocalChannel | None = None,
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        """The answers of one ReceiveMessage: a status, the messages, the delivery timestamp.
        ``request_timeout_ms``: the client's request timeout (its settings), ``remaining_ms``: what
        is left of the call's deadline (None: it has none), ``owner``: the client's channel (what
        it receives with auto_renew is renewed while the channel is active)."""
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
            if owner is not None and written and self.config.enable_proxy_auto_renew and request.auto_renew:
                self._renew(owner, request, messages[:written], call)

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
        if self._renewer is not None:
            self._renewer.cancel()

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

    # -- auto renewal (RocketMQ's DefaultReceiptHandleManager) ----------------------------------

    def _renew(
        self, owner: LocalChannel, request: service_pb2.ReceiveMessageRequest, messages: list[Any], call: Call
    ) -> None:
        topic, group, now = request.message_queue.topic.name, request.group.name, now_ms()
        for message in messages:
            system = message.system_properties
            key = (owner.client_id, group, system.message_id)
            self._renewing[key] = _Renewing(topic, group, system.receipt_handle, now, owner, call)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.ensure_future(self._renew_rounds())

    async def _renewed_handle(self, owner: LocalChannel | None, group: str, message_id: str, handle: str) -> str:
        """The latest handle of a message auto_renew keeps (an ack, change or forward ends that),
        else ``handle``: the client holds the one it received, which a renewal replaced."""
        if owner is None:
            return handle
        renewing = self._renewing.pop((owner.client_id, group, message_id), None)
        if renewing is None:
            return handle
        if renewing.busy is not None:
            await asyncio.shield(renewing.busy)
        return renewing.handle

    async def _renew_rounds(self) -> None:
        c = self.config
        while self._renewing:
            await asyncio.sleep(c.renew_schedule_period_millis / 1000)
            for key, renewing in list(self._renewing.items()):
                try:
                    await self._renew_one(key, renewing)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # the message comes back when its invisible time ends
                    log.warning("renewal of message %s of %s failed: %s", key[2], key[1], e)
                    self._renewing.pop(key, None)

    async def _renew_one(self, key: tuple[str, str, str], renewing: _Renewing) -> None:
        c = self.config
        now = now_ms()
        if not renewing.owner.is_active:  # the client went away: its messages come back soon
            self._renewing.pop(key, None)
            await self._change(renewing, c.invisible_time_millis_when_clear)
            return
        if ReceiptHandle.decode(renewing.handle).next_visible_time - now > c.renew_ahead_time_millis:
            return
        if now - renewing.received_at >= c.renew_max_time_millis:
            self._renewing.pop(key, None)
            return
        renewing.busy = asyncio.get_running_loop().create_future()
        try:
            answer, renewed = await self._change(renewing, c.default_invisible_time_mills)
            if renewed is not None:  # also when an ack took it meanwhile: it waits for this handle
                renewing.handle, renewing.failures = renewed, 0
        finally:
            renewing.busy.set_result(None)
            renewing.busy = None
        if renewed is None:
            renewing.failures += 1
            if renewing.failures >= c.max_renew_retry_times:
                log.warning("message %s of %s no longer renewed: %s", key[2], key[1], answer.remark)
                self._renewing.pop(key, None)

    async def _change(self, renewing: _Renewing, invisible_ms: int) -> tuple[RemotingCommand, str | None]:
        """CHANGE_MESSAGE_INVISIBLETIME of a renewed message: the answer, and its new handle."""
        handle = ReceiptHandle.decode(renewing.handle)
        change = _ack_request(renewing.topic, renewing.group, handle, invisible_ms)
        answer = await renewing.call(RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change.fields()))
        if answer.code != ResponseCode.SUCCESS:
            return answer, None
        return answer, _changed_handle(handle, answer).encode()

    # -- AckMessage ----------------------------------------------------------------------------

    async def ack_message(
        self, request: service_pb2.AckMessageRequest, call: Call, owner: LocalChannel | None = None
    ) -> service_pb2.AckMessageResponse:
        try:
            topic = check_topic(request.topic)
            group = check_group(request.group)
        except ProxyError as e:
            return service_pb2.AckMessageResponse(status=status(e.code, e.message))

        async def ack_one(entry: service_pb2.AckMessageEntry) -> definition_pb2.Status:
            try:
                text = await self._renewed_handle(owner, group, entry.message_id, entry.receipt_handle)
                return _ack_status(await self._ack(topic, group, decode_handle(text), call), "ack")
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
        self, request: service_pb2.ChangeInvisibleDurationRequest, call: Call, owner: LocalChannel | None = None
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        try:
            topic = check_topic(request.topic)
            group = check_group(request.group)
            invisible = request.invisible_duration.ToMilliseconds()
            validate_invisible_time(self.config, invisible, 0)
            handle = decode_handle(await self._renewed_handle(owner, group, request.message_id, request.receipt_handle))
            change = _ack_request(topic, group, handle, invisible)
            answer = await call(RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change.fields()))
            if answer.code != ResponseCode.SUCCESS:
                return service_pb2.ChangeInvisibleDurationResponse(
                    status=_ack_status(answer, "changeInvisibleDuration")
                )
            renewed = _changed_handle(handle, answer)
        except Exception as exc:
            return service_pb2.ChangeInvisibleDurationResponse(status=from_exception(exc))
        return service_pb2.ChangeInvisibleDurationResponse(status=OK, receipt_handle=renewed.encode())

    # -- ForwardMessageToDeadLetterQueue -------------------------------------------------------

    async def forward_message_to_dead_letter_queue(
        self,
        request: service_pb2.ForwardMessageToDeadLetterQueueRequest,
        call: Call,
        owner: LocalChannel | None = None,
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        try:
            topic = check_topic(request.topic)
            group = check_group(request.group)
            handle = decode_handle(await self._renewed_handle(owner, group, request.message_id, request.receipt_handle))
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


def _changed_handle(handle: ReceiptHandle, answer: RemotingCommand) -> ReceiptHandle:
    """The handle after a CHANGE_MESSAGE_INVISIBLETIME answered ``answer``: the broker checkpointed
    the message anew, from its own offset (ChangeInvisibleTimeProcessor)."""
    changed = pop.ChangeInvisibleTimeResponse.from_fields(answer.ext_fields)
    extra = handle.extra_info
    renewed = extra.changed(extra.msg_queue_offset, changed.pop_time, changed.invisible_time, changed.revive_qid)
    return ReceiptHandle(renewed, handle.commit_log_offset)


def _ack_status(answer: RemotingCommand, what: str) -> definition_pb2.Status:
    """An ack's or change's status: a broker refusal of the client's permission is UNAUTHORIZED (the
    proxy refuses it before asking the broker); any other failure "status is abnormal", as the
    proxy answers a broker's NO_EXIST."""
    if answer.code in (ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION):
        return from_response(answer)
    return _abnormal(what)


def _abnormal(what: str) -> definition_pb2.Status:
    return status(Code.INTERNAL_SERVER_ERROR, f"{what} failed: status is abnormal")
