"""MessagingService: each RPC of ``apache.rocketmq.v2.MessagingService`` handed to the activity that
serves it (RocketMQ's GrpcMessagingApplication and its activities), and every failure turned into
the response's status (rmq.proxy.status): a call is answered, never failed at the gRPC level.

    route        QueryRoute
    client       Heartbeat, Telemetry, NotifyClientTermination
    send         SendMessage
    transaction  EndTransaction; the broker's transaction checks down a client's Telemetry stream
    consumer     QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration,
                 ForwardMessageToDeadLetterQueue
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from rmq.net.codec import RemotingCommand
from rmq.protocol.grpc.v2 import service_pb2 as pb
from rmq.protocol.grpc.v2.service_pb2_grpc import MessagingServiceServicer
from rmq.proxy.bridge import LocalChannel
from rmq.proxy.calls import BrokerCalls
from rmq.proxy.client import ClientService, TelemetryStream
from rmq.proxy.config import ProxyConfig
from rmq.proxy.consumer import Call, ConsumerActivities
from rmq.proxy.context import CallContext
from rmq.proxy.route import RouteService
from rmq.proxy.send import SendService
from rmq.proxy.status import from_exception
from rmq.proxy.transaction import TransactionService, TransactionTable

_Response = TypeVar("_Response")
# a client's request timeout when its settings do not say (the 5.x clients' default)
REQUEST_TIMEOUT_MS = 3000


class MessagingService(MessagingServiceServicer):
    def __init__(self, config: ProxyConfig, calls: BrokerCalls, grpc_port: int):
        self.config = config
        self.calls = calls
        self.bridge = calls.bridge
        self.routes = RouteService(calls, grpc_port)
        self.clients = ClientService(
            calls,
            config.max_message_size,
            config.enable_topic_message_type_check,
            config.delay_levels_ms,
            config.acl_enable,
        )
        table = TransactionTable()
        self.sends = SendService(calls, table, config.max_message_size, config.enable_topic_message_type_check)
        self.transactions = TransactionService(calls, table)
        self.clients.on_broker_request = self._to_client
        self.consumers = ConsumerActivities(config, calls, self.routes)

    def _to_client(self, channel: LocalChannel, stream: TelemetryStream, request: RemotingCommand) -> None:
        command = self.transactions.recovery_command(channel, request)
        if command is not None:
            stream.write(command)

    def close(self) -> None:
        """End the open streams (shutdown)."""
        self.clients.close()
        self.consumers.close()

    async def _unary(
        self,
        context: Any,
        response_type: Callable[..., _Response],
        serve: Callable[[CallContext], Awaitable[_Response]],
    ) -> _Response:
        try:
            ctx = CallContext.of(context, self.bridge, self.config.acl_enable)
            ctx.check_client_id()
            return await serve(ctx)
        except Exception as e:  # every failure is the response's status
            return response_type(status=from_exception(e))

    async def QueryRoute(self, request: pb.QueryRouteRequest, context: Any) -> pb.QueryRouteResponse:
        return await self._unary(context, pb.QueryRouteResponse, lambda ctx: self.routes.query_route(ctx, request))

    def _call(self, ctx: CallContext) -> Call:
        """The client's requests to the broker: through the bridge, on its channel."""
        channel, signed = ctx.channel, ctx.signed

        def call(request: Any, timeout: float | None = None) -> Awaitable[Any]:
            return self.bridge.call(request, channel, signed, timeout)

        return call

    async def QueryAssignment(self, request: pb.QueryAssignmentRequest, context: Any) -> pb.QueryAssignmentResponse:
        return await self._unary(
            context, pb.QueryAssignmentResponse, lambda ctx: self.consumers.query_assignment(request, self._call(ctx))
        )

    async def ReceiveMessage(self, request: pb.ReceiveMessageRequest, context: Any) -> AsyncIterator[Any]:
        remaining = context.time_remaining()
        try:
            ctx = CallContext.of(context, self.bridge, self.config.acl_enable)
            call = self._call(ctx)
        except Exception as e:
            yield pb.ReceiveMessageResponse(status=from_exception(e))
            return
        remaining_ms = None if remaining is None else remaining * 1000
        settings = self.clients.settings.get(ctx.channel.client_id)
        request_timeout_ms = REQUEST_TIMEOUT_MS
        if settings is not None and settings.HasField("request_timeout"):
            request_timeout_ms = settings.request_timeout.ToMilliseconds()
        responses = self.consumers.receive_message(request, call, request_timeout_ms, remaining_ms, ctx.channel)
        async for response in responses:
            yield response

    async def AckMessage(self, request: pb.AckMessageRequest, context: Any) -> pb.AckMessageResponse:
        return await self._unary(
            context,
            pb.AckMessageResponse,
            lambda ctx: self.consumers.ack_message(request, self._call(ctx), ctx.channel),
        )

    async def ChangeInvisibleDuration(
        self, request: pb.ChangeInvisibleDurationRequest, context: Any
    ) -> pb.ChangeInvisibleDurationResponse:
        return await self._unary(
            context,
            pb.ChangeInvisibleDurationResponse,
            lambda ctx: self.consumers.change_invisible_duration(request, self._call(ctx), ctx.channel),
        )

    async def ForwardMessageToDeadLetterQueue(
        self, request: pb.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> pb.ForwardMessageToDeadLetterQueueResponse:
        return await self._unary(
            context,
            pb.ForwardMessageToDeadLetterQueueResponse,
            lambda ctx: self.consumers.forward_message_to_dead_letter_queue(request, self._call(ctx), ctx.channel),
        )

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Any) -> pb.HeartbeatResponse:
        return await self._unary(context, pb.HeartbeatResponse, lambda ctx: self.clients.heartbeat(ctx, request))

    async def NotifyClientTermination(
        self, request: pb.NotifyClientTerminationRequest, context: Any
    ) -> pb.NotifyClientTerminationResponse:
        return await self._unary(
            context,
            pb.NotifyClientTerminationResponse,
            lambda ctx: self.clients.notify_client_termination(ctx, request),
        )

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[pb.TelemetryCommand]:
        # an async generator function itself: grpc.aio tells streaming handlers by that
        async for command in self.clients.telemetry(request_iterator, context):
            yield command

    async def SendMessage(self, request: pb.SendMessageRequest, context: Any) -> pb.SendMessageResponse:
        return await self._unary(context, pb.SendMessageResponse, lambda ctx: self.sends.send_message(ctx, request))

    async def EndTransaction(self, request: pb.EndTransactionRequest, context: Any) -> pb.EndTransactionResponse:
        return await self._unary(
            context, pb.EndTransactionResponse, lambda ctx: self.transactions.end_transaction(ctx, request)
        )
