"""A name server with the cluster's credentials (rmq-namesrv --cluster-access-key): writes signed by
the cluster account are taken, unsigned or badly signed ones refused NO_PERMISSION and logged once
per source, reads stay open; permissive mode takes unsigned writes and logs them."""

from __future__ import annotations

import json
from pathlib import Path

from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.protocol.acl import SessionCredentials
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.replica import REGISTER_EPOCH
from tests.helpers import wait_until
from tests.helpers.processes import start_namesrv
from tests.helpers.requests import register_broker_request, route_request

CLUSTER = SessionCredentials("rmq-cluster", "cluster-secret-1234")


def namesrv_with_credentials(spawn, log: Path, mode: str = "enforcing") -> str:
    """An rmq-namesrv holding the cluster account (its secret from the environment, out of ps)."""
    with open(log, "wb") as stderr:
        _, addr = start_namesrv(
            spawn,
            "--cluster-access-key",
            CLUSTER.access_key,
            "--cluster-auth-mode",
            mode,
            env={"RMQ_CLUSTER_SECRET_KEY": CLUSTER.secret_key},
            stderr=stderr,
        )
    return addr


def signed(request: RemotingCommand, credentials: SessionCredentials = CLUSTER) -> RemotingCommand:
    credentials.sign(request.ext_fields, request.body)
    return request


def unregister_request(broker_addr: str = "127.0.0.1:10911") -> RemotingCommand:
    ext = {"brokerName": "broker-a", "brokerAddr": broker_addr, "clusterName": "DefaultCluster", "brokerId": "0"}
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext)


def delete_topic_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})


def routed_masters(client: RemotingClient, ns: str, topic: str) -> list[dict]:
    answer = client.invoke_sync(ns, route_request(topic), 3.0)
    if answer.code != ResponseCode.SUCCESS:
        return []
    return [b["brokerAddrs"] for b in json.loads(answer.body)["brokerDatas"]]


def test_unsigned_writes_are_refused_and_logged_once_signed_ones_taken(spawn, client, tmp_path: Path):
    log = tmp_path / "namesrv.log"
    ns = namesrv_with_credentials(spawn, log)
    master = signed(register_broker_request("127.0.0.1:10911", {"T": 4}))
    master.ext_fields[REGISTER_EPOCH] = "1"
    signed(master)  # again: the epoch is signed too
    assert client.invoke_sync(ns, master, 3.0).code == ResponseCode.SUCCESS
    # a forger without the secret: an unsigned registration, held and repeated
    for _ in range(5):
        forged = register_broker_request("10.6.6.6:10911", {"T": 4})
        forged.ext_fields[REGISTER_EPOCH] = "2147483647"
        answer = client.invoke_sync(ns, forged, 3.0)
        assert answer.code == ResponseCode.NO_PERMISSION
        assert "must be signed by the cluster account" in answer.remark
    # another account, the right account with a wrong secret
    other = signed(register_broker_request("10.6.6.6:10911", {"T": 4}), SessionCredentials("other", "x" * 16))
    answer = client.invoke_sync(ns, other, 3.0)
    assert answer.code == ResponseCode.NO_PERMISSION and "'other'" in answer.remark
    wrong = signed(register_broker_request("10.6.6.6:10911", {"T": 4}), SessionCredentials(CLUSTER.access_key, "bad"))
    answer = client.invoke_sync(ns, wrong, 3.0)
    assert answer.code == ResponseCode.NO_PERMISSION and "check signature failed" in answer.remark
    # unsigned unregistration and topic deletion: refused, the route stays
    for request in (unregister_request(), delete_topic_request("T")):
        answer = client.invoke_sync(ns, request, 3.0)
        assert answer.code == ResponseCode.NO_PERMISSION, answer.remark
    assert routed_masters(client, ns, "T") == [{"0": "127.0.0.1:10911"}]
    # signed, they are taken
    assert client.invoke_sync(ns, signed(delete_topic_request("T")), 3.0).code == ResponseCode.SUCCESS
    assert routed_masters(client, ns, "T") == []
    assert client.invoke_sync(ns, signed(unregister_request()), 3.0).code == ResponseCode.SUCCESS
    logged = wait_until(lambda: log.read_text(errors="replace"), 5, "the refusals logged")
    # nine refusals from one host within the log interval: one line, the first
    assert logged.count("refused a write from 127.0.0.1") == 1, logged
    assert "REGISTER_BROKER (103) to this name server must be signed" in logged


def test_permissive_mode_takes_unsigned_writes_and_logs_them(spawn, client, tmp_path: Path):
    log = tmp_path / "namesrv.log"
    ns = namesrv_with_credentials(spawn, log, mode="permissive")
    answer = client.invoke_sync(ns, register_broker_request("127.0.0.1:10911", {"T": 4}), 3.0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert routed_masters(client, ns, "T") == [{"0": "127.0.0.1:10911"}]
    wait_until(lambda: "took an unsigned REGISTER_BROKER" in log.read_text(errors="replace"), 5, "logged")
    # a wrong signature is refused in permissive mode too
    wrong = signed(delete_topic_request("T"), SessionCredentials(CLUSTER.access_key, "bad"))
    assert client.invoke_sync(ns, wrong, 3.0).code == ResponseCode.NO_PERMISSION
    assert routed_masters(client, ns, "T") == [{"0": "127.0.0.1:10911"}]
