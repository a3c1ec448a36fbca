"""Controller mode's requests (docs/controller.md): RocketMQ 5.x's codes, header fields and bodies, shared
by the controller (rmq.controller), the broker in controller mode and the admin client.

A broker set is the brokers of one brokerName; the controllers (a Raft group) decide its master and
keep its **sync state set**: the broker ids whose logs hold everything the master acknowledged.

    broker -> a controller (the leader answers; a follower answers CONTROLLER_NOT_LEADER)
    CONTROLLER_GET_METADATA_INFO (1005) {} -> GetMetaDataHeader (which controller leads)
    CONTROLLER_GET_NEXT_BROKER_ID (1012) {clusterName, brokerName} -> {..., nextBrokerId}
    CONTROLLER_APPLY_BROKER_ID (1013) {clusterName, brokerName, appliedBrokerId, registerCheckCode}
        -> {clusterName, brokerName}; the check code (the broker's address and a time) makes a
        retried apply by the same broker succeed and another broker's fail
    CONTROLLER_REGISTER_BROKER (1003) {clusterName, brokerName, brokerId, brokerAddress}
        -> ReplicaInfoHeader + SyncStateSet body: the broker is alive at that address
    BROKER_HEARTBEAT (904) BrokerHeartbeatHeader -> {} (to every controller: each keeps liveness;
        the leader elects when a master's heartbeats stop for heartbeatTimeoutMills)
    CONTROLLER_ELECT_MASTER (1002) {clusterName, brokerName, brokerId, designateElect}
        -> ReplicaInfoHeader (+ syncStateSetEpoch) + SyncStateSet body; a broker asks when its set
        has no master; designateElect (an operator's promote) names the one to elect
    CONTROLLER_GET_REPLICA_INFO (1004) {brokerName} -> ReplicaInfoHeader + SyncStateSet body
    CONTROLLER_ALTER_SYNC_STATE_SET (1001) {brokerName, masterBrokerId, masterEpoch} + SyncStateSet
        -> {newSyncStateSetEpoch} + SyncStateSet: only the master of the current epoch may, with
        the current syncStateSetEpoch (else CONTROLLER_FENCED_MASTER_EPOCH /
        CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH): a fenced master cannot shrink the set to itself
    CONTROLLER_GET_SYNC_STATE_DATA (1006) body ["brokerName", ...] -> BrokerReplicasInfo body

    controller -> broker
    NOTIFY_BROKER_ROLE_CHANGED (1008) NotifyRoleChangedHeader + SyncStateSet body: a new master (or
        master epoch) for the broker's set; brokers also poll GET_REPLICA_INFO, so a lost notice
        delays a switch, never loses it

Broker ids in controller mode are the controller's (1, 2, ...; RocketMQ 5.x's, not 4.x's 0 for
the master): a broker keeps its id across restarts; the name servers still route the master as
brokerId 0 (``rmq.protocol.route.MASTER_ID``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from rmq.protocol.fields import BadRequest, bool_field, int_field, json_body, str_field
from rmq.protocol.java_json import COMPACT

# -- header field names (RocketMQ 5.x's) --------------------------------------------------------
CLUSTER_NAME = "clusterName"
BROKER_NAME = "brokerName"
BROKER_ID = "brokerId"
BROKER_ADDR = "brokerAddr"  # BROKER_HEARTBEAT's
BROKER_ADDRESS = "brokerAddress"  # CONTROLLER_REGISTER_BROKER's
NEXT_BROKER_ID = "nextBrokerId"
APPLIED_BROKER_ID = "appliedBrokerId"
REGISTER_CHECK_CODE = "registerCheckCode"
MASTER_BROKER_ID = "masterBrokerId"
MASTER_ADDRESS = "masterAddress"
MASTER_EPOCH = "masterEpoch"
SYNC_STATE_SET_EPOCH = "syncStateSetEpoch"
NEW_SYNC_STATE_SET_EPOCH = "newSyncStateSetEpoch"
DESIGNATE_ELECT = "designateElect"
INVOKE_TIME = "invokeTime"
EPOCH = "epoch"
MAX_OFFSET = "maxOffset"
CONFIRM_OFFSET = "confirmOffset"
HEARTBEAT_TIMEOUT_MILLIS = "heartbeatTimeoutMills"  # sic, RocketMQ's spelling
ELECTION_PRIORITY = "electionPriority"
# CONTROLLER_GET_METADATA_INFO's answer
GROUP = "group"
CONTROLLER_LEADER_ID = "controllerLeaderId"
CONTROLLER_LEADER_ADDRESS = "controllerLeaderAddress"
IS_LEADER = "isLeader"
PEERS = "peers"
# rmq's, beyond RocketMQ's GetMetaDataResponseHeader: the Raft term the answering controller is in
RAFT_TERM = "term"

# a heartbeat that does not say its timeout (RocketMQ's controllerHeartBeatTimeoutMills default)
HEARTBEAT_TIMEOUT_MILLIS_DEFAULT = 10_000

# no broker id yet / no master (RocketMQ's null Long, sent as absent; -1 where a number must stand)
NO_BROKER_ID = -1
# the first broker id a controller hands out in a new broker set
FIRST_BROKER_ID = 1


def _ids(value: Any, what: str) -> frozenset[int]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise BadRequest(f"{what} must be a list of broker ids, got {value!r}")
    return frozenset(value)


@dataclasses.dataclass(frozen=True)
class SyncStateSet:
    """The body ``{"syncStateSet": [ids], "syncStateSetEpoch": n}``: who holds every acked byte;
    its epoch grows with each change, so that a change made on an old view is refused."""

    broker_ids: frozenset[int]
    epoch: int

    def encode(self) -> bytes:
        return json.dumps(
            {"syncStateSet": sorted(self.broker_ids), "syncStateSetEpoch": self.epoch}, separators=COMPACT
        ).encode()

    @classmethod
    def decode(cls, body: Any) -> SyncStateSet:
        data = json_body(body)
        if not isinstance(data, dict):
            raise BadRequest("a SyncStateSet body must be a JSON object")
        epoch = data.get("syncStateSetEpoch", 0)
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            raise BadRequest(f"syncStateSetEpoch must be an integer, got {epoch!r}")
        return cls(_ids(data.get("syncStateSet", []), "syncStateSet"), epoch)


@dataclasses.dataclass(frozen=True)
class ReplicaInfo:
    """A broker set's master as the controllers decided it: the header fields of REGISTER_BROKER's,
    ELECT_MASTER's and GET_REPLICA_INFO's answers and of NOTIFY_BROKER_ROLE_CHANGED (no master:
    ``master_broker_id`` NO_BROKER_ID, ``master_address`` empty)."""

    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int

    def fields(self) -> dict[str, str]:
        out = {MASTER_EPOCH: str(self.master_epoch), SYNC_STATE_SET_EPOCH: str(self.sync_state_set_epoch)}
        if self.master_broker_id != NO_BROKER_ID:
            out[MASTER_BROKER_ID] = str(self.master_broker_id)
            out[MASTER_ADDRESS] = self.master_address
        return out

    @classmethod
    def from_fields(cls, ext: Mapping[str, str]) -> ReplicaInfo:
        return cls(
            int_field(ext, MASTER_BROKER_ID, NO_BROKER_ID),
            str_field(ext, MASTER_ADDRESS, ""),
            int_field(ext, MASTER_EPOCH, 0),
            int_field(ext, SYNC_STATE_SET_EPOCH, 0),
        )

    @property
    def has_master(self) -> bool:
        return self.master_broker_id != NO_BROKER_ID


@dataclasses.dataclass(frozen=True)
class BrokerHeartbeat:
    """BROKER_HEARTBEAT's header: what the controllers know of a live broker, and what an election
    weighs (the highest epoch, then the longest log, then the lowest electionPriority wins)."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int
    epoch: int
    max_offset: int
    confirm_offset: int
    heartbeat_timeout_millis: int
    election_priority: int = 0

    def fields(self) -> dict[str, str]:
        return {
            CLUSTER_NAME: self.cluster_name,
            BROKER_NAME: self.broker_name,
            BROKER_ADDR: self.broker_addr,
            BROKER_ID: str(self.broker_id),
            EPOCH: str(self.epoch),
            MAX_OFFSET: str(self.max_offset),
            CONFIRM_OFFSET: str(self.confirm_offset),
            HEARTBEAT_TIMEOUT_MILLIS: str(self.heartbeat_timeout_millis),
            ELECTION_PRIORITY: str(self.election_priority),
        }

    @classmethod
    def from_fields(cls, ext: Mapping[str, str], default_timeout_millis: int) -> BrokerHeartbeat:
        return cls(
            str_field(ext, CLUSTER_NAME),
            str_field(ext, BROKER_NAME),
            str_field(ext, BROKER_ADDR),
            int_field(ext, BROKER_ID),
            int_field(ext, EPOCH, 0),
            int_field(ext, MAX_OFFSET, 0),
            int_field(ext, CONFIRM_OFFSET, 0),
            int_field(ext, HEARTBEAT_TIMEOUT_MILLIS, default_timeout_millis),
            int_field(ext, ELECTION_PRIORITY, 0),
        )


@dataclasses.dataclass(frozen=True)
class ControllerMetadata:
    """CONTROLLER_GET_METADATA_INFO's answer: the Raft group, its leader (if any) and whether the
    answering controller is it. ``peers`` is controllerDLegerPeers' form, ``n0-host:port;...``."""

    group: str
    leader_id: str
    leader_address: str
    is_leader: bool
    peers: str
    #: the Raft term (rmq's field; -1 from a controller that does not send it)
    term: int = -1

    def fields(self) -> dict[str, str]:
        return {
            GROUP: self.group,
            CONTROLLER_LEADER_ID: self.leader_id,
            CONTROLLER_LEADER_ADDRESS: self.leader_address,
            IS_LEADER: "true" if self.is_leader else "false",
            PEERS: self.peers,
            RAFT_TERM: str(self.term),
        }

    @classmethod
    def from_fields(cls, ext: Mapping[str, str]) -> ControllerMetadata:
        return cls(
            str_field(ext, GROUP, ""),
            str_field(ext, CONTROLLER_LEADER_ID, ""),
            str_field(ext, CONTROLLER_LEADER_ADDRESS, ""),
            bool_field(ext, IS_LEADER),
            str_field(ext, PEERS, ""),
            int_field(ext, RAFT_TERM, -1),
        )


@dataclasses.dataclass(frozen=True)
class ReplicaIdentity:
    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "brokerAddress": self.broker_address,
            "alive": self.alive,
        }


@dataclasses.dataclass(frozen=True)
class ReplicasInfo:
    """One broker set in CONTROLLER_GET_SYNC_STATE_DATA's answer (BrokerReplicasInfo)."""

    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    in_sync: tuple[ReplicaIdentity, ...]
    not_in_sync: tuple[ReplicaIdentity, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "masterBrokerId": self.master_broker_id,
            "masterAddress": self.master_address,
            "masterEpoch": self.master_epoch,
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "inSyncReplicas": [r.to_json() for r in self.in_sync],
            "notInSyncReplicas": [r.to_json() for r in self.not_in_sync],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplicasInfo:
        def identities(key: str) -> tuple[ReplicaIdentity, ...]:
            return tuple(
                ReplicaIdentity(r["brokerName"], int(r["brokerId"]), r.get("brokerAddress") or "", bool(r.get("alive")))
                for r in data.get(key) or ()
            )

        return cls(
            NO_BROKER_ID if data.get("masterBrokerId") is None else int(data["masterBrokerId"]),
            data.get("masterAddress") or "",
            int(data.get("masterEpoch") or 0),
            int(data.get("syncStateSetEpoch") or 0),
            identities("inSyncReplicas"),
            identities("notInSyncReplicas"),
        )


def encode_replicas_infos(infos: Mapping[str, ReplicasInfo]) -> bytes:
    """BrokerReplicasInfo: ``{"replicasInfoTable": {brokerName: ReplicasInfo}}``."""
    return json.dumps(
        {"replicasInfoTable": {name: i.to_json() for name, i in infos.items()}}, separators=COMPACT
    ).encode()


def decode_replicas_infos(body: Any) -> dict[str, ReplicasInfo]:
    data = json_body(body)
    if not isinstance(data, dict) or not isinstance(data.get("replicasInfoTable", {}), dict):
        raise BadRequest('a BrokerReplicasInfo body must be {"replicasInfoTable": {...}}')
    return {name: ReplicasInfo.from_json(info) for name, info in data.get("replicasInfoTable", {}).items()}


def encode_broker_names(names: Iterable[str]) -> bytes:
    """CONTROLLER_GET_SYNC_STATE_DATA's request body: a JSON list of broker names."""
    return json.dumps(list(names), separators=COMPACT).encode()


def decode_broker_names(body: Any) -> list[str]:
    data = json_body(body)
    if not isinstance(data, list) or not all(isinstance(n, str) for n in data):
        raise BadRequest("the body must be a JSON list of broker names")
    return data


def parse_peers(peers: str) -> dict[str, str]:
    """controllerDLegerPeers ``n0-127.0.0.1:9878;n1-127.0.0.1:9868`` -> {"n0": "127.0.0.1:9878", ...}
    (ValueError naming the part that is not ``id-host:port``)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in peers.split(";"))):
        node_id, sep, addr = part.partition("-")
        host, colon, port = addr.rpartition(":")
        if not sep or not node_id or not colon or not host or not port.isdigit():
            raise ValueError(f"controller peer {part!r} is not id-host:port (as n0-127.0.0.1:9878)")
        if node_id in out:
            raise ValueError(f"controller peer id {node_id!r} appears twice in {peers!r}")
        out[node_id] = addr
    if not out:
        raise ValueError("no controller peers (controllerDLegerPeers, as n0-127.0.0.1:9878;n1-...)")
    return out
