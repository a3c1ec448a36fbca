"""One broker set driven over the wire by brokers written by hand (register, heartbeat, elect, alter)
against an rmq-controller: the leader's scan replaces a silent master from the sync state set only,
tells the brokers, and fences the replaced master (docs/controller.md#election)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rmq.net import RemotingClient, RemotingCommand
from rmq.perf.procs import WaitTimeout, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.controller import HEARTBEAT_TIMEOUT_MILLIS_DEFAULT, NO_BROKER_ID, ReplicaInfo, SyncStateSet
from rmq.settings import CONTROLLER_SETTINGS
from tests.helpers.controllers import HEARTBEAT_TIMEOUT_MS, TIMEOUT, Broker, ControllerGroup, expect, join_set

# the heartbeat timeout (0.6 s) and a scan (0.1 s), with room for a loaded machine
ELECTION_TIMEOUT = 5.0


def start_group(spawn, tmp_path: Path, **settings: str) -> ControllerGroup:
    """One controller, a group of one, once it leads."""
    group = ControllerGroup(spawn, tmp_path, size=1, **settings).start()
    group.leader()
    return group


def replica_info(group: ControllerGroup, broker: Broker) -> tuple[ReplicaInfo, SyncStateSet]:
    answer = expect(group.call(0, broker.replica_info()))
    return ReplicaInfo.from_fields(answer.ext_fields), SyncStateSet.decode(answer.body)


def wait_for_master(group: ControllerGroup, alive: list[Broker], epoch: int, **heartbeat: int) -> ReplicaInfo:
    """Heartbeat ``alive`` (only) until the set is in master epoch ``epoch``; its replica info then."""

    def moved() -> ReplicaInfo | None:
        for broker in alive:
            expect(group.call(0, broker.heartbeat(**heartbeat)))
        info, _ = replica_info(group, alive[0])
        return info if info.master_epoch >= epoch else None

    return wait_until(moved, ELECTION_TIMEOUT, f"master epoch {epoch}", interval=0.1)


def test_a_silent_master_is_replaced_from_the_sync_state_set_and_the_brokers_are_told(spawn, tmp_path, brokers):
    group = start_group(spawn, tmp_path)
    try:
        master, slave, outsider = brokers
        first = join_set(group, 0, brokers)
        assert (first.master_broker_id, first.master_epoch) == (1, 1)
        expect(group.call(0, master.alter(1, SyncStateSet(frozenset({1, 2}), first.sync_state_set_epoch))))

        # the outsider's log looks the best, but it is not in the sync state set: it may lack acked messages
        new = wait_for_master(group, [slave, outsider], epoch=2)
        _, sync_state = replica_info(group, slave)

        assert (new.master_broker_id, new.master_address, new.master_epoch) == (2, slave.address, 2)
        assert sync_state == SyncStateSet(frozenset({2}), first.sync_state_set_epoch + 2)
        for told in (slave, outsider):
            wait_until(lambda b=told: b.notices, 3.0, f"a notice to broker {told.broker_id}")
            assert told.notices[-1][0].master_broker_id == 2 and told.notices[-1][0].master_epoch == 2
        # silent since: told of its own election only
        assert [info.master_epoch for info, _ in master.notices] == [1]
    finally:
        group.close()


def test_a_master_whose_connection_closes_is_replaced_at_once_unless_it_spoke_over_a_new_one(spawn, tmp_path, brokers):
    """RocketMQ's onBrokerChannelClose: with the default heartbeat timeout (10 s) and scan (5 s),
    the master's connection closing has the leader elect at once; its reconnecting first (a
    heartbeat over a new connection) keeps it master. The waits stay below the heartbeat timeout."""
    scan_ms = CONTROLLER_SETTINGS["scanNotActiveBrokerInterval"].default
    group = start_group(spawn, tmp_path, scanNotActiveBrokerInterval=str(scan_ms))
    leader = group.addresses[0]
    master, slave, _ = brokers
    beat = {"timeout_ms": HEARTBEAT_TIMEOUT_MILLIS_DEFAULT}
    first_connection, second_connection = RemotingClient(), RemotingClient()
    try:
        first_connection.start()
        second_connection.start()
        expect(group.call(0, master.apply_id(1)))
        expect(group.call(0, slave.apply_id(2)))
        # the master speaks over a connection of its own, the slave over the group's
        for request in (master.register(), master.heartbeat(**beat), master.elect()):
            expect(first_connection.invoke_sync(leader, request, TIMEOUT))
        expect(group.call(0, slave.register()))
        expect(group.call(0, slave.heartbeat(**beat)))
        info, sync_state = replica_info(group, slave)
        expect(group.call(0, master.alter(info.master_epoch, SyncStateSet(frozenset({1, 2}), sync_state.epoch))))

        # reconnected: a heartbeat over a new connection, then the old one closes
        expect(second_connection.invoke_sync(leader, master.heartbeat(**beat), TIMEOUT))
        first_connection.shutdown()
        with pytest.raises(WaitTimeout):
            wait_until(lambda: replica_info(group, slave)[0].master_epoch > 1, 1.0, "an election", 0.05)

        second_connection.shutdown()  # as a SIGKILLed master's kernel closes its socket
        new = wait_until(
            lambda: (i := replica_info(group, slave)[0]).master_epoch > 1 and i, ELECTION_TIMEOUT, "an election"
        )
        assert (new.master_broker_id, new.master_epoch) == (slave.broker_id, 2)
        wait_until(lambda: slave.notices, 3.0, "a notice to the new master")
    finally:
        first_connection.shutdown()
        second_connection.shutdown()
        group.close()


@pytest.mark.parametrize("unclean", [False, True])
def test_outside_the_sync_state_set_only_an_unclean_election_picks_a_master(spawn, tmp_path, brokers, unclean):
    group = start_group(spawn, tmp_path, enableElectUncleanMaster=str(unclean).lower())
    try:
        master, slave, _ = brokers
        join_set(group, 0, brokers[:2])

        info = wait_for_master(group, [slave], epoch=2)

        if unclean:
            assert info.master_broker_id == slave.broker_id
        else:
            assert info.master_broker_id == NO_BROKER_ID
            refused = group.call(0, slave.elect())
            assert refused.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
            # the master comes back: it is the sync state set, so it is elected again
            expect(group.call(0, master.heartbeat()))
            back = ReplicaInfo.from_fields(expect(group.call(0, master.elect())).ext_fields)
            assert (back.master_broker_id, back.master_epoch) == (master.broker_id, 3)
    finally:
        group.close()


def test_an_alter_from_a_replaced_master_is_fenced(spawn, tmp_path, brokers):
    group = start_group(spawn, tmp_path)
    try:
        master, slave, _ = brokers
        first = join_set(group, 0, brokers[:2])
        expect(group.call(0, master.alter(1, SyncStateSet(frozenset({1, 2}), first.sync_state_set_epoch))))
        # an operator's promote: designateElect
        promoted = ReplicaInfo.from_fields(expect(group.call(0, slave.elect(designate=True))).ext_fields)
        assert (promoted.master_broker_id, promoted.master_epoch) == (2, 2)

        # the old master, not yet aware, drops the slave from its set in its old epoch (RocketMQ checks
        # who the master is before the epoch)
        fenced = group.call(0, master.alter(1, SyncStateSet(frozenset({1}), promoted.sync_state_set_epoch)))

        assert fenced.code == ResponseCode.CONTROLLER_INVALID_MASTER
        info, sync_state = replica_info(group, slave)
        assert info.master_broker_id == 2 and sync_state.broker_ids == {2}
        # the new master in the old epoch: fenced by the epoch alone
        slave_in_old_epoch = group.call(0, slave.alter(1, SyncStateSet(frozenset({1, 2}), sync_state.epoch)))
        assert slave_in_old_epoch.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
        assert "master epoch 1" in slave_in_old_epoch.remark
    finally:
        group.close()


def test_malformed_requests_are_refused_with_a_remark_and_nothing_breaks(spawn, tmp_path, brokers):
    group = start_group(spawn, tmp_path)
    try:
        join_set(group, 0, brokers[:1])
        bad = [
            (RemotingCommand.request(RequestCode.CONTROLLER_GET_REPLICA_INFO), "brokerName"),
            (RemotingCommand.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                "clusterName": "c", "brokerName": "b", "appliedBrokerId": "one", "registerCheckCode": "x;1"}),
             "appliedBrokerId"),
            (RemotingCommand.request(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
                "brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "1"}, b"{not json"), "JSON"),
            (RemotingCommand.request(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
                "brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "1"}, b'{"syncStateSet": ["a"]}'),
             "syncStateSet"),
            (RemotingCommand.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=b"[1, 2]"), "broker names"),
            (RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, {**brokers[0].heartbeat().ext_fields,
                                                                  "brokerId": "x"}), "brokerId"),
        ]  # fmt: skip
        for request, named in bad:
            answer = group.call(0, request)
            assert answer.code == ResponseCode.CONTROLLER_INVALID_REQUEST, (request.code, answer.remark)
            assert named in answer.remark
        info, _ = replica_info(group, brokers[0])
        assert info.master_broker_id == 1
    finally:
        group.close()


def test_a_set_left_without_a_master_elects_once_a_broker_of_its_sync_state_set_is_alive_again(
    spawn, tmp_path, brokers
):
    """An election that found nobody alive in the sync state set leaves the set without a master; the
    leader's scan elects as soon as one of the set heart-beats again, without a broker asking (a
    running slave never asks: the set would stay without a master until a restart)."""
    group = start_group(spawn, tmp_path)
    try:
        master, slave, outsider = brokers
        first = join_set(group, 0, brokers)
        expect(group.call(0, master.alter(1, SyncStateSet(frozenset({1, 2}), first.sync_state_set_epoch))))

        # the slave falls silent first (the master and the outsider heart-beat past its timeout),
        # then the master: only the outsider, not in the set, is alive, and nobody may be elected
        until = time.monotonic() + 2 * HEARTBEAT_TIMEOUT_MS / 1000
        while time.monotonic() < until:
            for broker in (master, outsider):
                expect(group.call(0, broker.heartbeat()))
            time.sleep(0.1)
        assert replica_info(group, outsider)[0].master_epoch == 1
        nobody = wait_for_master(group, [outsider], epoch=2)
        assert not nobody.has_master

        again = wait_for_master(group, [slave, outsider], epoch=3)
        assert (again.master_broker_id, again.master_address) == (2, slave.address)
    finally:
        group.close()
