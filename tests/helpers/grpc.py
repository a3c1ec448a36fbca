"""A 5.x client's side of the gRPC endpoint for the tests: a stub on a real channel, the metadata
the 5.x clients send (signed when given credentials), and the generated message classes."""

from __future__ import annotations

import gzip
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from rmq.protocol import proxy as keys
from rmq.protocol.grpc.v2 import definition_pb2 as definition
from rmq.protocol.grpc.v2 import service_pb2 as service
from rmq.protocol.grpc.v2.service_pb2_grpc import MessagingServiceStub

__all__ = [
    "Telemetry",
    "consumer_settings",
    "definition",
    "messaging_stub",
    "metadata",
    "message",
    "producer_settings",
    "send",
    "resource",
    "service",
]


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


class Telemetry:
    """An open Telemetry stream, as a client keeps one: ``send`` commands, ``receive`` the server's."""

    def __init__(self, stub: MessagingServiceStub, client_id: str = "test-client", **credentials: str):
        self._outgoing: queue.Queue[service.TelemetryCommand | None] = queue.Queue()
        self._responses = stub.Telemetry(iter(self._outgoing.get, None), metadata=metadata(client_id, **credentials))

    def send(self, command: service.TelemetryCommand) -> None:
        self._outgoing.put(command)

    def receive(self, timeout: float = 5.0) -> service.TelemetryCommand:
        """The server's next command; AssertionError when none comes within ``timeout``."""
        result: list[service.TelemetryCommand | BaseException] = []

        def read() -> None:
            try:
                result.append(next(self._responses))
            except BaseException as e:  # the stream's end or failure: the caller's to see
                result.append(e)

        reader = threading.Thread(target=read, name="test-telemetry")
        reader.start()
        reader.join(timeout)
        assert result, f"no telemetry command from the server within {timeout} s"
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    def close(self) -> None:
        self._outgoing.put(None)
        self._responses.cancel()

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def producer_settings(*topics: str) -> service.TelemetryCommand:
    return service.TelemetryCommand(
        settings=definition.Settings(
            client_type=definition.ClientType.PRODUCER,
            publishing=definition.Publishing(topics=[resource(t) for t in topics]),
        )
    )


def consumer_settings(group: str, topic: str, expression: str = "*", sql: bool = False) -> service.TelemetryCommand:
    filter_type = definition.FilterType.SQL if sql else definition.FilterType.TAG
    entry = definition.SubscriptionEntry(
        topic=resource(topic), expression=definition.FilterExpression(type=filter_type, expression=expression)
    )
    return service.TelemetryCommand(
        settings=definition.Settings(
            client_type=definition.ClientType.SIMPLE_CONSUMER,
            subscription=definition.Subscription(group=resource(group), subscriptions=[entry]),
        )
    )


def message(
    topic: str,
    body: bytes,
    message_id: str,
    *,
    tag: str = "",
    keys: tuple[str, ...] = (),
    group: str = "",
    kind: int = definition.MessageType.NORMAL,
    deliver_at_ms: int | None = None,
    gzip_body: bool = False,
    **user_properties: str,
) -> definition.Message:
    """A 5.x message as the clients build it (a message group makes it FIFO, a delivery time DELAY)."""
    system = definition.SystemProperties(
        message_id=message_id, tag=tag, keys=list(keys), message_group=group, message_type=kind
    )
    if deliver_at_ms is not None:
        system.delivery_timestamp.FromMilliseconds(deliver_at_ms)
    if gzip_body:
        system.body_encoding = definition.Encoding.GZIP
        body = gzip.compress(body)
    return definition.Message(
        topic=resource(topic), body=body, system_properties=system, user_properties=user_properties
    )


def send(stub: MessagingServiceStub, *messages: definition.Message, client_id: str = "test-client", **credentials: str):
    request = service.SendMessageRequest(messages=list(messages))
    return stub.SendMessage(request, metadata=metadata(client_id, **credentials), timeout=5)
