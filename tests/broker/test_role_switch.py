"""Failover beyond 4.x (issue 11, acceptance 2): a SYNC_MASTER SIGKILLed while sends are in flight
loses nothing it acknowledged; its slave, promoted, takes sends; the old master, restarted as a
slave, cuts the tail its successor never had and converges to a byte-identical log. Round after
round, the two stores swap roles.

``RMQ_FAILOVER_ROUNDS=100 python -m pytest tests/broker/test_role_switch.py -k rounds -s`` runs
more rounds than the suite's 20 and prints each (README: "Failover rounds").
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmq.cli.admin import main as admin_main
from rmq.client.admin_client import AdminClient
from rmq.net import RemotingClient
from rmq.protocol.codes import ResponseCode
from rmq.protocol.route import MASTER_ID
from rmq.store.digest import commit_log_digests
from rmq.store.epoch import EpochEntry
from tests.helpers import wait_until
from tests.helpers.broker import create_topic, messages_in, put
from tests.helpers.failover import BROKER_NAME, FailoverPair
from tests.helpers.requests import call, send_request

ROUNDS = int(os.environ.get("RMQ_FAILOVER_ROUNDS", "20"))


@pytest.fixture
def pair(spawn, tmp_path: Path) -> Iterator[FailoverPair]:
    p = FailoverPair(spawn, tmp_path)
    try:
        yield p.start()
    finally:
        p.close()


@pytest.mark.slow
def test_failover_rounds_lose_nothing_acknowledged_and_converge(pair: FailoverPair):
    reports = [pair.round() for _ in range(ROUNDS)]
    for r in reports:
        print(
            f"round {r.round}: killed {r.killed}, promoted {r.promoted} (epoch {r.epoch}); {r.acked} acked so far; "
            f"rejoin dropped {r.dropped_bytes} bytes ({r.dropped_records} records); identical up to {r.converged_at}"
        )
    assert [r.epoch for r in reports] == list(range(2, ROUNDS + 2))
    # every message ever acknowledged is on the master standing at the end
    assert not set(pair.acked) - pair.bodies_on(pair.master)
    print(f"{ROUNDS} rounds, {len(pair.acked)} acknowledged messages, lost 0")


def test_rejoining_master_drops_exactly_what_its_successor_never_had(spawn, tmp_path: Path):
    """ASYNC_MASTER, deterministic: the slave is stopped while the master takes 100 more messages,
    then the master dies; the slave, back and promoted, never had them, so the old master drops
    exactly those 100 records when it rejoins, and keeps what the new master took since."""
    pair = FailoverPair(spawn, tmp_path)
    try:
        pair.start("ASYNC_MASTER")
        a, b = pair.master, pair.slave
        assert all(pair.send(a, b"before-%d" % i) == ResponseCode.SUCCESS for i in range(50))
        pair.wait_converged()
        pair.procs[b].send_signal(signal.SIGTERM)
        pair.procs[b].wait(10)
        assert all(pair.send(a, b"diverged-%d" % i) == ResponseCode.SUCCESS for i in range(100))
        pair.procs[a].send_signal(signal.SIGKILL)
        pair.procs[a].wait(10)
        pair.start_broker(b, "SLAVE")  # no master to copy from
        with AdminClient(pair.namesrv_addr) as admin:
            promotion = admin.promote(BROKER_NAME, 1)
        assert promotion.epoch == 2
        assert pair.runtime(b)["brokerRole"] == "ASYNC_MASTER"
        assert all(pair.send(b, b"after-%d" % i) == ResponseCode.SUCCESS for i in range(20))
        pair.master, pair.slave = b, a
        pair.start_broker(a, "SLAVE")
        pair.wait_converged()
        dropped_bytes, dropped_records = pair.dropped(a)
        assert dropped_records == 100 and dropped_bytes > 0
        on_a = pair.bodies_on(a)
        assert on_a == pair.bodies_on(b)
        assert {b"before-%d" % i for i in range(50)} | {b"after-%d" % i for i in range(20)} <= on_a
        assert not {b"diverged-%d" % i for i in range(100)} & on_a
        assert pair.runtime(a)["epoch"] == "2"
    finally:
        pair.close()


def test_without_credentials_a_live_master_keeps_its_route_and_is_not_fenced(spawn, tmp_path: Path):
    """The slave promoted while the old master still runs, and no cluster credentials: the name
    server cannot tell the promoted slave from a forger, so the live master keeps the route and
    takes sends, and the promoted one gets the route once the old master is gone. (With
    credentials the promoted master takes over and the old one fences itself:
    tests/broker/test_forged_registration.py.)"""
    pair = FailoverPair(spawn, tmp_path, registerNameServerPeriod="1000")
    try:
        pair.start("ASYNC_MASTER")
        a, b = pair.master, pair.slave
        promoted = CliRunner().invoke(
            admin_main, ["broker", "promote", BROKER_NAME, "--broker-id", "1", "-n", pair.namesrv_addr]
        )
        assert promoted.exit_code == 1 and f"still routes {pair.addr(a)}" in promoted.output, promoted.output
        with AdminClient(pair.namesrv_addr) as admin:
            assert admin.broker_addrs(BROKER_NAME)[MASTER_ID] == pair.addr(a)
            wait_until(lambda: "refused" in pair.log_path(b).read_text(errors="replace"), 10, f"{b} refused")
            assert pair.send(a, b"still the master") == ResponseCode.SUCCESS
            pair.procs[a].send_signal(signal.SIGKILL)
            pair.procs[a].wait(10)
            wait_until(lambda: admin.broker_addrs(BROKER_NAME) == {MASTER_ID: pair.addr(b)}, 10, f"{b} routed")
        assert pair.send(b, b"two") == ResponseCode.SUCCESS
    finally:
        pair.close()


# -- controller mode: roles switched by epoch (rmq.broker.role's become_master / become_slave) --------


def test_controller_roles_switch_by_epoch_and_a_demoted_master_rejoins_cut_to_the_common_point(
    start_broker, tmp_path: Path
):
    """What the controllers' decisions do to two brokers of a set: the slave becomes master in the
    controllers' epoch (not its own next one); the old master, demoted while it still runs, refuses
    the next send at once, cuts what it took that its successor never had, and then holds a
    byte-identical log, replicated under its own broker id."""
    a = start_broker(storePathRootDir=str(tmp_path / "a"), brokerRole="ASYNC_MASTER", autoCreateTopicEnable="true")
    b = start_broker(
        storePathRootDir=str(tmp_path / "b"),
        brokerRole="SLAVE",
        brokerId="1",
        namesrvAddr=a.config.namesrv_addr,
        haSendHeartbeatInterval="200",
    )
    create_topic(a, "TopicA")
    for i in range(20):
        put(a, "TopicA", b"before-%d" % i)
    wait_until(lambda: b.store.get_max_phy_offset() == a.store.get_max_phy_offset(), 10, "b replicated a")
    common = a.store.get_max_phy_offset()

    entry = b.role.become_master(5, False)
    assert (entry.epoch, entry.start_offset) == (5, common)
    assert b.store.epochs.entries == [EpochEntry(1, 0), EpochEntry(5, common)]
    assert b.role.become_master(5, False) == entry  # the controllers say it again: nothing changes
    with pytest.raises(ValueError, match="already holds epoch 5"):
        b.role.become_master(4, False)
    for i in range(10):
        put(a, "TopicA", b"diverged-%d" % i)  # the old master, not yet told
    for i in range(5):
        put(b, "TopicA", b"after-%d" % i)

    a.config.broker_id = 2  # the controllers' id for it, which it names to its new master
    a.role.become_slave(b.broker_addr, f"127.0.0.1:{b.store.config.ha_listen_port}", 5)
    with RemotingClient() as client:
        refused = call(client, a.broker_addr, send_request("TopicA", b"too late"))
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused.remark
    a.role.become_slave(b.broker_addr, f"127.0.0.1:{b.store.config.ha_listen_port}", 5)  # idempotent

    def identical() -> bool:
        end = b.store.get_max_phy_offset()
        return a.store.get_max_phy_offset() == end and commit_log_digests(
            a.store, 0, end, 64 * 1024
        ) == commit_log_digests(b.store, 0, end, 64 * 1024)

    wait_until(identical, 10, "the demoted master holds the new master's log")
    bodies = {m.body for m in messages_in(a, "TopicA")}
    assert {b"before-%d" % i for i in range(20)} | {b"after-%d" % i for i in range(5)} == bodies
    assert a.store.epochs.entries == b.store.epochs.entries
    assert b.store.ha_service is not None
    # its ack of the last byte may still be on its way
    wait_until(lambda: b.store.ha_service.in_sync_slave_ids() == {2}, 5, "a in b's sync state")

    # b restarted as the controllers start their brokers (a slave), and named master of its own
    # epoch again (elected before its restart): it goes on in that term, the entry as it was
    b.shutdown()
    b = start_broker(
        storePathRootDir=str(tmp_path / "b"),
        brokerRole="SLAVE",
        brokerId="1",
        namesrvAddr=a.config.namesrv_addr,
        autoCreateTopicEnable="true",
    )
    assert b.role.become_master(5, False) == EpochEntry(5, common)
    assert b.store.epochs.entries == [EpochEntry(1, 0), EpochEntry(5, common)]
    with RemotingClient() as client:
        again = call(client, b.broker_addr, send_request("TopicA", b"again"))
    assert again.code == ResponseCode.SUCCESS, again.remark
