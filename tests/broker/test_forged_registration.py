"""Issue 22, defect 1: no unauthenticated name-server frame fences a master or moves a route. Real
rmq-namesrv and rmq-broker processes; the forger is a raw RemotingClient holding its connection
open across several of the real master's registrations (registerNameServerPeriod=1000).

``perf/forge_registration.py`` runs the same forgery for the issue's 40 s against a real cluster.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from rmq.client.admin_client import AdminClient
from rmq.net.codec import RemotingCommand
from rmq.perf.procs import wait_listening
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.route import MASTER_ID
from tests.helpers import harness, wait_until
from tests.helpers.broker import broker_settings
from tests.helpers.failover import BROKER_NAME, FailoverPair
from tests.helpers.processes import Cluster, start_namesrv
from tests.helpers.requests import route_request, send_request, update_topic_request

TOPIC = "ForgeryTopic"
AK, SK = "rmq-cluster", "cluster-secret-1234"
CREDENTIALS = {"clusterAccessKey": AK, "clusterSecretKey": SK}
NAMESRV_CREDENTIALS = ("--cluster-access-key", AK)
NAMESRV_SECRET = {"RMQ_CLUSTER_SECRET_KEY": SK}
# long enough for two registrations of the real master, one a second
HOLD_SECONDS = 2.5


def ask_namesrv(cluster: Cluster, request: RemotingCommand) -> RemotingCommand:
    return cluster.client.invoke_sync(cluster.namesrv_addr, request, 3.0)


def start_cluster(spawn, tmp_path: Path, namesrv_log: Path | None = None, **settings: str) -> Cluster:
    store = tmp_path / "store"
    store.mkdir()
    cluster = Cluster(spawn, store)
    cluster.settings.update(registerNameServerPeriod="1000", **settings)
    if namesrv_log is None:
        cluster.start()
    else:
        with open(namesrv_log, "wb") as stderr:
            cluster.start(*NAMESRV_CREDENTIALS, env=NAMESRV_SECRET, stderr=stderr)
    cluster.create_topic(TOPIC)
    wait_until(lambda: ask_namesrv(cluster, route_request(TOPIC)).code == ResponseCode.SUCCESS, 5, "topic routed")
    return cluster


def test_a_forged_registration_without_credentials_refuses_no_send_and_moves_no_route(spawn, tmp_path: Path):
    cluster = start_cluster(spawn, tmp_path)
    try:
        report = harness.hold_forged_registration(
            cluster.namesrv_addr, cluster.broker_addr, "broker-a", TOPIC, HOLD_SECONDS
        )
        assert report.send_refusals == [] and report.sends_ok > 0
        assert report.routes == [{MASTER_ID: cluster.broker_addr}]
        # the forger is told why, and not to fence anything
        assert report.forged == {ResponseCode.SYSTEM_ERROR: report.forged.get(ResponseCode.SYSTEM_ERROR)}
    finally:
        cluster.close()


def test_with_credentials_the_forgery_is_refused_and_logged_once(spawn, tmp_path: Path):
    log = tmp_path / "namesrv.log"
    cluster = start_cluster(spawn, tmp_path, log, **CREDENTIALS)  # the broker's signed registrations are taken
    try:
        report = harness.hold_forged_registration(
            cluster.namesrv_addr, cluster.broker_addr, "broker-a", TOPIC, HOLD_SECONDS
        )
        assert report.send_refusals == [] and report.sends_ok > 0
        assert report.routes == [{MASTER_ID: cluster.broker_addr}]
        assert set(report.forged) == {ResponseCode.NO_PERMISSION} and report.forged[ResponseCode.NO_PERMISSION] >= 5
        assert log.read_text(errors="replace").count("refused a write from 127.0.0.1") == 1
    finally:
        cluster.close()


@pytest.mark.parametrize("credentials", [False, True], ids=["no-credentials", "credentials"])
def test_a_master_never_fences_itself_on_an_answer_it_cannot_verify(spawn, client, tmp_path: Path, credentials):
    """The forgery comes first: the name server routes the made-up master (epoch 2147483647) and
    answers the real master's registrations 2000. Without a claim the real master can check with
    the cluster secret (it has none, or the answer carries none), it keeps taking sends."""
    _, namesrv = start_namesrv(spawn)
    forged = client.invoke_sync(namesrv, harness.forged_master_registration("broker-a"), 3.0)
    assert forged.code == ResponseCode.SUCCESS  # nobody holds the route yet: 4.x behaviour
    settings = broker_settings(
        tmp_path / "store", registerNameServerPeriod="1000", **(CREDENTIALS if credentials else {})
    )
    del settings["namesrvListenPort"]
    argv = ["-m", "rmq.cli.broker", "-n", namesrv, "--log-level", "WARNING"]
    for key, value in settings.items():
        argv += ["--set", f"{key}={value}"]
    log = tmp_path / "broker.log"
    with open(log, "wb") as stderr:
        proc = spawn(*argv, stderr=stderr)
    wait_listening(proc, int(settings["listenPort"]))
    addr = f"127.0.0.1:{settings['listenPort']}"
    wait_until(lambda: "not fencing" in log.read_text(errors="replace"), 10, "the unproven fencing answer logged")
    assert client.invoke_sync(addr, update_topic_request(TOPIC), 3.0).code == ResponseCode.SUCCESS
    answer = client.invoke_sync(addr, send_request(TOPIC, b"still a master"), 3.0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def test_a_topic_deleted_from_the_name_server_comes_back_at_the_next_registration(spawn, tmp_path: Path):
    cluster = start_cluster(spawn, tmp_path)
    try:
        delete = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": TOPIC})
        assert ask_namesrv(cluster, delete).code == ResponseCode.SUCCESS  # open without credentials, as in 4.x
        assert ask_namesrv(cluster, route_request(TOPIC)).code == ResponseCode.TOPIC_NOT_EXIST
        wait_until(
            lambda: ask_namesrv(cluster, route_request(TOPIC)).code == ResponseCode.SUCCESS,
            5,
            "the topic routed again after the broker's next registration",
        )
    finally:
        cluster.close()


def test_signed_fencing_and_unfencing_once_the_newer_master_is_gone(spawn, tmp_path: Path):
    """The slave promoted while the old master still runs: the old master's next registration is
    answered with the new master's signed claim, and it refuses sends (14); the new master killed,
    the old one is routed again and takes sends."""
    namesrv_args = (*NAMESRV_CREDENTIALS, "--cluster-secret-key", SK)
    pair = FailoverPair(spawn, tmp_path, namesrv_args=namesrv_args, registerNameServerPeriod="1000", **CREDENTIALS)
    try:
        pair.start("ASYNC_MASTER")
        a, b = pair.master, pair.slave
        assert pair.send(a, b"one") == ResponseCode.SUCCESS
        with AdminClient(pair.namesrv_addr) as admin:
            admin.promote(BROKER_NAME, 1)
            assert admin.broker_addrs(BROKER_NAME) == {MASTER_ID: pair.addr(b)}
        wait_until(lambda: pair.send(a, b"refused?") == ResponseCode.SERVICE_NOT_AVAILABLE, 10, f"{a} fenced")
        assert pair.send(b, b"two") == ResponseCode.SUCCESS
        pair.procs[b].send_signal(signal.SIGKILL)
        pair.procs[b].wait(10)
        wait_until(lambda: pair.send(a, b"three") == ResponseCode.SUCCESS, 10, f"{a} unfenced")
        with AdminClient(pair.namesrv_addr) as admin:
            assert admin.broker_addrs(BROKER_NAME) == {MASTER_ID: pair.addr(a)}
        assert "taking sends again" in pair.log_path(a).read_text(errors="replace")
    finally:
        pair.close()
