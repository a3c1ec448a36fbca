"""The endpoint's life beside its broker: off when asked, a port it cannot take refused at start,
and its streams ended when the broker stops."""

from __future__ import annotations

import socket

import grpc
import pytest

from rmq.errors import RmqError
from rmq.perf.procs import free_port, port_in_use
from tests.helpers.broker import new_startup
from tests.helpers.grpc import Telemetry, messaging_stub, producer_settings


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
