"""Replication in one process: a master store and slave stores, each with its own directory, over
the HA port on loopback (rmq.store.ha); the store primitives under it; bad input on the HA port;
cluster authentication, TLS and haListenAddress on it."""

from __future__ import annotations

import select
import socket
import threading
import time
from pathlib import Path

import pytest

from rmq.errors import StoreError
from rmq.net.tls import TlsServerOptions, server_context
from rmq.protocol import ha as wire
from rmq.protocol.acl import ClusterAuthMode, SessionCredentials
from rmq.protocol.tls import TlsMode
from rmq.store import MessageStore, PutMessageStatus, _ha_stream
from rmq.store.ha import HASecurity
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.frames import RawConnection, refused
from tests.helpers.ha_peer import FakeSlave
from tests.helpers.store import small_store_config
from tests.helpers.threads import open_fds
from tests.helpers.tls import make_certificate


def open_pair(
    tmp_path: Path, opened: list, role: str = "ASYNC_MASTER", security: HASecurity | None = None, **settings
) -> MessageStore:
    """A started master store replicating on a free port (``opened`` collects it)."""
    store = MessageStore(
        small_store_config(
            tmp_path / "master",
            broker_role=role,
            ha_listen_port=free_port(),
            **settings,
        )
    ).start()
    opened.append(store)
    store.start_ha(security=security)
    return store


def open_slave(
    tmp_path: Path,
    opened: list,
    master: MessageStore,
    name: str = "slave",
    security: HASecurity | None = None,
    wait: bool = True,
) -> MessageStore:
    host = master.config.ha_listen_address or LOOPBACK
    store = MessageStore(
        small_store_config(
            tmp_path / name,
            broker_role="SLAVE",
            ha_master_address=f"{host}:{master.config.ha_listen_port}",
            ha_send_heartbeat_interval=200,
        )
    ).start()
    opened.append(store)
    since = time.time()
    store.start_ha(security=security)
    if wait:
        # connected and reported: before that, what the master writes may roll over past where it starts
        wait_until(lambda: reported_since(master, since), 10, f"{name} connected to the master")
    return store


def reported_since(master: MessageStore, since: float) -> bool:
    """A slave that connected after ``since`` has reported its offset."""
    assert master.ha_service is not None
    return any(s.connected_since >= since and s.acked_offset >= 0 for s in master.ha_service.slaves())


@pytest.fixture
def opened():
    stores: list[MessageStore] = []
    yield stores
    for store in reversed(stores):
        store.shutdown()


def caught_up(master: MessageStore, slave: MessageStore, timeout: float = 10.0) -> None:
    wait_until(
        lambda: slave.commit_log.get_max_offset() == master.commit_log.get_max_offset(),
        timeout,
        lambda: f"slave at {slave.commit_log.get_max_offset()} caught up with {master.commit_log.get_max_offset()}",
    )


def tree_bytes(root: Path, sub: str) -> dict[str, bytes]:
    return {str(p.relative_to(root / sub)): p.read_bytes() for p in sorted((root / sub).rglob("*")) if p.is_file()}


def assert_replica(master: MessageStore, slave: MessageStore, whole: bool = True) -> None:
    """The slave's CommitLog is byte-identical to the master's up to its end, same ConsumeQueue
    files (``whole``); else (a slave that started at the master's last file) the same entries for
    every message it holds, blanks before them."""
    end = slave.commit_log.get_max_offset()
    for mf in slave.commit_log.mapped_files:
        n = min(mf.file_size, end - mf.file_from_offset)
        theirs = master.commit_log.find_file(mf.file_from_offset)
        assert bytes(mf.read(0, n)) == bytes(theirs.read(0, n)), f"CommitLog file {mf.file_from_offset} differs"
    master.flush_logics()
    slave.flush_logics()
    if not whole:
        start = slave.commit_log.get_min_offset()
        for queue in slave.consume_queues():
            for offset in range(queue.max_offset_in_queue):
                theirs = master.find_consume_queue(queue.topic, queue.queue_id).get_entry(offset)
                mine = queue.get_entry(offset)
                assert mine == theirs or theirs[0] < start, (queue.topic, queue.queue_id, offset, mine, theirs)
        return
    assert tree_bytes(Path(slave.store_path), "consumequeue") == tree_bytes(Path(master.store_path), "consumequeue")


def put_many(store: MessageStore, n: int, size: int = 700) -> None:
    for i in range(n):
        r = store.put(f"Topic{i % 3}", bytes([i % 251]) * size, i % 4, keys=f"k{i}", wait=False)
        assert r.ok, r.status


# -- the store primitives -----------------------------------------------------------------------


def test_a_slave_appends_master_bytes_and_dispatches_whole_records(tmp_path, opened):
    master = MessageStore(small_store_config(tmp_path / "m")).start()
    slave = MessageStore(small_store_config(tmp_path / "s", broker_role="SLAVE")).start()
    opened += [master, slave]
    put_many(master, 200)  # rolls over a few files
    offset = 0
    while offset < master.commit_log.get_max_offset():
        view = master.replica_view(offset, 1000)  # cuts records: the rest follows
        assert view is not None and len(view) > 0
        offset = slave.append_replica(offset, view)
    assert offset == master.commit_log.get_max_offset() == slave.commit_log.get_max_offset()
    assert len(master.commit_log.mapped_files) > 1
    assert_replica(master, slave)
    assert slave.query_message("Topic1", "k7").messages
    with pytest.raises(StoreError, match="this CommitLog ends at"):
        slave.append_replica(offset - 10, b"x" * 10)
    assert master.replica_view(offset, 1000) == b""


def test_a_slave_refuses_puts_from_clients(tmp_path, opened):
    slave = MessageStore(small_store_config(tmp_path / "s", broker_role="SLAVE")).start()
    opened.append(slave)
    assert slave.put("TopicA", b"x", wait=False).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


# -- replication over the HA port ---------------------------------------------------------------


def test_async_master_replicates_everything_byte_identical(tmp_path, opened):
    master = open_pair(tmp_path, opened)
    slave = open_slave(tmp_path, opened, master)
    put_many(master, 300)
    caught_up(master, slave)
    assert_replica(master, slave)
    # an ASYNC_MASTER reads the slave's reports on its next poll (no send waits for them)
    end = master.commit_log.get_max_offset()
    wait_until(lambda: [s.acked_offset for s in master.ha_service.slaves()] == [end], 5, "the slave's ack listed")
    assert master.ha_service.slaves()[0].lag_bytes == 0


def test_a_new_slave_starts_at_the_masters_last_file_and_a_restarted_one_resumes(tmp_path, opened):
    master = open_pair(tmp_path, opened)
    put_many(master, 300)
    last_file = master.commit_log.mapped_files[-1].file_from_offset
    assert last_file > 0
    slave = open_slave(tmp_path, opened, master)
    caught_up(master, slave)
    assert slave.commit_log.get_min_offset() == last_file
    first = slave.commit_log.mapped_files[0]
    theirs = master.commit_log.find_file(last_file)
    assert bytes(first.read(0, first.wrote_position)) == bytes(theirs.read(0, first.wrote_position))
    # restarted mid-stream: resumes from its own end, not from the master's last file
    slave.shutdown()
    opened.remove(slave)
    put_many(master, 200)
    slave = open_slave(tmp_path, opened, master)
    put_many(master, 50)
    caught_up(master, slave)
    assert slave.commit_log.get_min_offset() == last_file
    assert_replica(master, slave, whole=False)


def test_two_slaves_and_a_master_that_restarts(tmp_path, opened):
    master = open_pair(tmp_path, opened)
    slaves = [open_slave(tmp_path, opened, master, name) for name in ("slave1", "slave2")]
    put_many(master, 100)
    for slave in slaves:
        caught_up(master, slave)
    wait_until(lambda: len(master.ha_service.slaves()) == 2, 10, "two slaves listed")
    # the master goes away and comes back on the same port: the slaves reconnect and go on
    config = master.config
    master.shutdown()
    opened.remove(master)
    master = MessageStore(config).start()
    opened.insert(0, master)  # shut down last
    master.start_ha()
    put_many(master, 100)
    for slave in slaves:
        caught_up(master, slave)
        assert_replica(master, slave)


def test_sync_master_waits_for_a_slave(tmp_path, opened):
    master = open_pair(tmp_path, opened, role="SYNC_MASTER")
    done = threading.Event()
    r = master.put_message("TopicA", 0, b"alone", b"", callback=lambda _: done.set())
    assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and not r.pending and r.ok
    slave = open_slave(tmp_path, opened, master)
    seen = []
    done = threading.Event()

    def on_acked(result):
        seen.append(slave.commit_log.get_max_offset() >= result.next_offset)
        done.set()

    r = master.put_message("TopicA", 0, b"with a slave", b"", callback=on_acked)
    assert done.wait(10)
    assert r.status is PutMessageStatus.PUT_OK and seen == [True]


def test_sync_master_and_sync_flush_wait_for_both(tmp_path, opened):
    master = open_pair(tmp_path, opened, role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH")
    slave = open_slave(tmp_path, opened, master)
    done = threading.Event()
    seen = []

    def on_done(result):
        seen.append(
            (
                master.commit_log.get_flushed_where() >= result.next_offset,
                slave.commit_log.get_max_offset() >= result.next_offset,
            )
        )
        done.set()

    r = master.put_message("TopicA", 0, b"both", b"", callback=on_done)
    assert done.wait(10)
    assert r.status is PutMessageStatus.PUT_OK and seen == [(True, True)]


# -- bad input on the HA port ---------------------------------------------------------------------


def test_bad_input_on_the_ha_port_is_refused_and_replication_goes_on(tmp_path, opened, caplog):
    master = open_pair(tmp_path, opened, ha_max_connections=2)
    slave = open_slave(tmp_path, opened, master)
    put_many(master, 50)
    caught_up(master, slave)
    port = master.config.ha_listen_port
    end = master.commit_log.get_max_offset()
    assert refused(port, b"GET / HTTP/1.1\r\n\r\n\xff\xff\xff\xff\xff")  # garbage: a negative offset
    assert refused(port, wire.encode_report(end + 1))  # beyond the master's end
    assert refused(port, wire.encode_report(end) + wire.encode_report(end - 100))  # backwards
    assert refused(port, wire.encode_report(end - 100) + wire.encode_report(end - 50))  # past what it was sent
    assert "beyond this master's CommitLog" in caplog.text and "went backwards" in caplog.text
    # past haMaxConnections (the slave and one that says nothing) a connection is closed at once
    with RawConnection(port):
        wait_until(lambda: len(master.ha_service.connections) == 2, 5, "the silent connection accepted")
        with RawConnection(port) as surplus:
            assert surplus.is_closed_by_peer(timeout=3.0)
    assert f"HA port {port} serves its maximum of 2 connections: refused 1" in caplog.text
    put_many(master, 50)
    caught_up(master, slave)
    assert_replica(master, slave)


def test_an_ha_thread_without_slaves_sleeps(tmp_path, opened):
    """A master with no slave (every standalone broker) does not poll for new bytes: its HA thread
    wakes for housekeeping only, not every ASYNC_NEW_DATA_POLL (~430 wake-ups a second before)."""
    master = open_pair(tmp_path, opened)
    put_many(master, 10)
    slave = open_slave(tmp_path, opened, master)
    caught_up(master, slave)
    slave.shutdown()
    opened.remove(slave)
    assert master.ha_service is not None
    wait_until(lambda: not master.ha_service.slaves(), 10, "the master saw its slave go")
    ha_thread = next(t for t in threading.enumerate() if t.name == "rmq-store-ha")
    before = wake_ups(ha_thread.native_id)
    time.sleep(1.0)
    assert wake_ups(ha_thread.native_id) - before < 50


def test_an_async_master_with_a_caught_up_slave_sleeps_and_still_sends_new_bytes(tmp_path, opened):
    """An ASYNC_MASTER whose slave has everything stops its 2 ms polls (~500 wake-ups a second
    before, each taking the GIL from the broker's loop); puts made without a broker's loop to wake
    it (a store on its own, the delay and timer services' re-puts) still reach the slave."""
    master = open_pair(tmp_path, opened)
    put_many(master, 10)
    slave = open_slave(tmp_path, opened, master)
    caught_up(master, slave)
    assert master.ha_service is not None
    wait_until(lambda: master.ha_service.idle, 5, "the HA thread idle")
    ha_thread = next(t for t in threading.enumerate() if t.name == "rmq-store-ha")
    before = wake_ups(ha_thread.native_id)
    time.sleep(1.0)
    assert wake_ups(ha_thread.native_id) - before < 100
    put_many(master, 50)
    caught_up(master, slave)
    assert_replica(master, slave)


def test_a_plain_slave_is_streamed_without_the_python_ha_loop(tmp_path, opened):
    """Once a plain slave replicates, the compiled stream (``rmq-store-ha-stream``, no GIL) sends
    its frames and reads its reports: the Python HA loop stays asleep while puts keep coming (it
    polled every 2 ms before, each poll a GIL hand-off with the broker's loop) and the slave still
    gets every byte."""
    master = open_pair(tmp_path, opened)
    put_many(master, 10)
    slave = open_slave(tmp_path, opened, master)
    caught_up(master, slave)
    ha_thread = next(t for t in threading.enumerate() if t.name == "rmq-store-ha")
    before = wake_ups(ha_thread.native_id)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        put_many(master, 5)
        time.sleep(0.005)
    caught_up(master, slave)
    assert wake_ups(ha_thread.native_id) - before < 50
    assert_replica(master, slave)


def test_an_async_masters_slave_acks_wake_no_completer(tmp_path, opened):
    """Only a SYNC_MASTER's sends wait for a slave's ack. An ASYNC_MASTER's stream keeps its slaves'
    acks to itself (status, lag): each one that moved wrote the completer's eventfd before, up to
    every 2 ms poll under load, and under SYNC_FLUSH that woke the broker's loop to complete nothing."""
    master = open_pair(tmp_path, opened)  # ASYNC_FLUSH: no flush round writes the eventfd either
    slave = open_slave(tmp_path, opened, master)

    def acked_all() -> bool:
        assert master.ha_service is not None
        return [s.acked_offset for s in master.ha_service.slaves()] == [master.commit_log.get_max_offset()]

    for _ in range(3):
        put_many(master, 20)
        caught_up(master, slave)
        wait_until(acked_all, 5, "the master has the slave's ack of every byte")
    assert select.select([master.commit_event_fd], [], [], 0)[0] == []


def test_a_slave_streamed_while_puts_keep_coming_stays_connected(tmp_path, opened, caplog):
    """Puts on another thread while the stream sends: the CommitLog grows between the stream's look
    at its end and its look at a file's bytes, and a frame must not reach past the end it saw (the
    next frame then started beyond it, and the slave was dropped as if its offset were gone)."""
    master = open_pair(tmp_path, opened, ha_transfer_batch_size=1024)
    slave = open_slave(tmp_path, opened, master)
    stop = threading.Event()

    def keep_putting():
        while not stop.is_set():
            put_many(master, 20, size=100)

    writer = threading.Thread(target=keep_putting, name="test-writer")
    writer.start()
    try:
        time.sleep(1.0)
    finally:
        stop.set()
        writer.join(10)
    caught_up(master, slave)
    assert "disconnected" not in caplog.text
    assert_replica(master, slave)


def test_shutdown_gives_back_the_descriptors_of_a_master_and_its_streamed_slave(tmp_path, opened):
    """Files, mappings, the HA port, the connections and the stream's epoll and eventfds: a process
    that opens stores again and again (tests, a broker promoted) must not pile them up."""
    before = open_fds()
    master = open_pair(tmp_path, opened, role="SYNC_MASTER")
    slave = open_slave(tmp_path, opened, master)
    put_many(master, 200)
    caught_up(master, slave)
    assert [c.streamed for c in master.ha_service.connections.values()] == [True]
    slave.shutdown()
    master.shutdown()
    assert open_fds() - before == set()


def test_a_streamed_slave_that_breaks_the_protocol_is_dropped(tmp_path, opened, caplog):
    """The stream checks a replicating slave's reports as the HA loop checks the first one: an
    offset that goes backwards, or one beyond the master's end, closes the connection with the
    reason logged; the master serves its real slave on."""
    master = open_pair(tmp_path, opened)
    slave = open_slave(tmp_path, opened, master)
    put_many(master, 20)
    caught_up(master, slave)
    assert master.ha_service is not None
    end = master.commit_log.get_max_offset()
    for second, said in [(-100, "went backwards"), (+1, "beyond this master's CommitLog")]:
        with RawConnection(master.config.ha_listen_port) as fake:
            fake.send(wire.encode_report(end))
            wait_until(lambda: [s.acked_offset for s in master.ha_service.slaves()] == [end, end], 5, "both acked")
            fake.send(wire.encode_report(end + second))
            assert fake.is_closed_by_peer(timeout=3.0)
        assert said in caplog.text
    put_many(master, 20)
    caught_up(master, slave)
    assert_replica(master, slave)
    assert len(master.ha_service.slaves()) == 1


def test_the_stream_assumes_the_wire_sizes_of_rmq_protocol_ha():
    assert (_ha_stream.FRAME_HEADER_BYTES, _ha_stream.REPORT_BYTES) == (wire.FRAME_HEADER_SIZE, wire.REPORT_SIZE)


def wake_ups(native_id: int | None) -> int:
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


# -- cluster authentication, TLS, haListenAddress -----------------------------------------------------

CLUSTER = SessionCredentials("rmq-cluster", "cluster-secret")
KEYS = (CLUSTER.access_key, CLUSTER.secret_key)


def put_waiting(master: MessageStore, body: bytes, timeout: float = 10.0) -> PutMessageStatus:
    """A SYNC_MASTER put that waits for a slave: its final status."""
    done = threading.Event()
    r = master.put_message("TopicA", 0, body, b"", callback=lambda _: done.set())
    if r.pending:
        assert done.wait(timeout)
    return r.status


def test_with_credentials_an_authenticated_slave_replicates_and_a_sync_send_waits_for_it(tmp_path, opened):
    master = open_pair(tmp_path, opened, role="SYNC_MASTER", security=HASecurity(CLUSTER))
    slave = open_slave(tmp_path, opened, master, security=HASecurity(CLUSTER))
    assert put_waiting(master, b"replicated") is PutMessageStatus.PUT_OK
    put_many(master, 50)
    caught_up(master, slave)
    assert_replica(master, slave)
    assert [(s.authenticated, s.acks_count) for s in master.ha_service.slaves()] == [(True, True)]


def test_enforcing_a_peer_that_does_not_authenticate_gets_no_byte_and_acks_nothing(tmp_path, opened, caplog):
    master = open_pair(tmp_path, opened, role="SYNC_MASTER", security=HASecurity(CLUSTER), slave_timeout=500)
    put_many(master, 20)
    port = master.config.ha_listen_port
    with FakeSlave(port) as plain, FakeSlave(port, credentials=("rmq-cluster", "wrong-secret")) as wrong:
        assert plain.closed.wait(5) and wrong.closed.wait(5)
        assert plain.data_bytes == wrong.data_bytes == 0
    assert put_waiting(master, b"alone") is PutMessageStatus.SLAVE_NOT_AVAILABLE
    assert "it did not authenticate" in caplog.text
    assert "authentication failed: a wrong proof of the cluster secret (access key 'rmq-cluster')" in caplog.text


def test_permissive_an_unauthenticated_slave_is_served_but_its_acks_do_not_count(tmp_path, opened, caplog):
    security = HASecurity(CLUSTER, ClusterAuthMode.PERMISSIVE)
    master = open_pair(tmp_path, opened, role="SYNC_MASTER", security=security, slave_timeout=500)
    with FakeSlave(master.config.ha_listen_port) as fake:
        put_many(master, 20)
        wait_until(lambda: fake.acked == master.commit_log.get_max_offset(), 5, "the fake slave acked everything")
        assert fake.data_bytes > 0 and [s.acks_count for s in master.ha_service.slaves()] == [False]
        assert put_waiting(master, b"not on a slave") is PutMessageStatus.SLAVE_NOT_AVAILABLE
        # a real slave with the credentials counts beside it
        open_slave(tmp_path, opened, master, security=security)
        assert put_waiting(master, b"on the real slave") is PutMessageStatus.PUT_OK
    assert "did not authenticate: served (clusterAuthMode permissive)" in caplog.text


def test_an_over_acking_slave_is_disconnected_and_never_counts(tmp_path, opened, caplog):
    """A slave (4.x, no credentials) acking more than it was sent: the send waiting on it is not
    completed by that ack, and the slave is gone."""
    master = open_pair(tmp_path, opened, role="SYNC_MASTER", slave_timeout=500)
    put_many(master, 5)
    end = master.commit_log.get_max_offset()
    with FakeSlave(master.config.ha_listen_port, over_ack=100, over_ack_from=end) as fake:
        wait_until(lambda: [s.acked_offset for s in master.ha_service.slaves()] == [end], 5, "honest acks first")
        assert put_waiting(master, b"over-acked") is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        assert fake.closed.wait(5)
    assert "beyond this master's CommitLog" in caplog.text
    wait_until(lambda: not master.ha_service.slaves(), 5, "the slave dropped")
    assert put_waiting(master, b"after it") is PutMessageStatus.SLAVE_NOT_AVAILABLE


def test_a_slave_refuses_a_master_that_cannot_prove_the_secret(tmp_path, opened, caplog):
    """A master with another secret: the slave neither reconciles its log with it nor copies a byte."""
    master = open_pair(tmp_path, opened, security=HASecurity(SessionCredentials("rmq-cluster", "another")))
    put_many(master, 20)
    asked = []

    def epoch_source():
        asked.append(True)
        raise AssertionError("a master that failed to authenticate is not asked for its epochs")

    slave = MessageStore(
        small_store_config(
            tmp_path / "slave",
            broker_role="SLAVE",
            ha_master_address=f"{LOOPBACK}:{master.config.ha_listen_port}",
        )
    ).start()
    opened.append(slave)
    slave.start_ha(epoch_source, HASecurity(CLUSTER))
    wait_until(lambda: "its proof of the cluster secret is wrong" in caplog.text, 5, "the slave refusing the master")
    # the master logs it too (the slave's proof does not hold either)
    wait_until(lambda: "authentication failed" in caplog.text, 5, "the master refusing the slave")
    assert not asked and slave.commit_log.get_max_offset() == 0


def test_a_slave_with_credentials_refuses_a_master_without_them_unless_permissive(tmp_path, opened, caplog):
    master = open_pair(tmp_path, opened)
    put_many(master, 20)
    open_slave(tmp_path, opened, master, "strict", security=HASecurity(CLUSTER), wait=False)
    wait_until(lambda: "it holds no cluster credentials" in caplog.text, 5, "the slave refusing the master")
    lenient = open_slave(tmp_path, opened, master, "lenient", HASecurity(CLUSTER, ClusterAuthMode.PERMISSIVE))
    caught_up(master, lenient)
    assert "replicating from it all the same" in caplog.text


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER"])
def test_replication_over_tls_with_authentication(tmp_path, opened, certificate, caplog, role):
    server = TlsServerOptions(server_context(str(certificate.cert), str(certificate.key)), TlsMode.ENFORCING)
    master = open_pair(tmp_path, opened, role=role, security=HASecurity(CLUSTER, server_tls=server))
    slave = open_slave(tmp_path, opened, master, security=HASecurity(CLUSTER, client_tls=certificate.client_context()))
    if role == "SYNC_MASTER":
        assert put_waiting(master, b"over TLS") is PutMessageStatus.PUT_OK
    put_many(master, 3000, size=1000)  # megabytes: records wait behind the socket (and the cipher backlog)
    caught_up(master, slave)
    assert_replica(master, slave)
    # enforcing: a plain slave, even one with the secret, is closed before its first byte is read
    with FakeSlave(master.config.ha_listen_port, credentials=KEYS) as plain:
        assert plain.closed.wait(5) and plain.data_bytes == 0
    assert "this HA port takes TLS only" in caplog.text


def test_a_tls_slave_and_a_streamed_plain_slave_each_complete_sync_master_sends(tmp_path, opened, certificate):
    """tlsServerMode permissive: the HA loop serves the TLS slave, the compiled stream the plain one;
    their acks reach the group commit together, so either one alone completes a SYNC_MASTER send,
    and each gets every byte."""
    server = TlsServerOptions(server_context(str(certificate.cert), str(certificate.key)), TlsMode.PERMISSIVE)
    master = open_pair(tmp_path, opened, role="SYNC_MASTER", security=HASecurity(server_tls=server))
    tls = open_slave(tmp_path, opened, master, "tls", security=HASecurity(client_tls=certificate.client_context()))
    plain = open_slave(tmp_path, opened, master, "plain")
    assert put_waiting(master, b"on both") is PutMessageStatus.PUT_OK
    put_many(master, 200)
    for slave in (tls, plain):
        caught_up(master, slave)
        assert_replica(master, slave)
    plain.shutdown()
    opened.remove(plain)
    wait_until(lambda: len(master.ha_service.slaves()) == 1, 5, "the plain slave gone")
    assert put_waiting(master, b"on the TLS slave") is PutMessageStatus.PUT_OK
    plain = open_slave(tmp_path, opened, master, "plain-again")
    tls.shutdown()
    opened.remove(tls)
    wait_until(lambda: len(master.ha_service.slaves()) == 1, 5, "the TLS slave gone")
    assert put_waiting(master, b"on the plain slave") is PutMessageStatus.PUT_OK
    caught_up(master, plain)


def test_ha_listen_address_binds_the_ha_port_to_one_address(tmp_path, opened):
    master = open_pair(tmp_path, opened, ha_listen_address="127.0.0.2")
    port = master.config.ha_listen_port
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((LOOPBACK, port), timeout=5).close()
    slave = open_slave(tmp_path, opened, master)  # at 127.0.0.2
    put_many(master, 20)
    caught_up(master, slave)


def test_a_connection_that_never_finishes_its_handshake_is_closed(tmp_path, opened, caplog):
    """Half a HELLO, then nothing: dropped after haHousekeepingInterval, as a silent slave is."""
    master = open_pair(tmp_path, opened, security=HASecurity(CLUSTER), ha_housekeeping_interval=300)
    with RawConnection(master.config.ha_listen_port) as stalled:
        stalled.send(wire.encode_hello(bytes(wire.NONCE_SIZE))[:20])
        assert stalled.is_closed_by_peer(timeout=5)
    assert "no handshake within 0.3 s (haHousekeepingInterval)" in caplog.text


def test_a_malformed_proof_is_refused(tmp_path, opened, caplog):
    master = open_pair(tmp_path, opened, security=HASecurity(CLUSTER))
    hello = wire.encode_hello(bytes(wire.NONCE_SIZE))
    assert refused(master.config.ha_listen_port, hello + bytes.fromhex("7fff") + bytes(40))
    assert "a malformed PROOF: access key length 32767 is not in [0, 1024]" in caplog.text
