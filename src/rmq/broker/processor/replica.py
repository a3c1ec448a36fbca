"""rmq's own requests about replication (no RocketMQ counterpart; codes from 9100, README protocol section):

GET_COMMIT_LOG_DIGESTS (9100) {startOffset, endOffset, rangeSize} -> CommitLogDigests
    the xxh3-128 of the CommitLog in rangeSize-aligned ranges (``rmq.store.digest``), for
    ``rmq-admin broker ha-verify``; an admin request under ACL. Hashed on a worker of its own
    (``rmq-broker-digest``), one request at a time, never on the event loop nor on the scheduler
    thread that registration and offset persistence need, and answered from there. Each answer is
    bounded (MAX_DIGESTS_PER_ANSWER, MAX_DIGEST_BYTES_PER_ANSWER) and says where to go on
    (nextOffset); past MAX_DIGESTS_WAITING requests waiting, one more is answered SYSTEM_BUSY, and a
    request whose connection closed while it waited is dropped unhashed.
GET_HA_STATUS (9101) {} -> HAStatus
    a master's HA service's view of each slave (connected since, acked offset, lag in bytes and
    ms, the broker id it named, whether it is in sync and in the sync state set the controllers
    committed), for ``rmq-admin broker ha-status``; a broker that is not a master refuses it.
GET_EPOCH_TABLE (9102) {} -> EpochTable
    this broker's master terms and CommitLog end: a slave asks its master before it replicates.
PROMOTE_TO_MASTER (9103) {role?} -> {epoch, startOffset}
    this slave becomes its broker name's master (``rmq.broker.role``), on the scheduler thread;
    answered once it registered as master. SYSTEM_ERROR when it is not a slave, or in controller
    mode (the controllers decide: ``rmq-admin broker promote`` asks them, ELECT_MASTER).
NOTIFY_BROKER_ROLE_CHANGED (1008) NotifyRoleChangedHeader + SyncStateSet -> {}
    a controller's notice of a new master (epoch) of this broker's set (``rmq.broker.replicas``,
    which applies it on its own thread); SYSTEM_ERROR when the broker is not in controller mode,
    NO_PERMISSION when it has the cluster account and the notice is not signed by it.
"""

from __future__ import annotations

import logging
import threading

from rmq.broker.config import BrokerRole
from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.services import ReplicaServices
from rmq.errors import RequestRefused
from rmq.net.channel import Channel
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.controller import ReplicaInfo, SyncStateSet
from rmq.protocol.fields import int_field, malformed
from rmq.protocol.replica import (
    MAX_DIGEST_BYTES_PER_ANSWER,
    MAX_DIGESTS_PER_ANSWER,
    MAX_RANGES,
    PROMOTE_ROLE,
    PROMOTED_EPOCH,
    PROMOTED_START_OFFSET,
    CommitLogDigests,
    EpochTable,
    HAStatus,
    SlaveReplication,
)
from rmq.store.digest import commit_log_digests, next_range

log = logging.getLogger("rmq.broker")

# Digest requests waiting for the worker, past which one more is refused SYSTEM_BUSY: ha-verify asks
# one at a time per broker, so a few is room enough and a flood of them holds nothing.
MAX_DIGESTS_WAITING = 4


class ReplicaProcessor(Processor[ReplicaServices]):
    def __init__(self, controller: ReplicaServices) -> None:
        super().__init__(controller)
        self._digests_waiting = 0
        self._digests_lock = threading.Lock()  # the loop adds, the worker takes away

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_COMMIT_LOG_DIGESTS: self.get_commit_log_digests,
            RequestCode.GET_HA_STATUS: self.get_ha_status,
            RequestCode.GET_EPOCH_TABLE: self.get_epoch_table,
            RequestCode.PROMOTE_TO_MASTER: self.promote_to_master,
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED: self.notify_broker_role_changed,
        }

    def get_ha_status(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        store = self.controller.store
        ha_service = store.ha_service
        if ha_service is None:
            config = self.controller.config
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"broker {config.broker_name} id {config.broker_id} is a {config.broker_role.value}, "
                "not a master: only a master tracks its slaves",
            )
        in_sync = ha_service.in_sync_slave_ids()
        members = ha_service.sync_state_set
        slaves = [
            SlaveReplication(
                s.address,
                int(s.connected_since * 1000),
                s.acked_offset,
                s.lag_bytes,
                s.lag_ms,
                s.authenticated,
                s.tls,
                s.acks_count,
                s.broker_id,
                s.broker_id >= 0 and s.broker_id in in_sync,
                members is not None and s.broker_id >= 0 and s.broker_id in members,
            )
            for s in ha_service.slaves()
        ]
        sync_state_set = None if members is None else sorted(members)
        return success(request, body=HAStatus(store.get_max_phy_offset(), slaves, sync_state_set).encode())

    def get_epoch_table(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        store = self.controller.store
        entries = store.epochs.entries if store.epochs is not None else []
        table = EpochTable([(e.epoch, e.start_offset) for e in entries], store.get_max_phy_offset())
        return success(request, body=table.encode())

    def promote_to_master(self, channel: Channel, request: RemotingCommand) -> None:
        if self.controller.replicas is not None:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"broker {self.controller.config.broker_name} at {self.controller.broker_addr} is in controller mode: "
                "the controllers elect its master; ask them (CONTROLLER_ELECT_MASTER with designateElect, "
                "rmq-admin broker promote does)",
            )
        text = request.ext_fields.get(PROMOTE_ROLE) or BrokerRole.ASYNC_MASTER.value
        if text not in (BrokerRole.ASYNC_MASTER.value, BrokerRole.SYNC_MASTER.value):
            raise malformed(PROMOTE_ROLE, text, "ASYNC_MASTER or SYNC_MASTER")
        self.controller.scheduler.run_soon(self._promote, channel, request, BrokerRole(text))
        return None

    def notify_broker_role_changed(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        replicas = self.controller.replicas
        if replicas is None:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"broker {self.controller.broker_addr} is not in controller mode (enableControllerMode=false): "
                "it takes no role from a controller",
            )
        refused = replicas.notice_refused(channel, request)
        if refused is not None:
            raise RequestRefused(ResponseCode.NO_PERMISSION, refused)
        info = ReplicaInfo.from_fields(request.ext_fields)
        body = body_bytes(request.body)
        replicas.on_role_changed(info, SyncStateSet.decode(body) if body else SyncStateSet(frozenset(), 0))
        return success(request)

    def _promote(self, channel: Channel, request: RemotingCommand, role: BrokerRole) -> None:
        try:
            entry = self.controller.role.promote(role)
        except Exception as e:
            if not isinstance(e, ValueError):  # ValueError: this broker cannot be promoted
                log.exception("promotion to %s failed", role.value)
            channel.send_response(RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=str(e)))
            return
        ext = {PROMOTED_EPOCH: str(entry.epoch), PROMOTED_START_OFFSET: str(entry.start_offset)}
        channel.send_response(success(request, ext_fields=ext))

    def get_commit_log_digests(self, channel: Channel, request: RemotingCommand) -> None:
        ext = request.ext_fields
        start = int_field(ext, "startOffset", 0)
        end = int_field(ext, "endOffset")
        range_size = int_field(ext, "rangeSize")
        if range_size <= 0:
            raise malformed("rangeSize", ext["rangeSize"], "a positive number of bytes")
        if start < 0 or end < start:
            raise malformed("endOffset", ext["endOffset"], f"an offset at or after startOffset {start}")
        if (end - start) // range_size >= MAX_RANGES:
            raise malformed("rangeSize", ext["rangeSize"], f"ranges few enough to cut [{start}, {end}) in {MAX_RANGES}")
        with self._digests_lock:
            if self._digests_waiting >= MAX_DIGESTS_WAITING:
                raise RequestRefused(
                    ResponseCode.SYSTEM_BUSY,
                    f"{self._digests_waiting} CommitLog digest requests are waiting already: "
                    "ask again once yours are answered",
                )
            self._digests_waiting += 1
        self.controller.digest_worker.run_soon(self._answer_digests, channel, request, start, end, range_size)
        return None

    def _answer_digests(self, channel: Channel, request: RemotingCommand, start: int, end: int, size: int) -> None:
        try:
            if channel.is_active:  # nobody to answer: nothing to hash
                self._hash_and_answer(channel, request, start, end, size)
        finally:
            with self._digests_lock:
                self._digests_waiting -= 1

    def _hash_and_answer(self, channel: Channel, request: RemotingCommand, start: int, end: int, size: int) -> None:
        store = self.controller.store
        try:
            max_offset = store.get_max_phy_offset()
            end = min(end, max_offset)  # what the answer says the log holds bounds what it covers
            digests = commit_log_digests(
                store, start, end, size, max_ranges=MAX_DIGESTS_PER_ANSWER, max_bytes=MAX_DIGEST_BYTES_PER_ANSWER
            )
            next_offset = next_range(digests, size)
            answer = CommitLogDigests(
                store.get_min_phy_offset(),
                max_offset,
                size,
                digests,
                next_offset if next_offset is not None and next_offset < end else None,
            )
        except Exception as e:
            log.exception("CommitLog digests [%d, %d) failed", start, end)
            channel.send_response(RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=str(e)))
            return
        channel.send_response(success(request, body=answer.encode()))
