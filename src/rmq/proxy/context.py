"""One gRPC call as the endpoint sees it: the client's id and address from its metadata and peer,
and the client's LocalChannel (rmq.proxy.bridge) its broker requests go through."""

from __future__ import annotations

import dataclasses
from typing import Any

from rmq.protocol import proxy as metadata_keys
from rmq.protocol.acl import SignedCall
from rmq.protocol.grpc.v2.definition_pb2 import Code
from rmq.proxy.bridge import Bridge, LocalChannel
from rmq.proxy.status import ProxyError


def peer_address(peer: str) -> str:
    """grpc's peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000") as "host:port"."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host, _, port = rest.rpartition(":")
        return f"{host.strip('[]')}:{port}"
    return peer


@dataclasses.dataclass
class CallContext:
    metadata: dict[str, str]
    remote_address: str
    bridge: Bridge
    #: the client's signed call (aclEnable only: otherwise the authorization header is ignored)
    signed: SignedCall | None = None

    @classmethod
    def of(cls, context: Any, bridge: Bridge, acl_enable: bool = False) -> CallContext:
        """From a grpc.aio ServicerContext. With ``acl_enable``, a malformed authorization header
        is UNAUTHORIZED; a missing one leaves the call unsigned (the broker's check refuses it)."""
        metadata = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        ctx = cls(metadata, peer_address(context.peer() or ""), bridge)
        if acl_enable and metadata.get(metadata_keys.AUTHORIZATION):
            date_time = metadata.get(metadata_keys.DATE_TIME)
            if not date_time:
                raise ProxyError(Code.UNAUTHORIZED, f"the call is signed but carries no {metadata_keys.DATE_TIME}")
            try:
                ctx.signed = metadata_keys.signed_call(metadata[metadata_keys.AUTHORIZATION], date_time)
            except ValueError as e:
                raise ProxyError(Code.UNAUTHORIZED, str(e)) from None
        return ctx

    def check_client_id(self) -> None:
        """CLIENT_ID_REQUIRED unless the call names its client: every unary call must
        (GrpcMessagingApplication.validateContext)."""
        self.client_id  # noqa: B018 - the property raises

    @property
    def client_id(self) -> str:
        """The client's id (``x-mq-client-id``); CLIENT_ID_REQUIRED without one."""
        client_id = self.metadata.get(metadata_keys.CLIENT_ID)
        if not client_id:
            raise ProxyError(Code.CLIENT_ID_REQUIRED, f"the call carries no {metadata_keys.CLIENT_ID} metadata")
        return client_id

    @property
    def language(self) -> str:
        return self.metadata.get(metadata_keys.LANGUAGE, "")

    @property
    def channel(self) -> LocalChannel:
        """The client's channel to the broker (made on its first call)."""
        return self.bridge.channel(self.client_id, self.remote_address)
