"""Controllers for the tests (docs/controller.md): a group of ``rmq-controller`` processes on free ports
(remoting and Raft; ``rmq.perf.procs.ControllerGroup``), and the requests a broker in controller
mode sends them, built by hand from ``rmq.protocol.controller`` rather than with the broker under
test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmq.net import RemotingCommand
from rmq.net.server import RemotingServer
from rmq.perf import procs
from rmq.perf.procs import LOOPBACK
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.controller import (
    APPLIED_BROKER_ID,
    BROKER_ADDRESS,
    BROKER_ID,
    BROKER_NAME,
    CLUSTER_NAME,
    DESIGNATE_ELECT,
    MASTER_BROKER_ID,
    MASTER_EPOCH,
    REGISTER_CHECK_CODE,
    BrokerHeartbeat,
    ReplicaInfo,
    SyncStateSet,
    encode_broker_names,
)

TIMEOUT = 5.0
# what the tests' controllers run with: a scan every 100 ms
FAST_CONTROLLER = {"scanNotActiveBrokerInterval": "100"}
# the heartbeat timeout the tests' brokers announce
HEARTBEAT_TIMEOUT_MS = 600
CLUSTER = "DefaultCluster"


class ControllerGroup(procs.ControllerGroup):
    """The one controller-group starter (``rmq.perf.procs``), its members scanning every 100 ms."""

    def __init__(self, spawn: Any, root: Path, size: int = 3, **settings: str):
        super().__init__(spawn, root, size, **{**FAST_CONTROLLER, **settings})


class Broker:
    """What one broker of a set sends a controller, by hand: its id, its address (the port of a
    server of its own, which records the NOTIFY_BROKER_ROLE_CHANGED it gets)."""

    def __init__(self, name: str = "broker-a", cluster: str = CLUSTER):
        self.name = name
        self.cluster = cluster
        self.notices: list[tuple[ReplicaInfo, SyncStateSet]] = []
        #: the NOTIFY_BROKER_ROLE_CHANGED requests themselves (their signature)
        self.notice_requests: list[RemotingCommand] = []
        self.server = RemotingServer(LOOPBACK, 0, name="rmq-test-broker")
        self.server.register_processor(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self._notified)
        self.server.start()
        self.address = f"{LOOPBACK}:{self.server.port}"
        self.broker_id = -1

    def _notified(self, channel: Any, request: RemotingCommand) -> None:
        self.notice_requests.append(request)
        self.notices.append((ReplicaInfo.from_fields(request.ext_fields), SyncStateSet.decode(request.body)))

    def close(self) -> None:
        self.server.shutdown()

    def apply_id(self, broker_id: int) -> RemotingCommand:
        self.broker_id = broker_id
        return RemotingCommand.request(
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            {
                CLUSTER_NAME: self.cluster,
                BROKER_NAME: self.name,
                APPLIED_BROKER_ID: str(broker_id),
                REGISTER_CHECK_CODE: f"{self.address};{broker_id}",
            },
        )

    def register(self) -> RemotingCommand:
        return RemotingCommand.request(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            {
                CLUSTER_NAME: self.cluster,
                BROKER_NAME: self.name,
                BROKER_ID: str(self.broker_id),
                BROKER_ADDRESS: self.address,
            },
        )

    def heartbeat(self, epoch: int = 0, max_offset: int = 0, timeout_ms: int = HEARTBEAT_TIMEOUT_MS) -> RemotingCommand:
        beat = BrokerHeartbeat(self.cluster, self.name, self.address, self.broker_id, epoch, max_offset, 0, timeout_ms)
        return RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, beat.fields())

    def elect(self, designate: bool = False) -> RemotingCommand:
        fields = {CLUSTER_NAME: self.cluster, BROKER_NAME: self.name, BROKER_ID: str(self.broker_id)}
        if designate:
            fields[DESIGNATE_ELECT] = "true"
        return RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER, fields)

    def alter(self, master_epoch: int, sync_state_set: SyncStateSet) -> RemotingCommand:
        return RemotingCommand.request(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            {BROKER_NAME: self.name, MASTER_BROKER_ID: str(self.broker_id), MASTER_EPOCH: str(master_epoch)},
            sync_state_set.encode(),
        )

    def replica_info(self) -> RemotingCommand:
        return RemotingCommand.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, {BROKER_NAME: self.name})


def expect(answer: RemotingCommand, code: int = ResponseCode.SUCCESS) -> RemotingCommand:
    assert answer.code == code, f"answered {answer.code} ({answer.remark}), expected {code}"
    return answer


def join_set(group: ControllerGroup, leader: int, brokers: list[Broker]) -> ReplicaInfo:
    """Each of ``brokers`` applies for the next id, registers and heartbeats; the first asks to be
    elected and becomes master; the set's replica info after that."""
    for number, broker in enumerate(brokers, start=1):
        expect(group.call(leader, broker.apply_id(number)))
        expect(group.call(leader, broker.register()))
        expect(group.call(leader, broker.heartbeat()))
    elected = expect(group.call(leader, brokers[0].elect()))
    return ReplicaInfo.from_fields(elected.ext_fields)


def sync_state_data_request(*broker_names: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=encode_broker_names(broker_names))
