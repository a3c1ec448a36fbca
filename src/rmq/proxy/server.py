"""GrpcProxy: the gRPC endpoint's server (grpcio's asyncio API) on its own thread, ``rmq-grpc``.

    proxy = GrpcProxy(config, broker).start()    # broker: rmq.proxy.bridge.BrokerSide (its server)
    proxy.port                                   # the port it listens on
    proxy.shutdown()                             # calls cancelled, streams ended, thread joined

The thread runs one asyncio loop: the grpc.aio server, every RPC's handler, the bridge's futures.
Name servers and other brokers are asked through a RemotingClient whose loop is the thread
``rmq-grpc-remoting``. Nothing here touches broker state: every broker operation is a remoting
request through the bridge (rmq.proxy.bridge), served on the broker's loop.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import threading
from typing import Any

import grpc
from grpc._cython import cygrpc

from rmq._service import ServiceThread
from rmq.errors import RmqError
from rmq.net.client import RemotingClient
from rmq.protocol.grpc.v2 import service_pb2_grpc
from rmq.proxy.bridge import Bridge, BrokerSide
from rmq.proxy.calls import BrokerCalls
from rmq.proxy.config import ProxyConfig
from rmq.proxy.metrics import GrpcRpcLatency, LatencyInterceptor
from rmq.proxy.service import MessagingService

log = logging.getLogger("rmq.proxy")

# the longest start() waits for the server to listen, and shutdown() for the thread to end
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
# what calls still running at shutdown get to finish before they are cancelled
STOP_GRACE = 0.5
# A request carries at most a batch of messages: a few maxMessageSize bodies and their properties.
INBOUND_BODIES = 4
_INBOUND_OVERHEAD = 1 << 20


# grpcio's own logger: it logs what it could not do for a call, at ERROR with a traceback
GRPC_LOGGER = logging.getLogger("grpc._cython.cygrpc")


class CallEndedFilter(logging.Filter):
    """grpcio logs an answer its core could not send because the call had ended meanwhile (the
    client's deadline passed as the answer left: a long poll answered at its end, a client giving
    up under load) as "ExecuteBatchError raised in core", at ERROR with a traceback. It is the
    client's doing, expected, and goes to rmq.proxy's log at DEBUG instead. A batch core refused
    to start (a call used wrongly: a bug) and every other line of grpcio's stay as grpcio logs them."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, cygrpc.ExecuteBatchError) and str(exc).startswith('Failed "execute_batch"'):
            log.debug(
                "%s: the call ended before its answer was sent (the client's deadline passed)", record.getMessage()
            )
            return False
        return True


def quiet_ended_calls() -> None:
    """CallEndedFilter on grpcio's logger, once per process (any thread)."""
    if not any(isinstance(f, CallEndedFilter) for f in GRPC_LOGGER.filters):
        GRPC_LOGGER.addFilter(CallEndedFilter())


def bind_error(host: str, port: int) -> str | None:
    """Why the OS refuses ``host:port`` to a listener ("Address already in use"), None when it takes
    it: grpcio's "Failed to bind" names no cause, and whoever starts brokers on free ports (the
    tests, rmq-perf) picks another port only for a taken one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            return e.strerror
    return None


class GrpcProxy(ServiceThread):
    """The endpoint: its thread (a ServiceThread whose one round is the asyncio loop serving until
    shutdown), loop, server, bridge and services."""

    def __init__(self, config: ProxyConfig, broker: BrokerSide):
        super().__init__("rmq-grpc")
        self.config = config
        self.broker = broker
        self.loop: asyncio.AbstractEventLoop | None = None
        self.bridge: Bridge | None = None
        self.service: MessagingService | None = None
        self.remoting = RemotingClient(name="rmq-grpc-remoting", credentials=config.cluster_credentials)
        #: every call's latency by method and status code (rocketmq_rpc_latency, protocol_type grpc_v2)
        self.rpc_latency = GrpcRpcLatency()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._port = 0

    @property
    def port(self) -> int:
        """The port the endpoint listens on (known once started)."""
        if not self._port:
            raise RuntimeError("the gRPC endpoint is not listening yet: call start() first")
        return self._port

    def start(self) -> GrpcProxy:  # type: ignore[override]  # returns itself, as the roles' start() do
        quiet_ended_calls()
        self.remoting.start()
        super().start()
        if not self._ready.wait(START_TIMEOUT):
            self.shutdown()
            raise RmqError(f"the gRPC endpoint did not start within {START_TIMEOUT} s")
        if self._failure is not None:
            self.shutdown()
            host, port = self.config.host, self.config.grpc_server_port
            cause = bind_error(host, port)
            raise RmqError(
                f"the gRPC endpoint cannot listen on {host}:{port}: {self._failure}" + (f" ({cause})" if cause else "")
            )
        log.info("gRPC endpoint listening on %s:%d", self.config.host, self._port)
        return self

    def wakeup(self) -> None:
        super().wakeup()
        loop, stop = self.loop, self._stop
        if self.is_stopped and loop is not None and stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass  # the loop already ended

    def shutdown(self, timeout: float = STOP_TIMEOUT) -> None:
        """Cancel the calls and streams, stop the server and its loop, join the thread."""
        super().shutdown(timeout)
        self.remoting.shutdown()
        # grpc.aio keeps a poller thread of its own while any server object lives, and a call that
        # ended in an error leaves its server in a reference cycle: collect it, so that thread ends
        # with the endpoint rather than at some later collection
        gc.collect()

    def __enter__(self) -> GrpcProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- the rmq-grpc thread ------------------------------------------------------------------

    def run_once(self) -> None:
        """The one round: serve until shutdown (a failure to start ends the service)."""
        loop = self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as e:  # start() reports it
            # without its traceback, whose frames would keep the grpc server alive
            self._failure = e.with_traceback(None)
        finally:
            self._stopped = True  # never a second round: a server that stopped is not restarted
            self._ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def _credentials(self) -> grpc.ServerCredentials | None:
        config = self.config
        if not (config.tls_cert_path and config.tls_key_path):
            return None
        with open(config.tls_key_path, "rb") as key, open(config.tls_cert_path, "rb") as cert:
            return grpc.ssl_server_credentials([(key.read(), cert.read())])

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.bridge = Bridge(self.broker, loop)
        calls = BrokerCalls(self.config, self.bridge, self.remoting)
        inbound = INBOUND_BODIES * self.config.max_message_size + _INBOUND_OVERHEAD
        options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", inbound), ("grpc.so_reuseport", 0)]
        server = grpc.aio.server(options=options, interceptors=[LatencyInterceptor(self.rpc_latency)])
        address = f"{self.config.host}:{self.config.grpc_server_port}"
        credentials = self._credentials()
        try:
            port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
        except BaseException:
            await server.stop(None)
            raise
        self._port = port
        self.service = MessagingService(self.config, calls, port)
        service_pb2_grpc.add_MessagingServiceServicer_to_server(self.service, server)
        await server.start()
        self._ready.set()
        try:
            if not self.is_stopped:  # a shutdown that came while starting
                await self._stop.wait()
        finally:
            # streams first (their handlers return), then the calls still waiting on the broker
            self.service.close()
            self.bridge.close()
            await server.stop(STOP_GRACE)
