"""Heartbeat, Telemetry and NotifyClientTermination (RocketMQ 5.x's ClientActivity and
GrpcClientSettingsManager): who a client is, and the settings it and the endpoint agree on.

Each client opens a Telemetry stream (keyed by its ``x-mq-client-id``) and writes its Settings; the
endpoint registers it with the broker (a HEART_BEAT through the client's LocalChannel: a producer
under each of its topics' names as producer group, as the proxy does, a consumer under its group
with its subscriptions) and answers with the settings the client is to use:

    every client    the client's own settings, metric off
    producer        backoff_policy: 3 attempts, exponential 10 ms .. 1 s x2 (the proxy's
                    grpcClientProducer* defaults); publishing.max_body_size = the store's
                    maxMessageSize, validate_message_type = enableTopicMessageTypeCheck
    consumer        subscription.receive_batch_size 32, long_polling_timeout 20 s (the proxy's
                    grpcClientConsumer* defaults), fifo = the group's consumeMessageOrderly;
                    backoff_policy: the group's retryMaxTimes + 1 attempts, customized backoff on
                    the broker's delay levels (the retries' schedule)

The stream stays open: a request the broker sends the client (CHECK_TRANSACTION_STATE) is written
down it (rmq.proxy.transaction). Heartbeat repeats the registration every 10 s; a client silent
for 120 s is dropped by the broker as a silent connection is. NotifyClientTermination unregisters
the client (UNREGISTER_CLIENT) and forgets its channel. A heartbeat or termination from a client
whose settings the endpoint does not know is UNRECOGNIZED_CLIENT_TYPE, as the proxy answers.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import orjson
from google.protobuf.duration_pb2 import Duration

from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.grpc.v2 import service_pb2 as pb
from rmq.protocol.grpc.v2.definition_pb2 import (
    ClientType,
    Code,
    CustomizedBackoff,
    ExponentialBackoff,
    FilterType,
    Resource,
    RetryPolicy,
    Settings,
)
from rmq.protocol.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rmq.protocol.message import GROUP_MAX_LENGTH, VALID_NAME_PATTERN
from rmq.protocol.subscription import ExpressionType, build_subscription_data
from rmq.proxy.bridge import LocalChannel
from rmq.proxy.calls import BrokerCalls
from rmq.proxy.context import CallContext
from rmq.proxy.route import check_topic
from rmq.proxy.status import OK, ProxyError, check

log = logging.getLogger("rmq.proxy")

# the proxy's defaults (ProxyConfig's grpcClientProducer* and grpcClientConsumer*)
PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2
CONSUMER_RECEIVE_BATCH_SIZE = 32
CONSUMER_LONG_POLLING_TIMEOUT_MS = 20_000
# SubscriptionGroupConfig's retryMaxTimes when the broker has no config of the group yet
DEFAULT_RETRY_MAX_TIMES = 16
CONSUMER_TYPES = {
    ClientType.PUSH_CONSUMER: ConsumeType.CONSUME_PASSIVELY,
    ClientType.SIMPLE_CONSUMER: ConsumeType.CONSUME_ACTIVELY,
}
_FILTER_TYPES = {FilterType.TAG: ExpressionType.TAG, FilterType.SQL: ExpressionType.SQL92}
# what the heartbeat reports a 5.x client's version as (MQVersion's V5_0_0 ordinal)
CLIENT_VERSION_5 = 453


def _duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def check_group(resource: Resource) -> str:
    """The consumer group's name; ILLEGAL_CONSUMER_GROUP when it is none (GrpcValidator)."""
    name = resource.name
    if not name or len(name) > GROUP_MAX_LENGTH or not VALID_NAME_PATTERN.fullmatch(name):
        raise ProxyError(
            Code.ILLEGAL_CONSUMER_GROUP,
            f"consumer group {name!r} is illegal: expected 1-{GROUP_MAX_LENGTH} characters of [A-Za-z0-9_%|-]",
        )
    return name


class TelemetryStream:
    """One open Telemetry stream: what the endpoint writes to the client goes through ``queue``."""

    def __init__(self, ctx: CallContext):
        self.ctx = ctx
        self.queue: asyncio.Queue[pb.TelemetryCommand | None] = asyncio.Queue()
        #: the client's channel once its settings came, and what the channel hands broker requests to
        self.channel: LocalChannel | None = None
        self.on_request: Callable[[RemotingCommand], None] | None = None
        #: why the stream is to end with an error status (the handler aborts the call with it)
        self.failure: tuple[grpc.StatusCode, str] | None = None

    def write(self, command: pb.TelemetryCommand) -> None:
        self.queue.put_nowait(command)

    def end(self) -> None:
        self.queue.put_nowait(None)


class ClientService:
    def __init__(
        self,
        calls: BrokerCalls,
        max_body_size: int,
        validate_message_type: bool,
        delay_levels_ms: list[int],
        acl_enable: bool = False,
    ):
        self.acl_enable = acl_enable
        self.calls = calls
        self.max_body_size = max_body_size
        self.validate_message_type = validate_message_type
        self.delay_levels_ms = delay_levels_ms
        #: client id -> the settings it wrote (GrpcClientSettingsManager's CLIENT_SETTINGS_MAP)
        self.settings: dict[str, Settings] = {}
        self._streams: set[TelemetryStream] = set()
        #: client id -> its open stream, once its settings came (what its channel's requests go down)
        self._stream_of: dict[str, TelemetryStream] = {}
        #: rmq-grpc loop: what a request the broker sends a client becomes on its stream
        self.on_broker_request: Callable[[LocalChannel, TelemetryStream, RemotingCommand], None] | None = None

    def close(self) -> None:
        """End every open stream (shutdown)."""
        for stream in list(self._streams):
            stream.end()

    # -- the broker's registrations -------------------------------------------------------------

    def _heartbeat_body(self, client_id: str, settings: Settings, group: str = "") -> bytes:
        producers: list[dict[str, str]] = []
        consumers: list[dict[str, object]] = []
        if settings.client_type == ClientType.PRODUCER:
            producers = [{"groupName": check_topic(topic)} for topic in settings.publishing.topics]
        elif settings.client_type in CONSUMER_TYPES:
            subscriptions = []
            for entry in settings.subscription.subscriptions:
                topic = check_topic(entry.topic)
                expression_type = _FILTER_TYPES.get(entry.expression.type, ExpressionType.TAG)
                try:
                    data = build_subscription_data(topic, entry.expression.expression, expression_type)
                except RequestRefused as e:
                    raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, e.remark) from None
                subscriptions.append(data.to_json())
            consumers = [
                {
                    "groupName": group or check_group(settings.subscription.group),
                    "consumeType": CONSUMER_TYPES[settings.client_type].name,
                    "messageModel": MessageModel.CLUSTERING.name,
                    "consumeFromWhere": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET.name,
                    "unitMode": False,
                    "subscriptionDataSet": subscriptions,
                }
            ]
        else:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, f"client type {ClientType.Name(settings.client_type)}")
        return orjson.dumps({"clientID": client_id, "producerDataSet": producers, "consumerDataSet": consumers})

    async def register(self, ctx: CallContext, settings: Settings, group: str = "") -> LocalChannel:
        """HEART_BEAT for the client through its channel: the broker knows it from now on."""
        channel = ctx.channel
        request = RemotingCommand.request(
            RequestCode.HEART_BEAT, body=self._heartbeat_body(channel.client_id, settings, group)
        )
        request.language = ctx.language or request.language
        request.version = CLIENT_VERSION_5
        check(await self.calls.for_client(ctx, request))
        stream = self._stream_of.get(channel.client_id)
        if stream is not None and channel.on_request is None:
            # a channel the broker dropped (silent 120 s) and this heartbeat made again
            self._attach(stream, channel)
        return channel

    def _attach(self, stream: TelemetryStream, channel: LocalChannel) -> None:
        stream.channel = channel
        stream.on_request = channel.on_request = functools.partial(self._broker_request, channel, stream)
        self._stream_of[channel.client_id] = stream

    async def _group_config(self, group: str) -> dict[str, Any] | None:
        request = RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
        response = await self.calls.local(request)
        if response.code != ResponseCode.SUCCESS:
            return None
        return orjson.loads(body_bytes(response.body))

    # -- settings ---------------------------------------------------------------------------------

    async def answer_settings(self, settings: Settings) -> Settings:
        """What the endpoint tells the client to use (GrpcClientSettingsManager.getClientSettings)."""
        merged = Settings()
        merged.CopyFrom(settings)
        merged.metric.on = False
        if settings.HasField("publishing"):
            merged.backoff_policy.CopyFrom(
                RetryPolicy(
                    max_attempts=PRODUCER_MAX_ATTEMPTS,
                    exponential_backoff=ExponentialBackoff(
                        initial=_duration(PRODUCER_BACKOFF_INITIAL_MS),
                        max=_duration(PRODUCER_BACKOFF_MAX_MS),
                        multiplier=PRODUCER_BACKOFF_MULTIPLIER,
                    ),
                )
            )
            merged.publishing.max_body_size = self.max_body_size
            merged.publishing.validate_message_type = self.validate_message_type
        elif settings.HasField("subscription"):
            group = await self._group_config(settings.subscription.group.name)
            retry_max_times = (
                int(group.get("retryMaxTimes", DEFAULT_RETRY_MAX_TIMES)) if group else DEFAULT_RETRY_MAX_TIMES
            )
            merged.subscription.receive_batch_size = CONSUMER_RECEIVE_BATCH_SIZE
            merged.subscription.long_polling_timeout.CopyFrom(_duration(CONSUMER_LONG_POLLING_TIMEOUT_MS))
            merged.subscription.fifo = bool(group and group.get("consumeMessageOrderly"))
            merged.backoff_policy.CopyFrom(
                RetryPolicy(
                    max_attempts=retry_max_times + 1,
                    customized_backoff=CustomizedBackoff(next=[_duration(ms) for ms in self.delay_levels_ms]),
                )
            )
        return merged

    # -- the RPCs ---------------------------------------------------------------------------------

    async def telemetry(
        self, request_iterator: AsyncIterator[pb.TelemetryCommand], context
    ) -> AsyncIterator[pb.TelemetryCommand]:
        try:
            ctx = CallContext.of(context, self.calls.bridge, self.acl_enable)
        except ProxyError as e:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, e.message)
        stream = TelemetryStream(ctx)
        self._streams.add(stream)
        reader = asyncio.ensure_future(self._read(stream, request_iterator, context))
        try:
            while True:
                command = await stream.queue.get()
                if command is None:
                    break
                yield command
            if stream.failure is not None:
                await context.abort(*stream.failure)
        finally:
            reader.cancel()
            self._streams.discard(stream)
            # the client stays registered (its heartbeats keep it): only what went down this stream stops
            if stream.channel is not None:
                if stream.channel.on_request is stream.on_request:
                    stream.channel.on_request = None
                if self._stream_of.get(stream.channel.client_id) is stream:
                    del self._stream_of[stream.channel.client_id]

    async def _read(self, stream: TelemetryStream, request_iterator, context) -> None:
        try:
            async for command in request_iterator:
                if command.HasField("settings"):
                    await self._settings_from(stream, command.settings)
                # thread stack traces and verify results answer requests rmq never makes
        except ProxyError as e:
            # the proxy's processTelemetryException: a client's mistake is INVALID_ARGUMENT; a refused
            # signature or permission is what the proxy's authentication interceptor answers
            if e.code == Code.UNAUTHORIZED:
                code = grpc.StatusCode.UNAUTHENTICATED
            elif Code.BAD_REQUEST <= e.code < Code.INTERNAL_ERROR:
                code = grpc.StatusCode.INVALID_ARGUMENT
            else:
                code = grpc.StatusCode.INTERNAL
            stream.failure = (code, f"process client telemetryCommand failed. {e.message}")
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("telemetry of %s failed", stream.ctx.remote_address)
            stream.failure = (grpc.StatusCode.INTERNAL, f"process client telemetryCommand failed. {e}")
        finally:
            stream.end()

    async def _settings_from(self, stream: TelemetryStream, settings: Settings) -> None:
        if not (settings.HasField("publishing") or settings.HasField("subscription")):
            raise ProxyError(Code.BAD_REQUEST, "there is no publishing or subscription data in settings")
        ctx = stream.ctx
        channel = await self.register(ctx, settings)
        self._attach(stream, channel)
        self.settings[channel.client_id] = settings
        stream.write(pb.TelemetryCommand(status=OK, settings=await self.answer_settings(settings)))

    def _broker_request(self, channel: LocalChannel, stream: TelemetryStream, request: RemotingCommand) -> None:
        if self.on_broker_request is not None:
            self.on_broker_request(channel, stream, request)

    def _known_settings(self, ctx: CallContext) -> Settings:
        settings = self.settings.get(ctx.client_id)
        if settings is None:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
        return settings

    async def heartbeat(self, ctx: CallContext, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        settings = self._known_settings(ctx)
        group = check_group(request.group) if settings.client_type in CONSUMER_TYPES else ""
        await self.register(ctx, settings, group)
        return pb.HeartbeatResponse(status=OK)

    async def notify_client_termination(
        self, ctx: CallContext, request: pb.NotifyClientTerminationRequest
    ) -> pb.NotifyClientTerminationResponse:
        settings = self._known_settings(ctx)
        channel = ctx.channel
        if settings.client_type == ClientType.PRODUCER:
            unregisters = [{"producerGroup": topic.name} for topic in settings.publishing.topics]
        elif settings.client_type in CONSUMER_TYPES:
            unregisters = [{"consumerGroup": check_group(request.group)}]
        else:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, ClientType.Name(settings.client_type))
        del self.settings[channel.client_id]
        for fields in unregisters:
            request_fields = {"clientID": channel.client_id, **fields}
            check(
                await self.calls.for_client(ctx, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, request_fields))
            )
        ctx.bridge.forget(channel)
        return pb.NotifyClientTerminationResponse(status=OK)
