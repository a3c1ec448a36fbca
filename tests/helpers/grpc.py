"""A 5.x client's side of the gRPC endpoint for the tests: a stub on a real channel, the metadata
the 5.x clients send (signed when given credentials), and the generated message classes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from rmq.protocol import proxy as keys
from rmq.protocol.grpc.v2 import definition_pb2 as definition
from rmq.protocol.grpc.v2 import service_pb2 as service
from rmq.protocol.grpc.v2.service_pb2_grpc import MessagingServiceStub

__all__ = ["definition", "metadata", "messaging_stub", "resource", "service"]


def resource(name: str) -> definition.Resource:
    return definition.Resource(name=name)


def metadata(client_id: str = "test-client", access_key: str = "", secret_key: str = "") -> list[tuple[str, str]]:
    """What the Python client sends with every call: an authorization header always (empty access
    key without credentials), signed over x-mq-date-time."""
    date_time = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return [
        (keys.LANGUAGE, "PYTHON"),
        (keys.PROTOCOL_VERSION, "GRPC_V2"),
        (keys.CLIENT_VERSION, "5.1.2"),
        (keys.DATE_TIME, date_time),
        (keys.REQUEST_ID, "req"),
        (keys.CLIENT_ID, client_id),
        (keys.NAMESPACE, ""),
        (keys.AUTHORIZATION, keys.authorization(access_key, secret_key, date_time)),
    ]


@contextmanager
def messaging_stub(port: int, host: str = "127.0.0.1") -> Iterator[MessagingServiceStub]:
    """A MessagingService stub on a fresh channel to ``host:port``, closed afterwards."""
    channel = grpc.insecure_channel(f"{host}:{port}")
    try:
        yield MessagingServiceStub(channel)
    finally:
        channel.close()
