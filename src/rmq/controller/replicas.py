"""The controllers' replicated state: each broker set's brokers, master, epochs and sync state set, as
RocketMQ 5.x's ReplicasInfoManager keeps them (docs/controller.md).

Every change is a method ``apply_*`` run in Raft log order on every member (``rmq.controller.raft``):
it checks the request against the state it finds then and either changes it or answers why not, so
a check and its change can never be interleaved with another change. What only the leader can know
(which brokers are alive, so which one to elect) is decided before the change is proposed and comes
in as an argument; the method checks that nothing it relied on (the master epoch) moved meanwhile.

Plain data only (dicts, ints, strings): pysyncobj pickles this object into its full dump.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from rmq.protocol.codes import ResponseCode
from rmq.protocol.controller import (
    APPLIED_BROKER_ID,
    BROKER_NAME,
    CLUSTER_NAME,
    FIRST_BROKER_ID,
    NEW_SYNC_STATE_SET_EPOCH,
    NEXT_BROKER_ID,
    NO_BROKER_ID,
    ReplicaIdentity,
    ReplicaInfo,
    ReplicasInfo,
    SyncStateSet,
)

#: is broker ``(cluster name, broker name, broker id)`` alive: the heartbeats this controller got
AlivePredicate = Callable[[str, str, int], bool]


@dataclasses.dataclass
class Outcome:
    """What a request is answered with: a response code, a remark, header fields and a body."""

    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    fields: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


def refused(code: int, remark: str) -> Outcome:
    return Outcome(code, remark)


@dataclasses.dataclass
class BrokerSet:
    """One broker set (the brokers of a brokerName) as the controllers decided it."""

    cluster_name: str
    broker_name: str
    #: broker id -> (address, register check code)
    brokers: dict[int, tuple[str, str]] = dataclasses.field(default_factory=dict)
    master_broker_id: int = NO_BROKER_ID
    #: 0 until the first master: RocketMQ's "first time for elect"
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def address(self, broker_id: int) -> str:
        entry = self.brokers.get(broker_id)
        return entry[0] if entry is not None else ""

    @property
    def next_broker_id(self) -> int:
        return max(self.brokers, default=FIRST_BROKER_ID - 1) + 1

    def replica_info(self) -> ReplicaInfo:
        return ReplicaInfo(
            self.master_broker_id, self.address(self.master_broker_id), self.master_epoch, self.sync_state_set_epoch
        )

    def sync_state(self) -> SyncStateSet:
        return SyncStateSet(self.sync_state_set, self.sync_state_set_epoch)

    def replica_outcome(self, code: int = ResponseCode.SUCCESS, remark: str | None = None) -> Outcome:
        """The set's master in the header fields and its sync state set as the body."""
        return Outcome(code, remark, self.replica_info().fields(), self.sync_state().encode())


class ReplicasInfoManager:
    """The broker sets, by broker name; the ``apply_*`` methods are the only writers."""

    def __init__(self) -> None:
        self.broker_sets: dict[str, BrokerSet] = {}

    # -- reads (the leader answers them from its own state) --------------------------------------

    def get(self, broker_name: str) -> BrokerSet | None:
        return self.broker_sets.get(broker_name)

    def next_broker_id(self, cluster_name: str, broker_name: str) -> Outcome:
        found = self.broker_sets.get(broker_name)
        next_id = FIRST_BROKER_ID if found is None else found.next_broker_id
        return Outcome(fields={CLUSTER_NAME: cluster_name, BROKER_NAME: broker_name, NEXT_BROKER_ID: str(next_id)})

    def replica_info(self, broker_name: str) -> Outcome:
        found = self.broker_sets.get(broker_name)
        if found is None:
            return refused(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"broker set {broker_name!r} is not registered"
            )
        return found.replica_outcome()

    def sync_state_data(self, broker_names: Iterable[str], alive: AlivePredicate) -> dict[str, ReplicasInfo]:
        out = {}
        for name in broker_names:
            found = self.broker_sets.get(name)
            if found is None:
                continue
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for broker_id, (address, _) in sorted(found.brokers.items()):
                identity = ReplicaIdentity(name, broker_id, address, alive(found.cluster_name, name, broker_id))
                (in_sync if broker_id in found.sync_state_set else not_in_sync).append(identity)
            out[name] = ReplicasInfo(
                found.master_broker_id,
                found.address(found.master_broker_id),
                found.master_epoch,
                found.sync_state_set_epoch,
                tuple(in_sync),
                tuple(not_in_sync),
            )
        return out

    def sets_to_reelect(self, alive: AlivePredicate, unclean: bool = False) -> list[str]:
        """Broker sets whose master is not alive while another of their brokers is (ReplicasInfoManager's
        scanNeedReelectBrokerSets), and sets left with no master by an election that found nobody
        once a broker it may elect is alive again (one of the sync state set; with ``unclean``, any):
        RocketMQ leaves those to a broker asking, which a running slave never does, so a set whose
        sync state set grew just after such an election would stay without a master. A set never
        elected is left to its brokers' own first ask, as RocketMQ does."""
        out = []
        for name, found in self.broker_sets.items():
            if found.master_broker_id == NO_BROKER_ID:
                if found.master_epoch == 0:
                    continue  # never elected: its brokers ask for the first election themselves
                pool = found.brokers if unclean else found.sync_state_set
                if any(alive(found.cluster_name, name, broker_id) for broker_id in pool):
                    out.append(name)
                continue
            if alive(found.cluster_name, name, found.master_broker_id):
                continue
            if any(alive(found.cluster_name, name, broker_id) for broker_id in found.brokers):
                out.append(name)
        return out

    # -- changes (run in log order on every member) -----------------------------------------------

    def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int, check_code: str) -> Outcome:
        """A broker takes ``broker_id``: free, or already its own (the same register check code)."""
        answer = Outcome(fields={CLUSTER_NAME: cluster_name, BROKER_NAME: broker_name})
        address = check_code.split(";")[0]
        found = self.broker_sets.get(broker_name)
        if found is None:
            if broker_id != FIRST_BROKER_ID:
                return refused(
                    ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                    f"broker set {broker_name!r} is not registered: its first broker applies for id "
                    f"{FIRST_BROKER_ID}, not {broker_id}",
                )
            found = self.broker_sets[broker_name] = BrokerSet(cluster_name, broker_name)
        elif broker_id in found.brokers and found.brokers[broker_id][1] != check_code:
            return refused(
                ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                f"broker id {broker_id} of broker set {broker_name!r} is taken by {found.address(broker_id)} "
                f"(register check code {found.brokers[broker_id][1]!r}); ask CONTROLLER_GET_NEXT_BROKER_ID again",
            )
        found.brokers[broker_id] = (address, check_code)
        answer.fields[APPLIED_BROKER_ID] = str(broker_id)
        return answer

    def update_broker_address(self, broker_name: str, broker_id: int, address: str) -> Outcome:
        found = self.broker_sets.get(broker_name)
        if found is None or broker_id not in found.brokers:
            return refused(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"broker id {broker_id} of broker set {broker_name!r} is not registered",
            )
        found.brokers[broker_id] = (address, found.brokers[broker_id][1])
        return Outcome()

    def elect(self, broker_name: str, seen_master_epoch: int, new_master: int | None) -> Outcome:
        """Make ``new_master`` the set's master in the next master epoch, its sync state set itself
        alone; ``None``: no candidate, the set has no master (the epoch moves on all the same, so the
        master that was fences itself on its next alter). Refused if an election happened since the
        leader chose ``new_master`` from the set at ``seen_master_epoch``."""
        found = self.broker_sets.get(broker_name)
        if found is None:
            return refused(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, f"broker set {broker_name!r} is not registered"
            )
        if found.master_epoch != seen_master_epoch:
            return found.replica_outcome(
                ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                f"broker set {broker_name!r} moved to master epoch {found.master_epoch} while electing on "
                f"epoch {seen_master_epoch}: ask again",
            )
        if new_master is not None and new_master not in found.brokers:
            return refused(
                ResponseCode.CONTROLLER_INVALID_REPLICAS,
                f"broker id {new_master} is not a broker of set {broker_name!r} (ids {sorted(found.brokers)})",
            )
        found.master_epoch += 1
        if new_master is None:
            found.master_broker_id = NO_BROKER_ID
            return found.replica_outcome(
                ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                f"the master of broker set {broker_name!r} is gone and no broker of its sync state set "
                f"{sorted(found.sync_state_set)} is alive to take over",
            )
        found.master_broker_id = new_master
        found.sync_state_set = frozenset({new_master})
        found.sync_state_set_epoch += 1
        return found.replica_outcome()

    def alter_sync_state_set(
        self, broker_name: str, master_id: int, master_epoch: int, new_set: SyncStateSet, alive_ids: frozenset[int]
    ) -> Outcome:
        """The master's new sync state set, taken only from the master of the current epoch on the
        current set epoch (RocketMQ's checks, in its order); ``alive_ids``: the set's brokers the
        leader saw alive when it proposed the change."""
        found = self.broker_sets.get(broker_name)
        if found is None:
            return refused(
                ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, f"broker set {broker_name!r} is not registered"
            )
        if new_set.broker_ids == found.sync_state_set:
            return refused(
                ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                f"the sync state set of {broker_name!r} is already {sorted(found.sync_state_set)}",
            )
        if found.master_broker_id == NO_BROKER_ID or found.master_broker_id != master_id:
            who = "none" if found.master_broker_id == NO_BROKER_ID else found.master_broker_id
            return refused(
                ResponseCode.CONTROLLER_INVALID_MASTER,
                f"broker {master_id} is not the master of {broker_name!r} (the master is {who}): only the "
                "master alters its sync state set",
            )
        if master_epoch != found.master_epoch:
            return refused(
                ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                f"master epoch {master_epoch} of {broker_name!r} is over: the current one is {found.master_epoch}",
            )
        if new_set.epoch != found.sync_state_set_epoch:
            return refused(
                ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                f"sync state set epoch {new_set.epoch} of {broker_name!r} is over: the current one is "
                f"{found.sync_state_set_epoch}",
            )
        for broker_id in sorted(new_set.broker_ids):
            if broker_id not in found.brokers:
                return refused(
                    ResponseCode.CONTROLLER_INVALID_REPLICAS,
                    f"broker id {broker_id} is not a broker of set {broker_name!r} (ids {sorted(found.brokers)})",
                )
            if broker_id not in alive_ids:
                return refused(
                    ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                    f"broker {broker_id} of {broker_name!r} is not alive (no heartbeat within its timeout)",
                )
        if found.master_broker_id not in new_set.broker_ids:
            return refused(
                ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                f"a sync state set of {broker_name!r} must hold its master {found.master_broker_id}",
            )
        found.sync_state_set = new_set.broker_ids
        found.sync_state_set_epoch += 1
        return Outcome(
            fields={NEW_SYNC_STATE_SET_EPOCH: str(found.sync_state_set_epoch)}, body=found.sync_state().encode()
        )
