"""MessagingService: each RPC of ``apache.rocketmq.v2.MessagingService`` handed to the activity that
serves it (RocketMQ's GrpcMessagingApplication and its activities), and every failure turned into
the response's status (rmq.proxy.status): a call is answered, never failed at the gRPC level.

    route        QueryRoute
    client       Heartbeat, Telemetry, NotifyClientTermination
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from rmq.protocol.grpc.v2 import service_pb2 as pb
from rmq.protocol.grpc.v2.service_pb2_grpc import MessagingServiceServicer
from rmq.proxy.calls import BrokerCalls
from rmq.proxy.client import ClientService
from rmq.proxy.config import ProxyConfig
from rmq.proxy.context import CallContext
from rmq.proxy.route import RouteService
from rmq.proxy.status import from_exception

_Response = TypeVar("_Response")


class MessagingService(MessagingServiceServicer):
    def __init__(self, config: ProxyConfig, calls: BrokerCalls, grpc_port: int):
        self.config = config
        self.calls = calls
        self.bridge = calls.bridge
        self.routes = RouteService(calls, grpc_port)
        self.clients = ClientService(
            calls, config.max_message_size, config.enable_topic_message_type_check, config.delay_levels_ms
        )

    def close(self) -> None:
        """End the open streams (shutdown)."""
        self.clients.close()

    async def _unary(
        self,
        context: Any,
        response_type: Callable[..., _Response],
        serve: Callable[[CallContext], Awaitable[_Response]],
    ) -> _Response:
        try:
            ctx = CallContext.of(context, self.bridge)
            return await serve(ctx)
        except Exception as e:  # every failure is the response's status
            return response_type(status=from_exception(e))

    async def QueryRoute(self, request: pb.QueryRouteRequest, context: Any) -> pb.QueryRouteResponse:
        return await self._unary(context, pb.QueryRouteResponse, lambda ctx: self.routes.query_route(request))

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
