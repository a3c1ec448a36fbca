"""Controller mode's sync state set on a master store (docs/controller.md#the-sync-state-set): slaves
in processes of their own (``ha_slave_child.py``, so that one can be paused with SIGSTOP) name their
broker ids in the HA handshake; the master counts which ones are caught up within
haMaxTimeSlaveNotCatchup, and a SYNC_MASTER put completes as the sync state set's rule says. Each
of that twice: slaves served by the compiled stream, and over TLS by the HA loop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmq.net.tls import TlsServerOptions, server_context
from rmq.protocol import ha as wire
from rmq.protocol.tls import TlsMode
from rmq.store import MessageStore, PutMessageStatus
from rmq.store.ha import CatchUp, HASecurity
from tests.helpers import LOOPBACK, free_port, wait_until
from tests.helpers.frames import refused
from tests.helpers.processes import pause_process
from tests.helpers.store import small_store_config
from tests.helpers.tls import make_certificate

CHILD = Path(__file__).with_name("ha_slave_child.py")
MASTER_ID, S1, S2 = 1, 2, 3
# ms a slave may go without having everything before it leaves the set (RocketMQ's default: 15 s)
NOT_CATCHUP_MS = 400
SLAVE_TIMEOUT_MS = 500


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def master(request, tmp_path: Path, certificate) -> Iterator[MessageStore]:
    """A SYNC_MASTER store; parametrized "tls", its slaves are served over TLS by the HA loop (the
    Python path), else by the compiled stream."""
    security = None
    if getattr(request, "param", "stream") == "tls":
        context = server_context(str(certificate.cert), str(certificate.key))
        security = HASecurity(server_tls=TlsServerOptions(context, TlsMode.ENFORCING))
    store = MessageStore(
        small_store_config(
            tmp_path / "master",
            broker_role="SYNC_MASTER",
            ha_listen_port=free_port(),
            slave_timeout=SLAVE_TIMEOUT_MS,
            ha_max_time_slave_not_catchup=NOT_CATCHUP_MS,
        )
    ).start()
    store.start_ha(security=security)
    yield store
    store.shutdown()


@pytest.fixture
def start_slave(tmp_path: Path, master: MessageStore, certificate) -> Iterator[Callable[[int], subprocess.Popen]]:
    """``start_slave(broker_id)``: a slave process replicating from ``master``, once it reported."""
    procs: list[subprocess.Popen] = []

    def start(broker_id: int) -> subprocess.Popen:
        address = f"{LOOPBACK}:{master.config.ha_listen_port}"
        tls = [str(certificate.cert)] if master.ha_security is not None else []
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(tmp_path / f"slave{broker_id}"), address, str(broker_id), *tls],
            stdout=subprocess.PIPE,
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
        assert master.ha_service is not None
        wait_until(
            lambda: any(s.broker_id == broker_id and s.acked_offset >= 0 for s in master.ha_service.slaves()),
            10,
            f"slave {broker_id} reported",
        )
        # the path under test: TLS slaves stay on the HA loop, plain ones go to the stream
        assert {c.streamed for c in master.ha_service.connections.values()} == {not tls}
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)  # a paused slave must hear its SIGTERM
            proc.terminate()
    for proc in procs:
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def put(master: MessageStore, body: bytes = b"m", timeout: float = 5.0) -> PutMessageStatus:
    """A SYNC_MASTER put, waited for: how it completed."""
    done = threading.Event()
    result = master.put_message("TopicA", 0, body, b"", callback=lambda _: done.set())
    if result.pending:
        assert done.wait(timeout), "the put never completed"
    return result.status


def in_sync(master: MessageStore) -> frozenset[int]:
    assert master.ha_service is not None
    return master.ha_service.in_sync_slave_ids()


@pytest.mark.parametrize("master", ["stream", "tls"], indirect=True)
def test_in_sync_slave_ids_follow_a_slave_paused_and_resumed(master, start_slave):
    s1, s2 = start_slave(S1), start_slave(S2)
    assert put(master) is PutMessageStatus.PUT_OK  # the best slave's ack, without a sync state set
    wait_until(lambda: in_sync(master) == {S1, S2}, 5, "both slaves in sync")
    pause_process(s2.pid)
    # puts keep coming: the paused slave has less and less of the log, the other keeps up
    wait_until(lambda: put(master) is PutMessageStatus.PUT_OK and in_sync(master) == {S1}, 5, "s2 out")
    os.kill(s2.pid, signal.SIGCONT)
    wait_until(lambda: put(master) is PutMessageStatus.PUT_OK and in_sync(master) == {S1, S2}, 5, "s2 back")
    s1.terminate()
    s1.wait(10)
    wait_until(lambda: in_sync(master) == {S2}, 5, "a slave gone is out at once")


@pytest.mark.parametrize("master", ["stream", "tls"], indirect=True)
def test_a_sync_state_set_with_every_ack_waits_for_each_member(master, start_slave):
    start_slave(S1)
    s2 = start_slave(S2)
    master.config.all_ack_in_sync_state_set = True
    master.set_sync_state_set(frozenset({MASTER_ID, S1, S2}))
    assert put(master) is PutMessageStatus.PUT_OK
    pause_process(s2.pid)
    # acked by s1 alone: not enough, within slaveTimeout
    assert put(master) is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    master.set_sync_state_set(frozenset({MASTER_ID, S1}))
    assert put(master) is PutMessageStatus.PUT_OK
    # the set back to three, inSyncReplicas 2 (the master and one slave): s1's ack suffices
    master.config.all_ack_in_sync_state_set = False
    master.config.in_sync_replicas = 2
    master.set_sync_state_set(frozenset({MASTER_ID, S1, S2}))
    assert put(master) is PutMessageStatus.PUT_OK
    master.config.in_sync_replicas = 3
    master.set_sync_state_set(frozenset({MASTER_ID, S1, S2}))
    assert put(master) is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    os.kill(s2.pid, signal.SIGCONT)
    assert put(master) is PutMessageStatus.PUT_OK


def test_a_sync_state_set_too_small_answers_at_once_and_the_master_alone_completes(master):
    """No slave connected at all: a set of the master alone completes a put once stored (1 =
    the master alone); one smaller than minInSyncReplicas, or than inSyncReplicas needs, answers
    SLAVE_NOT_AVAILABLE (stored, not replicated) without waiting."""
    assert put(master) is PutMessageStatus.SLAVE_NOT_AVAILABLE  # no slave, no set: as 4.x
    master.set_sync_state_set(frozenset({MASTER_ID}))
    assert put(master) is PutMessageStatus.PUT_OK
    master.config.min_in_sync_replicas = 2
    master.set_sync_state_set(frozenset({MASTER_ID}))
    assert put(master, timeout=0.2) is PutMessageStatus.SLAVE_NOT_AVAILABLE
    master.config.min_in_sync_replicas = 1
    master.config.in_sync_replicas = 3
    master.set_sync_state_set(frozenset({MASTER_ID, S1}))
    assert put(master, timeout=0.2) is PutMessageStatus.SLAVE_NOT_AVAILABLE


def test_a_malformed_slave_id_is_refused(master, caplog):
    assert refused(master.config.ha_listen_port, wire.SLAVE_ID.pack(wire.SLAVE_ID_MAGIC, -5))
    assert "a malformed SLAVE_ID: broker id -5 is negative" in caplog.text


def test_catch_up_counts_an_ack_of_an_end_passed_meanwhile():
    """The Python path's bookkeeping (the stream's is its twin): under steady puts a slave never
    acks the end as it is when its ack comes, but the end of an earlier look."""
    catch_up = CatchUp()
    catch_up.track(acked=100, end=200, now_ns=1_000)  # behind: a check of end 200 at t=1000
    catch_up.track(acked=150, end=300, now_ns=2_000)
    assert not catch_up.in_sync(acked=150, end=300, now_ns=2_000, window_ns=10_000)
    catch_up.track(acked=250, end=400, now_ns=3_000)  # had everything there was at t=1000
    assert catch_up.caught_up_ns == 1_000
    assert catch_up.in_sync(acked=250, end=400, now_ns=3_000, window_ns=10_000)
    assert not catch_up.in_sync(acked=250, end=400, now_ns=20_000, window_ns=10_000)
    assert catch_up.in_sync(acked=400, end=400, now_ns=20_000, window_ns=10_000)


def test_a_master_demoted_and_promoted_again_starts_its_term_without_the_old_set(master):
    """The sync state set of one term as master says nothing of the next: promoted again, the
    master answers as one without a set (no slave: SLAVE_NOT_AVAILABLE at once) until the
    controllers give it the new one, rather than waiting for slaves of its old set."""
    master.config.all_ack_in_sync_state_set = True
    master.set_sync_state_set(frozenset({MASTER_ID, S1, S2}))
    assert put(master) is PutMessageStatus.FLUSH_SLAVE_TIMEOUT  # neither slave there
    master.set_running(False)
    master.become_slave()
    master.demote(None, None, MASTER_ID)
    master.promote(True, epoch=2)
    master.set_running(True)
    assert put(master, timeout=0.2) is PutMessageStatus.SLAVE_NOT_AVAILABLE


def test_a_master_lease_that_ran_out_refuses_puts_until_renewed(open_store):
    """Controller mode's master lease (docs/controller.md#fencing): past it, every put is refused
    SERVICE_NOT_AVAILABLE and nothing is written; renewed, or no lease at all, puts go on."""
    store = open_store()
    now = time.clock_gettime(time.CLOCK_BOOTTIME)
    store.set_master_lease(now + 60)
    assert store.put("TopicA", b"within").status is PutMessageStatus.PUT_OK and not store.master_lease_expired
    store.set_master_lease(now - 1)
    end = store.commit_log.get_max_offset()
    assert store.master_lease_expired
    assert store.put("TopicA", b"past").status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert (
        store.put_messages("TopicA", 0, [(b"a", b"", 0), (b"b", b"", 0)]).status
        is PutMessageStatus.SERVICE_NOT_AVAILABLE
    )
    assert store.commit_log.get_max_offset() == end
    store.set_master_lease(0)
    assert store.put("TopicA", b"no lease").status is PutMessageStatus.PUT_OK
