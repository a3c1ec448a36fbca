"""The gRPC endpoint's requests in ``rocketmq_rpc_latency`` (protocol_type ``grpc_v2``, as RocketMQ's
proxy labels its gRPC channels): a server interceptor times every unary and server-streaming call of
MessagingService from its arrival to its last answer (a ReceiveMessage's includes its long poll) and
keys it (method, the answer's ``status.code``). A call that ends in a gRPC error, not an answer, is
``response_code="-1"``. Telemetry, a stream as long as the client lives, is not timed.

The table is the neutral ``rmq._rpc_latency.LatencyTable``: rmq.cli.broker, which starts broker and
proxy, hands it to the broker's collector, so one scrape shows both protocols.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

from rmq._rpc_latency import LatencyTable
from rmq.protocol.grpc.v2 import definition_pb2, service_pb2_grpc

SERVICE_PREFIX = "/apache.rocketmq.v2.MessagingService/"
# a call that ended in a gRPC error (no answer carried a status)
NO_STATUS = -1
_METHODS = frozenset(name for name in dir(service_pb2_grpc.MessagingServiceServicer) if not name.startswith("_"))
_CODES = frozenset(definition_pb2.Code.values()) | {NO_STATUS}


class GrpcRpcLatency(LatencyTable):
    """Keyed (MessagingService method name, status Code); observed on the rmq-grpc loop."""

    __slots__ = ()

    def observe(self, method: str, code: int, seconds: float) -> None:
        # the method came through the interceptor's name check; a code outside the enum is a bug
        # of ours, folded into NO_STATUS rather than a new series
        self.observe_key((method, code if code in _CODES else NO_STATUS), seconds)


def _status_code(response: Any) -> int | None:
    status = getattr(response, "status", None)
    if status is None or not response.HasField("status"):
        return None
    return int(status.code)


async def _aiter(responses: Any) -> AsyncIterator[Any]:
    if hasattr(responses, "__aiter__"):
        async for response in responses:
            yield response
    else:
        for response in responses:
            yield response


class LatencyInterceptor(grpc.aio.ServerInterceptor):
    """Times MessagingService's unary and server-streaming calls into ``latency``."""

    def __init__(self, latency: GrpcRpcLatency) -> None:
        self.latency = latency

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        full_name = handler_call_details.method  # type: ignore[attr-defined]
        if handler is None or not full_name.startswith(SERVICE_PREFIX):
            return handler
        method = full_name[len(SERVICE_PREFIX) :]
        if method not in _METHODS:
            return handler
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _unary(self, method: str, behavior: Callable) -> Callable:
        latency = self.latency

        async def timed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            code: int | None = None
            try:
                response = behavior(request, context)
                if inspect.isawaitable(response):  # the servicer's defaults (UNIMPLEMENTED) are plain
                    response = await response
                code = _status_code(response)
                return response
            finally:
                latency.observe(method, NO_STATUS if code is None else code, time.perf_counter() - started)

        return timed

    def _stream(self, method: str, behavior: Callable) -> Callable:
        latency = self.latency

        async def timed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            started = time.perf_counter()
            code: int | None = None
            try:
                responses = behavior(request, context)
                if inspect.isawaitable(responses):  # one writing with context.write: no status to read
                    await responses
                    return
                async for response in _aiter(responses):
                    if code is None:
                        code = _status_code(response)
                    yield response
            finally:
                latency.observe(method, NO_STATUS if code is None else code, time.perf_counter() - started)

        return timed
