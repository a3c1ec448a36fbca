"""A controller inside rmq-namesrv (enableControllerInNamesrv=true, RocketMQ 5.x's): it answers on the
name server's port beside the name server, and with the cluster account its writes must be signed."""

from __future__ import annotations

from pathlib import Path

from rmq.net import RemotingClient, RemotingCommand
from rmq.perf.procs import LOOPBACK, free_port, wait_until
from rmq.protocol.acl import signature_matches
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.controller import ControllerMetadata
from tests.helpers.controllers import TIMEOUT, Broker, expect
from tests.helpers.processes import start_namesrv

ACCESS_KEY, SECRET_KEY = "rmq-cluster", "cluster-secret-1234"


def test_a_name_server_runs_a_controller_that_takes_only_signed_writes(spawn, tmp_path: Path):
    peers = f"n0-{LOOPBACK}:{free_port()}"
    _, addr = start_namesrv(
        spawn,
        "--set", "enableControllerInNamesrv=true",
        "--set", f"controllerDLegerPeers={peers}",
        "--set", f"controllerStorePath={tmp_path / 'controller'}",
        "--cluster-access-key", ACCESS_KEY,
        "--cluster-secret-key", SECRET_KEY,
    )  # fmt: skip
    broker = Broker()
    with RemotingClient() as unsigned, RemotingClient(credentials=(ACCESS_KEY, SECRET_KEY)) as signed:
        try:

            def leads() -> bool:
                answer = unsigned.invoke_sync(
                    addr, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), TIMEOUT
                )
                return ControllerMetadata.from_fields(answer.ext_fields).leader_address == addr

            wait_until(leads, 10.0, "the name server's controller leading, at the name server's address")

            refused = unsigned.invoke_sync(addr, broker.heartbeat(), TIMEOUT)
            assert refused.code == ResponseCode.NO_PERMISSION and "controller" in refused.remark
            for request in (broker.apply_id(1), broker.register(), broker.heartbeat(), broker.elect()):
                expect(signed.invoke_sync(addr, request, TIMEOUT))
            # the notice of its election is signed by the cluster account
            notice = wait_until(lambda: broker.notice_requests, 3.0, "a notice of the election")[0]
            assert signature_matches(notice.ext_fields, notice.body, SECRET_KEY)
            # reads stay open, and the name server still answers as one
            expect(unsigned.invoke_sync(addr, broker.replica_info(), TIMEOUT))
            cluster = unsigned.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), TIMEOUT)
            expect(cluster)
        finally:
            broker.close()
