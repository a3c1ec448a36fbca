"""The gRPC endpoint for RocketMQ 5.x clients (RocketMQ's proxy in local mode): a role of its own,
started beside the broker by ``rmq-broker`` (rmq.cli.broker), talking to it through one seam.

    config       ProxyConfig: grpcServerPort, enableGrpc, ... and what it knows of its broker
    server       GrpcProxy: the grpc.aio server on the ``rmq-grpc`` thread
    bridge       the seam: remoting requests served by the broker's processors in process
    service      MessagingService: each RPC to its activity, failures to statuses
    status       remoting answers and the endpoint's refusals as 5.x ``Code``s
    calls        where requests go: this broker (bridge), name servers and other brokers (remoting)
    route        QueryRoute
    context      one call: client id, address, channel

docs/grpc.md is the contract: the RPCs served, the status mapping, settings, the seam and ACL.
"""

from rmq.proxy.config import ProxyConfig
from rmq.proxy.server import GrpcProxy

__all__ = ["GrpcProxy", "ProxyConfig"]
