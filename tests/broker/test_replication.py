"""A master and a slave broker as real processes behind one name server: the slave finds its master
through the name server, copies every message sent to the master, and refuses sends itself;
SYNC_MASTER sends wait for it. With cluster credentials only a slave that proves the secret gets a
byte or counts; TLS and haListenAddress on the HA port. In process: a send the compiled lane serves
wakes an idle replication stream."""

from __future__ import annotations

import os
import resource
import signal
import socket
import time
from pathlib import Path

import pytest

from rmq.net import RemotingClient, RemotingCommand, _codec, codec
from rmq.perf.cluster import ProcessSampler
from rmq.perf.procs import Processes
from rmq.protocol import ha as wire
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.replica import HAStatus
from rmq.store import ha
from tests.helpers import free_port, wait_until
from tests.helpers.broker import broker_settings, create_topic, put
from tests.helpers.frames import RawConnection, raw_frame, refused
from tests.helpers.ha_peer import FakeSlave
from tests.helpers.pop import Popper
from tests.helpers.processes import CLUSTER_BROKER_SETTINGS, pause_process, start_broker_process, start_namesrv
from tests.helpers.requests import call, route_request, send_request
from tests.helpers.tls import make_certificate


@pytest.fixture
def processes():
    procs = Processes()
    yield procs
    for proc in procs.procs:  # a stopped slave must be able to hear its SIGTERM
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
    procs.stop_all()


@pytest.fixture
def client():
    c = RemotingClient()
    c.start()
    yield c
    c.shutdown()


def start_pair(
    processes, tmp_path: Path, role: str, start_slave: bool = True, slave_more: dict | None = None, **more: str
):
    """A name server, a master and (``start_slave``) its slave; ``more`` settings for both,
    ``slave_more`` for the slave alone."""
    _, namesrv = start_namesrv(processes.spawn)
    processes.namesrv = namesrv
    common = {**CLUSTER_BROKER_SETTINGS, "autoCreateTopicEnable": "true", "slaveTimeout": "1000", **more}
    master_settings = broker_settings(tmp_path / "master", **common, brokerRole=role)
    processes.master_settings = master_settings
    slave_settings = broker_settings(
        tmp_path / "slave",
        **{**common, **(slave_more or {})},
        brokerRole="SLAVE",
        brokerId="1",
        haSendHeartbeatInterval="500",
    )
    for settings in (master_settings, slave_settings):
        del settings["namesrvListenPort"]
    processes.master_proc, master = start_broker_process(
        processes.spawn, master_settings, namesrv, ("--log-level", "WARNING")
    )

    def launch_slave():
        return start_broker_process(processes.spawn, slave_settings, namesrv, ("--log-level", "WARNING"))

    if not start_slave:
        return master, launch_slave
    slave_proc, slave = launch_slave()
    return master, slave, slave_proc


def commit_log_bytes(store: Path, names: list[str] | None = None) -> bytes:
    files = sorted((store / "commitlog").iterdir())
    return b"".join(p.read_bytes() for p in files if names is None or p.name in names)


def wait_replicated(tmp_path: Path) -> None:
    """Until the slave's CommitLog files hold what the master's files of the same names hold."""

    def same() -> bool:
        names = [p.name for p in (tmp_path / "slave" / "commitlog").iterdir()]
        master = commit_log_bytes(tmp_path / "master", names)
        return bool(names) and master.rstrip(b"\0") == commit_log_bytes(tmp_path / "slave").rstrip(b"\0")

    wait_until(same, 20, "the slave's CommitLog is the master's")


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER"])
def test_the_slave_copies_every_message_and_refuses_sends(processes, client, tmp_path, role):
    master, slave, _ = start_pair(processes, tmp_path, role)
    # SYNC_MASTER: once the slave is connected (it finds the master through the name server)
    wait_until(
        lambda: call(client, master, send_request("Warmup", b"w")).code == ResponseCode.SUCCESS,
        20,
        "a send acked by the slave",
        interval=0.2,
    )
    for i in range(200):
        answer = call(client, master, send_request("Replicated", bytes([i]) * 500, queue_id=i % 4))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    wait_replicated(tmp_path)
    refused = call(client, slave, send_request("Replicated", b"to the slave"))
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in refused.remark


def test_sync_master_with_a_stalled_slave_times_out(processes, client, tmp_path):
    master, _, slave_proc = start_pair(processes, tmp_path, "SYNC_MASTER")
    wait_until(
        lambda: call(client, master, send_request("Warmup", b"w")).code == ResponseCode.SUCCESS,
        20,
        "a send acked by the slave",
        interval=0.2,
    )
    pause_process(slave_proc.pid)
    try:
        # to a topic the broker knows by now: the compiled send lane's deferred answer
        answer = call(client, master, send_request("Warmup", b"x"))
        assert answer.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, answer.remark
    finally:
        os.kill(slave_proc.pid, signal.SIGCONT)
    wait_replicated(tmp_path)


def test_sync_master_without_a_slave_answers_slave_not_available(processes, client, tmp_path):
    _, namesrv = start_namesrv(processes.spawn)
    settings = broker_settings(tmp_path / "master", **CLUSTER_BROKER_SETTINGS, brokerRole="SYNC_MASTER")
    del settings["namesrvListenPort"]
    _, master = start_broker_process(processes.spawn, settings, namesrv, ("--log-level", "WARNING"))
    for _ in range(2):  # the processor's answer, then (a known topic) the compiled send lane's
        answer = call(client, master, send_request("Alone", b"x"))
        assert answer.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert answer.ext_fields.get("msgId")  # stored all the same


def test_a_slave_started_late_copies_the_last_file_and_resumes_after_a_restart(processes, client, tmp_path):
    master, start_slave = start_pair(
        processes, tmp_path, "ASYNC_MASTER", start_slave=False, mappedFileSizeCommitLog=str(256 * 1024)
    )
    for i in range(1000):  # more than 3 files
        assert call(client, master, send_request("Late", bytes([i % 251]) * 700, queue_id=i % 4)).code == 0
    master_files = sorted(p.name for p in (tmp_path / "master" / "commitlog").iterdir())
    assert len(master_files) >= 3
    slave_proc, _ = start_slave()
    wait_replicated(tmp_path)
    assert sorted(p.name for p in (tmp_path / "slave" / "commitlog").iterdir()) == master_files[-1:]
    # restarted mid-stream: it resumes from its own end (its first file stays the first)
    slave_proc.send_signal(signal.SIGTERM)
    slave_proc.wait(10)
    for i in range(600):  # the master rolls over meanwhile: a new slave would start past the file it has
        assert call(client, master, send_request("Late", bytes([i % 251]) * 700, queue_id=i % 4)).code == 0
    start_slave()
    wait_replicated(tmp_path)
    slave_files = sorted(p.name for p in (tmp_path / "slave" / "commitlog").iterdir())
    assert slave_files[0] == master_files[-1] and len(slave_files) > 1


def test_bad_input_on_the_ha_port_is_refused_and_the_master_serves_on(processes, client, tmp_path):
    """Garbage, an offset beyond the master's end, one that goes backwards, and a second master of
    the same broker name: each refused and logged, while clients and the real slave are served."""
    master, _, _ = start_pair(processes, tmp_path, "ASYNC_MASTER")
    for i in range(50):
        assert call(client, master, send_request("Guarded", bytes([i]) * 300, queue_id=i % 4)).code == 0
    wait_replicated(tmp_path)
    ha_port = int(processes.master_settings["haListenPort"])
    assert refused(ha_port, b"GET / HTTP/1.1\r\n\r\n\xff\xff\xff\xff\xff")  # a negative offset
    assert refused(ha_port, wire.encode_report(1 << 40))  # beyond the master's end
    assert refused(ha_port, wire.encode_report(0) + wire.encode_report(1 << 40))
    assert refused(ha_port, wire.encode_report(4096) + wire.encode_report(0))  # backwards

    # a second master of broker-a (the default name of both), with a store of its own, asks the same
    # name server to route it
    impostor_settings = broker_settings(tmp_path / "impostor", **CLUSTER_BROKER_SETTINGS, brokerName="broker-a")
    del impostor_settings["namesrvListenPort"]
    impostor_log = tmp_path / "impostor.err"
    argv = ["-m", "rmq.cli.broker", "-n", processes.namesrv, "--log-level", "INFO"]
    for key, value in impostor_settings.items():
        argv += ["--set", f"{key}={value}"]
    with open(impostor_log, "wb") as err:
        processes.spawn(*argv, stderr=err)
    wait_until(lambda: "refused" in impostor_log.read_text(), 20, "the name server refusing the second master")
    assert "a second master of one broker name is refused" in impostor_log.read_text()

    for i in range(50):
        assert call(client, master, send_request("Guarded", bytes([i]) * 300, queue_id=i % 4)).code == 0
    wait_replicated(tmp_path)
    route = call(client, processes.namesrv, route_request("Guarded"))
    assert route.code == ResponseCode.SUCCESS
    assert master.encode() in route.body and impostor_settings["listenPort"].encode() not in route.body
    log = (tmp_path / "master" / "logs" / "broker.log").read_text()
    assert "beyond this master's CommitLog" in log and "went backwards" in log


def test_a_master_out_of_descriptors_pauses_its_ha_port_and_takes_the_slave_after(processes, client, tmp_path):
    """accept() on the HA port failing (EMFILE: the master's open-file limit lowered to what it holds)
    is logged and retried after a pause, not in a loop that burns a CPU while the listener stays
    readable; clients are served meanwhile, and with descriptors back the waiting slave is taken."""
    master, launch_slave = start_pair(processes, tmp_path, "ASYNC_MASTER", start_slave=False)
    assert call(client, master, send_request("Fds", b"before", queue_id=0)).code == 0
    pid = processes.master_proc.pid
    ha_port = int(processes.master_settings["haListenPort"])
    limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    # below every descriptor it holds: no new one until the limit is back (a limit at the count it
    # holds would let one through whenever any of its descriptors closed)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, limits[1]))
    waiting = socket.create_connection(("127.0.0.1", ha_port), timeout=5)  # in the backlog, not accepted
    try:
        sampler = ProcessSampler(pid)
        time.sleep(0.5)  # the failed accept and its retries begin
        before = sampler.sample()
        time.sleep(1.0)
        after = sampler.sample()
        spent = (after.cpu_s - before.cpu_s) / (after.at - before.at)
        assert spent < 0.5, f"the master used {spent:.2f} CPU seconds a second while it could not accept"
        # the client connection was open before: served on
        assert call(client, master, send_request("Fds", b"during", queue_id=0)).code == 0
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
    log = tmp_path / "master" / "logs" / "broker.log"
    assert f"accept on HA port {ha_port} failed" in log.read_text()
    waiting.sendall(wire.encode_report(0))  # accepted once descriptors are back: frames come
    waiting.settimeout(10)
    assert len(waiting.recv(wire.FRAME_HEADER_SIZE)) > 0
    waiting.close()
    launch_slave()
    wait_replicated(tmp_path)


# -- cluster authentication, TLS and haListenAddress on the HA port ----------------------------------

CLUSTER_KEYS = {"clusterAccessKey": "rmq-cluster", "clusterSecretKey": "cluster-secret"}


def wait_acked_by_slave(client, master: str) -> None:
    """Until a SYNC_MASTER send succeeds: the slave found the master and acks."""
    wait_until(
        lambda: call(client, master, send_request("Warmup", b"w")).code == ResponseCode.SUCCESS,
        20,
        "a send acked by the slave",
        interval=0.2,
    )


def master_log(tmp_path: Path) -> str:
    return (tmp_path / "master" / "logs" / "broker.log").read_text()


def test_with_cluster_credentials_a_peer_that_does_not_authenticate_gets_no_byte_nor_counts(
    processes, client, tmp_path
):
    """A raw socket on the HA port that reports and acks like a slave but never authenticates:
    closed before any CommitLog byte, and a SYNC_MASTER send is answered as without a slave."""
    master, _ = start_pair(processes, tmp_path, "SYNC_MASTER", start_slave=False, **CLUSTER_KEYS)
    assert call(client, master, send_request("Guarded", b"before")).code == ResponseCode.SLAVE_NOT_AVAILABLE
    with FakeSlave(int(processes.master_settings["haListenPort"])) as fake:
        assert fake.closed.wait(5), "the master kept serving a peer that did not authenticate"
        assert fake.data_bytes == 0
        answer = call(client, master, send_request("Guarded", b"with the fake around"))
        assert answer.code == ResponseCode.SLAVE_NOT_AVAILABLE, answer.remark
    assert "it did not authenticate" in master_log(tmp_path)


def test_a_slave_with_the_cluster_secret_replicates_one_with_another_secret_is_refused(processes, client, tmp_path):
    master, _, _ = start_pair(processes, tmp_path, "SYNC_MASTER", **CLUSTER_KEYS)
    wait_acked_by_slave(client, master)
    for i in range(50):
        answer = call(client, master, send_request("Trusted", bytes([i]) * 300, queue_id=i % 4))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    wait_replicated(tmp_path)

    impostor = broker_settings(
        tmp_path / "impostor",
        **{**CLUSTER_BROKER_SETTINGS, **CLUSTER_KEYS, "clusterSecretKey": "guessed"},
        brokerRole="SLAVE",
        brokerId="2",
    )
    del impostor["namesrvListenPort"]
    start_broker_process(processes.spawn, impostor, processes.namesrv, ("--log-level", "WARNING"))
    refused_line = "authentication failed: a wrong proof of the cluster secret (access key 'rmq-cluster')"
    wait_until(lambda: refused_line in master_log(tmp_path), 20, "the master refusing the impostor")
    impostor_log = (tmp_path / "impostor" / "logs" / "broker.log").read_text()
    assert "its proof of the cluster secret is wrong" in impostor_log
    assert not (tmp_path / "impostor" / "commitlog").exists() or not any(
        p.read_bytes().strip(b"\0") for p in (tmp_path / "impostor" / "commitlog").iterdir()
    )
    assert call(client, master, send_request("Trusted", b"after")).code == ResponseCode.SUCCESS


def test_an_over_acking_slave_is_disconnected_and_its_ack_not_counted(processes, client, tmp_path):
    master, _ = start_pair(processes, tmp_path, "SYNC_MASTER", start_slave=False)
    with FakeSlave(int(processes.master_settings["haListenPort"]), over_ack=100, over_ack_from=1 << 62) as fake:
        wait_acked_by_slave(client, master)  # a 4.x master takes its honest acks
        fake.over_ack_from = fake.acked
        answer = call(client, master, send_request("OverAcked", b"x"))
        assert answer.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, answer.remark
        assert fake.closed.wait(5)
    assert "beyond this master's CommitLog" in master_log(tmp_path)


def ha_status(client, master: str) -> HAStatus:
    answer = call(client, master, RemotingCommand.request(RequestCode.GET_HA_STATUS, {}))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return HAStatus.decode(answer.body)


def test_replication_over_tls_with_the_cluster_secret(processes, client, tmp_path):
    """tlsEnable on both: the slave replicates over TLS, verifying the master's certificate, and
    proves the secret; ha-status tells that slave from a plain one (permissive serves both; the
    slave's requests to its master's remoting port are plain, so not enforcing here)."""
    cert = make_certificate(tmp_path / "tls")
    tls = {
        "tlsEnable": "true",
        "tlsServerCertPath": str(cert.cert),
        "tlsServerKeyPath": str(cert.key),
        "tlsClientTrustCertPath": str(cert.cert),
    }
    master, _, _ = start_pair(processes, tmp_path, "SYNC_MASTER", **tls, **CLUSTER_KEYS)
    wait_acked_by_slave(client, master)
    for i in range(100):
        answer = call(client, master, send_request("Encrypted", bytes([i]) * 500, queue_id=i % 4))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    wait_replicated(tmp_path)
    [slave] = ha_status(client, master).slaves
    assert (slave.tls, slave.authenticated, slave.acks_count) == (True, True, True)
    with FakeSlave(int(processes.master_settings["haListenPort"]), ("rmq-cluster", "cluster-secret")) as plain:
        wait_until(lambda: plain.data_bytes > 0, 5, "the plain peer served")
        assert {(s.tls, s.authenticated) for s in ha_status(client, master).slaves} == {(True, True), (False, True)}


def test_ha_listen_address_binds_the_ha_port_where_told(processes, client, tmp_path):
    """The HA port on 127.0.0.2 only; slaves learn that address (brokerIP2's default) and replicate."""
    master, _, _ = start_pair(processes, tmp_path, "SYNC_MASTER", haListenAddress="127.0.0.2")
    wait_acked_by_slave(client, master)
    ha_port = int(processes.master_settings["haListenPort"])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", ha_port), timeout=5).close()
    for i in range(20):
        assert call(client, master, send_request("Bound", bytes([i]) * 300, queue_id=i % 4)).code == 0
    wait_replicated(tmp_path)


def test_a_send_the_lane_serves_wakes_an_idle_replication_stream(start_broker, monkeypatch):
    """An ASYNC_MASTER's stream goes idle once its slave has every byte; the next put wakes it,
    whichever path made it: here a send the compiled lane serves, from frame bytes to the store. The
    stream's own idle look is put far off (60 s, 30 s with the heartbeats), so the slave getting
    the message in the 10 s below is the put's doing."""
    monkeypatch.setattr(ha, "NEW_DATA_POLL", 60.0)
    broker = start_broker(
        brokerRole="ASYNC_MASTER",
        haListenPort=str(free_port()),
        haSendHeartbeatInterval="60000",
        haHousekeepingInterval="120000",
    )
    if broker.send_lane is None or codec.implementation is not _codec:
        pytest.skip("the send lane is off")
    create_topic(broker, "Replicated")
    store, service = broker.store, broker.store.ha_service
    header = b'{"code":%d,"opaque":%%d,"flag":0,"extFields":{"a":"P","b":"Replicated","e":"0"}}' % (
        RequestCode.SEND_MESSAGE_V2
    )

    def slave_has_all() -> bool:
        return [s.acked_offset for s in service.slaves()] == [store.get_max_phy_offset()]

    with FakeSlave(broker.config.ha_listen_port), RawConnection(broker.config.listen_port) as producer:
        # the first send of a topic goes to the processor, which checks the topic for the lane
        for opaque, by_lane in ((1, 0), (2, 1), (3, 1)):
            wait_until(lambda: service.idle and slave_has_all(), 10, "the stream idle, its slave caught up")
            served = broker.send_lane.served
            producer.send(raw_frame(header % opaque, b"replicate me"))
            (answer,) = producer.read_commands(1)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert broker.send_lane.served == served + by_lane
            wait_until(slave_has_all, 10, "the slave got the send")


def test_a_sync_master_answers_its_sends_by_the_sync_state_set(start_broker):
    """Controller mode's rule reaches the sends, on the lane and on the processor: a SYNC_MASTER
    without a slave answers SLAVE_NOT_AVAILABLE (no slave in sync), and SUCCESS once its sync state
    set is itself alone (inSyncReplicas 1: the master alone holds a send), then SLAVE_NOT_AVAILABLE
    again when minInSyncReplicas asks for more brokers than the set has."""
    broker = start_broker(brokerRole="SYNC_MASTER", haListenPort=str(free_port()), minInSyncReplicas="1")
    create_topic(broker, "Replicated")
    header = b'{"code":%d,"opaque":%%d,"flag":0,"extFields":{"a":"P","b":"Replicated","e":"0"}}' % (
        RequestCode.SEND_MESSAGE_V2
    )
    with RawConnection(broker.config.listen_port) as producer:

        def send(opaque: int) -> int:
            producer.send(raw_frame(header % opaque, b"held by the set"))
            (answer,) = producer.read_commands(1)
            return answer.code

        assert send(1) == ResponseCode.SLAVE_NOT_AVAILABLE
        broker.store.set_sync_state_set(frozenset({1}))
        assert [send(opaque) for opaque in (2, 3)] == [ResponseCode.SUCCESS] * 2
        broker.store.config.min_in_sync_replicas = 2
        broker.store.set_sync_state_set(frozenset({1}))
        assert send(4) == ResponseCode.SLAVE_NOT_AVAILABLE


def test_the_brokers_own_puts_wake_a_sync_masters_stream_a_pop_and_its_ack_answer_at_once(start_broker):
    """A SYNC_MASTER's stream looks for new bytes when a put tells it, and on its own only every
    haSendHeartbeatInterval / 2, here 30 s. POP's checkpoints and acks are the broker's own puts
    (put_inner) waiting for the slave like sends: each must tell the stream, or a pop and an ack
    are answered only at its next look (or when slaveTimeout gives up on the slave), past any
    client's timeout (the 5 s of each call below)."""
    broker = start_broker(
        brokerRole="SYNC_MASTER",
        haListenPort=str(free_port()),
        haSendHeartbeatInterval="60000",
        haHousekeepingInterval="120000",
        slaveTimeout="60000",
    )
    create_topic(broker, "Popped")
    service = broker.store.ha_service
    with FakeSlave(broker.config.ha_listen_port), RemotingClient() as client:
        wait_until(lambda: service.slaves(), 10, "the slave connected")
        put(broker, "Popped", b"to pop")
        popper = Popper(client, broker.broker_addr, "Popped", "G")
        [message] = popper.pop(invisible_ms=60_000)
        assert popper.ack(message).code == ResponseCode.SUCCESS
