"""ProxyConfig: what the gRPC endpoint is started with (rmq.cli.broker builds it from the broker's
settings, ``rmq.settings.ProxySettings`` and a few of the broker's own values)."""

from __future__ import annotations

import dataclasses

from rmq.protocol.acl import SessionCredentials
from rmq.settings import ProxySettings


@dataclasses.dataclass
class ProxyConfig(ProxySettings):
    """The endpoint's settings (grpcServerPort ...) and what it needs to know of its broker."""

    #: the address the gRPC port binds to
    host: str = "0.0.0.0"
    #: the name servers routes are asked of ("host:port" each)
    namesrv_addrs: list[str] = dataclasses.field(default_factory=list)
    #: this broker's name and remoting address (as registered): its queues are served in process
    broker_name: str = ""
    broker_addr: str = ""
    #: the largest body a send may carry (the store's maxMessageSize), told to clients in Settings
    max_message_size: int = 4 * 1024 * 1024
    #: TLS: the broker's certificate chain and key (PEM files); both None: plain
    tls_cert_path: str | None = None
    tls_key_path: str | None = None
    #: the broker's delay levels (messageDelayLevel), ms: a consumer's retry schedule in its settings
    delay_levels_ms: list[int] = dataclasses.field(default_factory=list)
    #: aclEnable: calls must carry a valid 5.x signature, checked by the broker (docs/grpc.md#acl)
    acl_enable: bool = False
    #: the cluster account (clusterAccessKey): what the endpoint signs its requests to other brokers
    #: with, which their ACL must let read (GET_BROKER_RUNTIME_INFO, GET_TOPIC_CONFIG)
    cluster_credentials: SessionCredentials | None = None
