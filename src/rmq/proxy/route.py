"""QueryRoute: a topic's queues on every broker of its route, each at that broker's own gRPC endpoint
(RocketMQ 5.x's RouteActivity, in local mode).

The route is the name servers' (GET_ROUTEINFO_BY_TOPIC), so several broker sets behind one name
server all appear. Each broker is named at its remoting address's host and *its* gRPC port: this
broker's is known; another's is the ``grpcServerPort`` key of its GET_BROKER_RUNTIME_INFO answer
(asked once, cached GRPC_PORT_CACHE_SECONDS), and a broker without one (enableGrpc=false, or one
that cannot be asked, asked again after GRPC_PORT_RETRY_SECONDS) is left out: a 5.x client could
not reach it. RocketMQ's local mode names
every broker at the proxy's own grpcServerPort, which holds only when every broker uses the same.

Queues are listed per broker id as RouteActivity lists them (read-only, write-only, read-write, then
none, from the queue data's counts and perm). ``accept_message_types`` is the topic's
``message.type`` attribute (NORMAL when unset), read from this broker's topic config, or from the
route's first master when this broker does not serve the topic; a topic no broker has a config of
is MESSAGE_TYPE_UNSPECIFIED, as RouteActivity answers TopicMessageType.UNSPECIFIED.
"""

from __future__ import annotations

import ipaddress
import time
from typing import Any

import orjson

from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.grpc.v2.definition_pb2 import Address as GrpcAddress
from rmq.protocol.grpc.v2.definition_pb2 import (
    AddressScheme,
    Broker,
    Code,
    Endpoints,
    MessageQueue,
    MessageType,
    Permission,
    Resource,
)
from rmq.protocol.grpc.v2.service_pb2 import QueryRouteRequest, QueryRouteResponse
from rmq.protocol.message import topic_error
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.proxy import RUNTIME_GRPC_PORT
from rmq.protocol.route import MASTER_ID
from rmq.protocol.topic_attributes import TopicMessageType
from rmq.proxy.calls import BrokerCalls
from rmq.proxy.context import CallContext
from rmq.proxy.status import OK, ProxyError

# How long another broker's gRPC port is reused before it is asked again (a broker restarted with
# another grpcServerPort is found within this).
GRPC_PORT_CACHE_SECONDS = 30.0
# How long a broker that could not be asked (down, starting, too slow to answer) is left out of
# routes before it is asked again: a client that asks for its route meanwhile does not find it
# for the whole GRPC_PORT_CACHE_SECONDS (a broker routed again after a failover or a restart).
GRPC_PORT_RETRY_SECONDS = 1.0

_ACCEPTED: dict[TopicMessageType, list[MessageType]] = {
    TopicMessageType.NORMAL: [MessageType.NORMAL],
    TopicMessageType.FIFO: [MessageType.FIFO],
    TopicMessageType.DELAY: [MessageType.DELAY],
    TopicMessageType.TRANSACTION: [MessageType.TRANSACTION],
    TopicMessageType.MIXED: [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION],
    TopicMessageType.UNSPECIFIED: [MessageType.MESSAGE_TYPE_UNSPECIFIED],
}


def check_topic(resource: Resource) -> str:
    """The topic's name; ILLEGAL_TOPIC when it is no legal name (GrpcValidator.validateTopic)."""
    name = resource.name
    reason = "topic name is empty" if not name else topic_error(name)
    if reason is not None:
        raise ProxyError(Code.ILLEGAL_TOPIC, f"topic name {name!r} is illegal: {reason}")
    return name


def endpoints(host: str, port: int) -> Endpoints:
    try:
        scheme = AddressScheme.IPv6 if ipaddress.ip_address(host).version == 6 else AddressScheme.IPv4
    except ValueError:
        scheme = AddressScheme.DOMAIN_NAME
    return Endpoints(scheme=scheme, addresses=[GrpcAddress(host=host, port=port)])


def queues_of(
    queue_data: dict[str, Any], topic: Resource, broker: Broker, accepted: list[MessageType]
) -> list[MessageQueue]:
    """RouteActivity.genMessageQueueFromQueueData: read-only, write-only, read-write, then none."""
    perm = int(queue_data.get("perm", 0))
    read_nums, write_nums = int(queue_data.get("readQueueNums", 0)), int(queue_data.get("writeQueueNums", 0))
    r = w = rw = n = 0
    if perm & PERM_WRITE and perm & PERM_READ:
        rw = min(read_nums, write_nums)
        r, w = read_nums - rw, write_nums - rw
    elif perm & PERM_WRITE:
        w = write_nums
    elif perm & PERM_READ:
        r = read_nums
    else:
        n = max(1, read_nums, write_nums)
    kinds = [Permission.READ] * r + [Permission.WRITE] * w + [Permission.READ_WRITE] * rw + [Permission.NONE] * n
    return [
        MessageQueue(topic=topic, id=i, permission=kind, broker=broker, accept_message_types=accepted)
        for i, kind in enumerate(kinds)
    ]


class RouteService:
    def __init__(self, calls: BrokerCalls, own_grpc_port: int):
        self.calls = calls
        self.own_grpc_port = own_grpc_port
        self._grpc_ports: dict[str, tuple[float, int | None]] = {}

    async def topic_route(self, topic: str) -> dict[str, Any]:
        """The name servers' route JSON of ``topic``; TOPIC_NOT_FOUND when they have none."""
        response = await self.calls.namesrv(
            lambda: RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} not found: no broker serves it")
        if response.code != ResponseCode.SUCCESS:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, response.remark or f"route of {topic}: {response.code}")
        return orjson.loads(body_bytes(response.body))

    async def grpc_port(self, addr: str) -> int | None:
        """The gRPC port of the broker at ``addr`` (None: it serves none, or cannot say)."""
        if addr == self.calls.config.broker_addr:
            return self.own_grpc_port
        now = time.monotonic()
        cached = self._grpc_ports.get(addr)
        if cached is not None and cached[0] > now:
            return cached[1]
        port, keep = None, GRPC_PORT_RETRY_SECONDS
        try:
            response = await self.calls.remote(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
            if response.code == ResponseCode.SUCCESS:
                value = orjson.loads(body_bytes(response.body)).get("table", {}).get(RUNTIME_GRPC_PORT)
                port = int(value) if value and int(value) > 0 else None
                keep = GRPC_PORT_CACHE_SECONDS
        except (ProxyError, ValueError):
            port = None
        self._grpc_ports[addr] = (now + keep, port)
        return port

    async def message_type(self, ctx: CallContext, topic: str, route: dict[str, Any]) -> TopicMessageType:
        names = {q.get("brokerName") for q in route.get("queueDatas", [])}
        if self.calls.config.broker_name in names:
            # for the client, not from the cache: with aclEnable the broker checks its signature here
            info = await self.calls.fetch_topic(topic, self.calls.config.broker_addr, ctx)
        else:
            masters = [
                b["brokerAddrs"][str(MASTER_ID)]
                for b in route.get("brokerDatas", [])
                if str(MASTER_ID) in b.get("brokerAddrs", {})
            ]
            info = await self.calls.fetch_topic(topic, masters[0]) if masters else None
        return info.message_type if info is not None else TopicMessageType.UNSPECIFIED

    async def query_route(self, ctx: CallContext, request: QueryRouteRequest) -> QueryRouteResponse:
        topic = check_topic(request.topic)
        route = await self.topic_route(topic)
        accepted = _ACCEPTED[await self.message_type(ctx, topic, route)]
        brokers: dict[str, list[Broker]] = {}
        for broker_data in route.get("brokerDatas", []):
            name = broker_data["brokerName"]
            for broker_id, addr in sorted(broker_data.get("brokerAddrs", {}).items(), key=lambda kv: int(kv[0])):
                port = await self.grpc_port(addr)
                if port is None:
                    continue
                host = addr.rpartition(":")[0]
                broker = Broker(name=name, id=int(broker_id), endpoints=endpoints(host, port))
                brokers.setdefault(name, []).append(broker)
        queues: list[MessageQueue] = []
        for queue_data in route.get("queueDatas", []):
            for broker in brokers.get(queue_data["brokerName"], []):
                queues.extend(queues_of(queue_data, request.topic, broker, accepted))
        return QueryRouteResponse(status=OK, message_queues=queues)
