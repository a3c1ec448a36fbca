"""The endpoint's life beside its broker: off when asked, a port it cannot take refused at start,
TLS with the broker's certificate, and its streams ended when the broker stops."""

from __future__ import annotations

import logging
import socket

import grpc
import pytest
from grpc._cython import cygrpc

from rmq.errors import RmqError
from rmq.perf.procs import free_port, port_in_use
from rmq.protocol.grpc.v2.definition_pb2 import Code
from rmq.protocol.grpc.v2.service_pb2_grpc import MessagingServiceStub
from rmq.proxy.server import GRPC_LOGGER
from tests.helpers.broker import new_startup
from tests.helpers.grpc import Telemetry, messaging_stub, metadata, producer_settings, resource, service
from tests.helpers.tls import make_certificate


def test_enable_grpc_false_serves_no_grpc_port(store_dir):
    port = free_port()
    startup = new_startup(store_dir, enableGrpc="false", grpcServerPort=str(port)).start()
    try:
        assert startup.proxy is None and not port_in_use(port)
    finally:
        startup.shutdown()


def test_a_grpc_port_in_use_stops_the_start_with_the_reason_and_leaves_nothing_running(store_dir):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        startup = new_startup(store_dir, enableGrpc="true", grpcServerPort=str(port))
        with pytest.raises(RmqError, match=f"cannot listen on 0.0.0.0:{port}"):
            startup.start()
    # the broker it had started is stopped again (the leak check sees to its threads)
    assert startup.controller is not None and not port_in_use(startup.controller.config.listen_port)


def test_shutdown_ends_the_open_streams(start_grpc_broker):
    startup = start_grpc_broker()
    with messaging_stub(startup.proxy.port) as stub, Telemetry(stub, "still-open") as telemetry:
        telemetry.send(producer_settings("TBW102"))
        assert telemetry.receive().settings.client_type
        startup.shutdown()
        with pytest.raises((grpc.RpcError, StopIteration)):
            telemetry.receive()


def test_with_tls_the_endpoint_serves_tls_with_the_brokers_certificate(start_grpc_broker, tmp_path):
    certificate = make_certificate(tmp_path / "tls")
    startup = start_grpc_broker(
        tlsEnable="true", tlsServerCertPath=str(certificate.cert), tlsServerKeyPath=str(certificate.key)
    )
    credentials = grpc.ssl_channel_credentials(root_certificates=certificate.cert.read_bytes())
    with grpc.secure_channel(f"127.0.0.1:{startup.proxy.port}", credentials) as channel:
        route = MessagingServiceStub(channel).QueryRoute(
            service.QueryRouteRequest(topic=resource("TBW102")), metadata=metadata(), timeout=5
        )
    assert route.status.code == Code.OK
    with messaging_stub(startup.proxy.port) as plain:  # TLS only: a plain client gets nowhere
        with pytest.raises(grpc.RpcError):
            plain.QueryRoute(service.QueryRouteRequest(topic=resource("TBW102")), metadata=metadata(), timeout=2)


def test_an_answer_whose_call_ended_is_a_debug_line_not_grpcios_error_a_misused_call_stays_loud(grpc_broker, caplog):
    """grpcio logs both at ERROR with a traceback, under its own logger (rmq.proxy.server.GRPC_LOGGER)."""
    caplog.set_level(logging.DEBUG)
    for text in ('Failed "execute_batch": (SendStatusFromServerOperation,)', "Failed grpc_call_start_batch: 8"):
        try:
            raise cygrpc.ExecuteBatchError(text)
        except cygrpc.ExecuteBatchError:
            GRPC_LOGGER.exception("ExecuteBatchError raised in core by servicer method [/x/ReceiveMessage]")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [str(r.exc_info[1]) for r in errors] == ["Failed grpc_call_start_batch: 8"]
    ended = [r for r in caplog.records if r.name == "rmq.proxy" and "the call ended" in r.getMessage()]
    assert len(ended) == 1 and ended[0].levelno == logging.DEBUG
