"""Where the endpoint's remoting requests go: its own broker through the bridge, the name servers and
the other brokers of a route over remoting (RocketMQ's proxy keeps an MQClientAPI for those), and the
topic facts it needs on every send, cached briefly.

    calls = BrokerCalls(config, bridge, remoting_client)
    await calls.local(request)               # this broker's processors (as the endpoint itself)
    await calls.for_client(ctx, request)     # ... for a calling client (its channel, its signed call)
    await calls.namesrv(request)             # the first name server that answers
    await calls.broker(addr, request)        # this broker in process, another over remoting
    await calls.topic(topic)                 # TopicInfo (queues, perm, message type), or None
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import orjson

from rmq.errors import RemotingError, RemotingTimeoutError
from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.grpc.v2.definition_pb2 import Code
from rmq.protocol.topic_attributes import TopicMessageType, topic_message_type
from rmq.proxy.bridge import Bridge, LocalChannel
from rmq.proxy.config import ProxyConfig
from rmq.proxy.context import CallContext
from rmq.proxy.status import ProxyError, check

# How long a topic's config is reused for sends (RocketMQ's proxy caches topic metadata too): a
# change of queues or message type reaches the endpoint within this; the broker checks types itself.
TOPIC_CACHE_SECONDS = 1.0
# the endpoint's own client id, for the requests it makes for itself (routes, topic configs)
SELF_CLIENT_ID = "rmq-grpc-endpoint"


@dataclasses.dataclass(frozen=True)
class TopicInfo:
    """What a send needs of its topic on this broker."""

    name: str
    write_queue_nums: int
    read_queue_nums: int
    perm: int
    message_type: TopicMessageType


def topic_info(body: bytes) -> TopicInfo:
    """GET_TOPIC_CONFIG's answer (a topic config's JSON)."""
    obj = orjson.loads(body)
    return TopicInfo(
        name=str(obj["topicName"]),
        write_queue_nums=int(obj.get("writeQueueNums", 0)),
        read_queue_nums=int(obj.get("readQueueNums", 0)),
        perm=int(obj.get("perm", 0)),
        message_type=topic_message_type(obj.get("attributes")),
    )


class BrokerCalls:
    def __init__(self, config: ProxyConfig, bridge: Bridge, client: RemotingClient):
        self.config = config
        self.bridge = bridge
        self.client = client
        self._topics: dict[str, tuple[float, TopicInfo | None]] = {}
        self._self: LocalChannel | None = None

    @property
    def own_channel(self) -> LocalChannel:
        if self._self is None or not self._self.is_active:
            self._self = self.bridge.channel(SELF_CLIENT_ID, f"{self.config.host}:0")
            self._self.internal = True
        return self._self

    async def local(self, request: RemotingCommand) -> RemotingCommand:
        """``request`` to this broker as the endpoint itself (past the broker's ACL check)."""
        return await self.bridge.call(request, self.own_channel)

    async def for_client(self, ctx: CallContext, request: RemotingCommand) -> RemotingCommand:
        """``request`` to this broker for the calling client: its channel, its signed call checked."""
        return await self.bridge.call(request, ctx.channel, ctx.signed)

    async def remote(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        """``request`` to ``addr`` over remoting; ProxyError PROXY_TIMEOUT / INTERNAL_SERVER_ERROR
        when it cannot be asked."""
        try:
            future = self.client.invoke_async(addr, request, self.bridge.timeout)
            return await asyncio.wrap_future(future)
        except RemotingTimeoutError as e:
            raise ProxyError(Code.PROXY_TIMEOUT, f"{addr} did not answer in time: {e}") from None
        except RemotingError as e:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"cannot reach {addr}: {e}") from None

    async def broker(self, addr: str, request: RemotingCommand, ctx: CallContext | None = None) -> RemotingCommand:
        """This broker in process (for ``ctx``'s client when given), another over remoting."""
        if addr == self.config.broker_addr:
            return await (self.for_client(ctx, request) if ctx is not None else self.local(request))
        return await self.remote(addr, request)

    async def namesrv(self, request_factory) -> RemotingCommand:
        """The answer of the first name server that gives one (``request_factory()`` makes a fresh
        request for each: opaques are not reused)."""
        error: ProxyError | None = None
        for addr in self.config.namesrv_addrs:
            try:
                return await self.remote(addr, request_factory())
            except ProxyError as e:
                error = e
        raise error or ProxyError(Code.INTERNAL_SERVER_ERROR, "no name server is configured")

    async def topic(self, topic: str) -> TopicInfo | None:
        """This broker's config of ``topic`` (None: it has none), at most TOPIC_CACHE_SECONDS old."""
        now = time.monotonic()
        cached = self._topics.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        info = await self.fetch_topic(topic, self.config.broker_addr)
        if len(self._topics) > 10_000:
            self._topics.clear()  # topics come and go: keep the cache from growing without bound
        self._topics[topic] = (now + TOPIC_CACHE_SECONDS, info)
        return info

    async def fetch_topic(self, topic: str, addr: str, ctx: CallContext | None = None) -> TopicInfo | None:
        """GET_TOPIC_CONFIG of ``topic`` at the broker ``addr``; None when it has no such topic."""
        request = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
        response = await self.broker(addr, request, ctx)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        return topic_info(body_bytes(check(response).body))
