"""A Raft group of three rmq-controller processes: one leader, followers that name it, a new leader
after a SIGKILL with the state intact, no change without a majority, the state back after all three
restart (docs/controller.md#the-controllers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq.perf.procs import wait_until
from rmq.protocol.codes import ResponseCode
from rmq.protocol.controller import ReplicaInfo, SyncStateSet, decode_replicas_infos
from tests.helpers.controllers import Broker, ControllerGroup, expect, join_set, sync_state_data_request


@pytest.fixture
def group(spawn, tmp_path: Path) -> Iterator[ControllerGroup]:
    g = ControllerGroup(spawn, tmp_path).start()
    try:
        yield g
    finally:
        g.close()


def replica_info(group: ControllerGroup, member: int, broker: Broker) -> tuple[ReplicaInfo, SyncStateSet]:
    answer = expect(group.call(member, broker.replica_info()))
    return ReplicaInfo.from_fields(answer.ext_fields), SyncStateSet.decode(answer.body)


def test_one_leader_is_elected_and_a_follower_names_it(group, brokers):
    leader = group.leader()
    follower = next(i for i in range(3) if i != leader)

    refused = group.call(follower, brokers[0].apply_id(1))

    assert refused.code == ResponseCode.CONTROLLER_NOT_LEADER
    assert group.addresses[leader] in refused.remark
    assert refused.ext_fields["controllerLeaderAddress"] == group.addresses[leader]
    assert [group.metadata(i).is_leader for i in range(3)].count(True) == 1


def test_a_killed_leader_is_replaced_and_the_state_survives(group, brokers):
    leader = group.leader()
    master = join_set(group, leader, brokers[:2])
    before = replica_info(group, leader, brokers[0])

    group.kill(leader)
    survivors = tuple(i for i in range(3) if i != leader)
    new_leader = group.leader(among=survivors)

    assert new_leader != leader
    assert replica_info(group, new_leader, brokers[0]) == before
    assert before[0].master_broker_id == master.master_broker_id == 1 and before[0].master_epoch == 1
    # the ids are the group's: 2 is still taken by the second broker
    taken = group.call(new_leader, brokers[2].apply_id(2))
    assert taken.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID


def test_with_two_of_three_gone_no_change_is_taken(group, brokers):
    leader = group.leader()
    join_set(group, leader, brokers[:1])
    for i in range(3):
        if i != leader:
            group.kill(i)

    answer = group.call(leader, brokers[1].apply_id(2))

    assert answer.code == ResponseCode.SYSTEM_ERROR and "did not commit" in answer.remark
    data = expect(group.call(leader, sync_state_data_request("broker-a")))
    (info,) = decode_replicas_infos(data.body).values()
    assert [r.broker_id for r in info.in_sync + info.not_in_sync] == [1]


def test_the_state_survives_a_restart_of_every_member(group, brokers):
    leader = group.leader()
    join_set(group, leader, brokers[:2])
    before = replica_info(group, leader, brokers[0])

    for i in range(3):
        group.stop(i)
    group.start()

    assert replica_info(group, group.leader(), brokers[0]) == before


def test_a_new_leader_elects_for_a_master_that_died_with_the_old_leader(group, brokers):
    leader = group.leader()
    master, slave = brokers[:2]
    first = join_set(group, leader, [master, slave])
    expect(group.call(leader, master.alter(1, SyncStateSet(frozenset({1, 2}), first.sync_state_set_epoch))))

    group.kill(leader)  # and the master falls silent with it
    survivors = tuple(i for i in range(3) if i != leader)

    def slave_elected() -> bool:
        for i in survivors:  # a broker heartbeats to every controller: each knows who is alive
            expect(group.call(i, slave.heartbeat()))
        answer = group.call(survivors[0], slave.replica_info())
        if answer.code != ResponseCode.SUCCESS:  # no leader yet, or another one
            answer = group.call(group.leader(among=survivors), slave.replica_info())
        info = ReplicaInfo.from_fields(answer.ext_fields)
        return info.master_broker_id == 2 and info.master_epoch == 2

    wait_until(slave_elected, 10.0, "the slave elected by the new leader", interval=0.1)
    wait_until(lambda: slave.notices[-1][0].master_broker_id == 2, 3.0, "the new master told it is master")
