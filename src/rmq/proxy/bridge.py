"""The one seam between the gRPC endpoint and its broker: remoting requests served in process.

Every broker operation the endpoint needs is the ``RemotingCommand`` a 4.x client would send
(SEND_MESSAGE_V2, HEART_BEAT, END_TRANSACTION, ...), handed to the broker's own processors on the
broker's event loop thread, as RocketMQ 5.x's proxy in local mode hands its requests to the broker's
processors. So the gRPC side never reimplements a send, a transaction or a filter: one semantics.

    bridge = Bridge(broker, asyncio_loop)          # broker: what BrokerSide names (the RemotingServer)
    channel = bridge.channel(client_id, peer)      # a LocalChannel: one per gRPC client id
    response = await bridge.call(request, channel) # on the rmq-grpc loop; the broker's answer
    bridge.close()                                 # pending calls cancelled, channels forgotten

A ``LocalChannel`` stands in for a client's connection: the broker's processors answer on it
(``send_response``, from its loop or any thread) and the answer resolves the caller's future back on
the rmq-grpc loop; a request the broker sends *to* the client on it (CHECK_TRANSACTION_STATE) goes
to the channel's ``on_request`` on the rmq-grpc loop (the client's Telemetry stream, as RocketMQ's
GrpcClientChannel turns it into a RecoverOrphanedTransactionCommand). When the client goes away,
``forget`` tells the broker as a closed connection would (its producer and consumer registrations
end). The endpoint never touches broker state any other way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from rmq.errors import RmqError
from rmq.net.channel import PeerChannel
from rmq.net.codec import RemotingCommand
from rmq.protocol.acl import SignedCall

log = logging.getLogger("rmq.proxy")

# What a broker request may take before the gRPC call is answered PROXY_TIMEOUT (RocketMQ's proxy
# waits 3 s for a send to its local broker).
DEFAULT_CALL_TIMEOUT = 3.0


class BrokerSide(Protocol):
    """What the seam needs of the broker: its endpoint's dispatch and its loop (a RemotingServer)."""

    def call_soon_threadsafe(self, fn: Callable[..., object], *args: Any) -> None: ...

    def dispatch(self, channel: Any, request: RemotingCommand) -> None: ...

    def channel_closed(self, channel: Any) -> None: ...


class BridgeClosed(RmqError):
    """The endpoint is shutting down: the call was cancelled, or the broker's loop is gone."""


class LocalChannel(PeerChannel):
    """A gRPC client as the broker's processors see a connection (``remote_address``,
    ``send_response``, ``send_oneway``): one per client id (``x-mq-client-id``)."""

    def __init__(self, bridge: Bridge, client_id: str, remote_address: str):
        super().__init__(remote_address)
        self.client_id = client_id
        self._bridge = bridge
        self._active = True
        # when the request being served was read (send processors measure their queueing from it)
        self.read_at = time.monotonic()
        #: rmq-grpc loop: a request the broker sends this client (CHECK_TRANSACTION_STATE)
        self.on_request: Callable[[RemotingCommand], None] | None = None
        #: the endpoint's own channel (its requests pass the broker's ACL check)
        self.internal = False
        #: broker loop: the signed 5.x call the request being dispatched serves (the ACL check reads it)
        self.signed_call: SignedCall | None = None

    def __repr__(self) -> str:
        return f"<LocalChannel {self.client_id} {self.remote_address}>"

    @property
    def is_active(self) -> bool:
        return self._active

    def _send(self, cmd: RemotingCommand) -> None:
        # the broker's answer (any thread): resolves the call waiting on the rmq-grpc loop
        self._bridge._answer(cmd)

    # the broker's endpoint queues an answer made at once this way (on its loop thread)
    _queue = PeerChannel.send_response

    def send_oneway(self, request: RemotingCommand) -> None:
        """A request the broker sends the client (any thread), handed to ``on_request``."""
        self._bridge._to_client(self, request)

    def close(self) -> None:
        """The broker gives up on this client (it stayed silent too long): the endpoint forgets it."""
        self._bridge._close_from_broker(self)


class Bridge:
    """Requests from the rmq-grpc loop to the broker's processors, and their answers back."""

    def __init__(self, broker: BrokerSide, loop: asyncio.AbstractEventLoop, timeout: float = DEFAULT_CALL_TIMEOUT):
        self._broker = broker
        self._loop = loop
        self.timeout = timeout
        # opaque -> the future of the call waiting for it (rmq-grpc loop only)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._channels: dict[str, LocalChannel] = {}
        self._closed = False
        # the broker's answers on their way to the rmq-grpc loop: one wake-up takes all of them
        # (each wake-up of an asyncio loop from another thread is a socket write, tens of µs on the
        # broker's loop when the GIL is busy)
        self._answers: deque[RemotingCommand] = deque()
        self._drain_scheduled = False

    # -- clients ------------------------------------------------------------------------------

    def channel(self, client_id: str, remote_address: str) -> LocalChannel:
        """The client's channel, made on its first call (rmq-grpc loop)."""
        channel = self._channels.get(client_id)
        if channel is None or not channel.is_active:
            channel = self._channels[client_id] = LocalChannel(self, client_id, remote_address)
        return channel

    def find(self, client_id: str) -> LocalChannel | None:
        return self._channels.get(client_id)

    @property
    def channels(self) -> list[LocalChannel]:
        return list(self._channels.values())

    def forget(self, channel: LocalChannel) -> None:
        """The client is gone (terminated, or its stream ended): the broker forgets it as it forgets
        a closed connection's producers and consumers (rmq-grpc loop)."""
        if self._channels.get(channel.client_id) is channel:
            del self._channels[channel.client_id]
        if channel._active:
            channel._active = False
            try:
                self._broker.call_soon_threadsafe(self._broker.channel_closed, channel)
            except RuntimeError:
                pass  # the broker's loop is closed: it forgot everyone

    # -- calls --------------------------------------------------------------------------------

    async def call(
        self,
        request: RemotingCommand,
        channel: LocalChannel,
        signed: SignedCall | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand:
        """Serve ``request`` from ``channel``'s client by the broker's processors; their answer.
        ``signed``: the client's signed call it serves, for the broker's ACL check. asyncio.TimeoutError
        after ``timeout`` (the bridge's by default); BridgeClosed on shutdown."""
        if self._closed:
            raise BridgeClosed("the gRPC endpoint is shutting down")
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._pending[request.opaque] = future
        try:
            self._broker.call_soon_threadsafe(self._dispatch, channel, request, signed)
        except RuntimeError:
            self._pending.pop(request.opaque, None)
            raise BridgeClosed("the broker is shutting down") from None
        try:
            return await asyncio.wait_for(future, self.timeout if timeout is None else timeout)
        except asyncio.CancelledError:
            if self._closed:
                raise BridgeClosed("the gRPC endpoint is shutting down") from None
            raise
        finally:
            self._pending.pop(request.opaque, None)

    def _dispatch(self, channel: LocalChannel, request: RemotingCommand, signed: SignedCall | None) -> None:
        # broker loop thread: the check runs inside dispatch, before anything else is dispatched
        channel.read_at = time.monotonic()
        channel.signed_call = signed
        self._broker.dispatch(channel, request)

    def _answer(self, response: RemotingCommand) -> None:
        # appended before the flag is read: a drain that cleared it pops this answer, or a new one is asked
        self._answers.append(response)
        if self._drain_scheduled:
            return
        self._drain_scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:
            pass  # the rmq-grpc loop is closed: nobody waits any more

    def _drain(self) -> None:
        self._drain_scheduled = False
        answers, pending = self._answers, self._pending
        while answers:
            response = answers.popleft()
            future = pending.get(response.opaque)
            if future is not None and not future.done():
                future.set_result(response)

    def _to_client(self, channel: LocalChannel, request: RemotingCommand) -> None:
        def deliver() -> None:
            if channel.on_request is None:
                log.debug("request code %d for %s dropped: the client has no open stream", request.code, channel)
                return
            channel.on_request(request)

        try:
            self._loop.call_soon_threadsafe(deliver)
        except RuntimeError:
            pass

    def _close_from_broker(self, channel: LocalChannel) -> None:
        try:
            self._loop.call_soon_threadsafe(self.forget, channel)
        except RuntimeError:
            pass

    def close(self) -> None:
        """Cancel every call still waiting and forget every client (rmq-grpc loop)."""
        self._closed = True
        for future in list(self._pending.values()):
            future.cancel()
        for channel in list(self._channels.values()):
            self.forget(channel)
