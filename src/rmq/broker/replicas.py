"""A broker in controller mode (RocketMQ 5.x's ReplicasManager; docs/controller.md, "Requests"): the
controllers decide who of its broker set is master, this follows what they decided.

    start()        on the ``rmq-broker-replicas`` scheduler: find the controller leader
                   (CONTROLLER_GET_METADATA_INFO to each of controllerAddr), take this broker's id
                   (``<storePathRootDir>/controller.json``, else CONTROLLER_GET_NEXT_BROKER_ID and
                   CONTROLLER_APPLY_BROKER_ID), CONTROLLER_REGISTER_BROKER, CONTROLLER_ELECT_MASTER
                   when the set has no master, then take the role the answer names; retried every
                   RETRY_INTERVAL until it worked
    heartbeats     BROKER_HEARTBEAT to every controller each HEARTBEAT_INTERVAL, from the name-server
                   client's loop (never behind a slow request on the scheduler: a late heartbeat
                   would have a live master replaced)
    role changes   NOTIFY_BROKER_ROLE_CHANGED (the controller's push), CONTROLLER_GET_REPLICA_INFO
                   every syncBrokerMetadataPeriod (a lost notice delays a switch, never loses it):
                   a newer master epoch naming this broker -> ``become_master``; naming another ->
                   ``become_slave`` of it
    sync state set a master every checkSyncStateSetPeriod, and within a heartbeat of its in-sync
                   slaves changing: CONTROLLER_ALTER_SYNC_STATE_SET to what its HA service counts in
                   sync, then ``store.set_sync_state_set`` of what the controller committed. Refused
                   as fenced (or any answer naming a newer master epoch): it stops taking sends at
                   once and follows the newer master

Until the controllers name its role the broker takes no send (it starts as a slave with no master)
and registers with no name server; then it registers as master (brokerId 0, with its epoch) or as
a slave with the id the controllers gave it. Every state change runs on the scheduler thread.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rmq._files import backup_path, read_with_backup, write_file_atomically
from rmq._service import Scheduler
from rmq.broker.services import Identity, Store
from rmq.errors import ConfigError, RemotingError, ResponseError
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol import controller as wire
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import BadRequest

if TYPE_CHECKING:
    from rmq._service import PeriodicHandle
    from rmq.net.client import RemotingClient

log = logging.getLogger("rmq.broker")

# RocketMQ's brokerHeartbeatInterval (ms 1000); the controllers' timeout is controllerHeartBeatTimeoutMills
HEARTBEAT_INTERVAL = 1.0
# Between two tries of a start-up that did not get through (no leader, no answer); RocketMQ waits 5 s,
# which a set without a master would spend refusing every send.
RETRY_INTERVAL = 1.0
# RocketMQ's controller requests time out after 3 s (BrokerOuterAPI)
REQUEST_TIMEOUT = 3.0
CONTROLLER_FILE = "controller.json"
# A master's lease is this share of controllerHeartBeatTimeoutMills past its last heartbeat sent:
# the controllers replace it no sooner than the whole timeout after the last one they got, which
# left after it was sent; the rest is room for the two clocks' drift.
LEASE_SHARE = 0.9


def lease_clock() -> float:
    """The master lease's clock: CLOCK_BOOTTIME, which goes on while the process is stopped and
    while the machine is suspended (the controllers' clocks do), as the store's put path reads it."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


NO_MASTER = wire.ReplicaInfo(wire.NO_BROKER_ID, "", 0, 0)


class RoleChanges(Protocol):
    """What changes this broker's role (``rmq.broker.role.RoleSwitch``). ``become_slave`` gets the
    master's client address (the controllers know no HA address: ``ha_addr`` None, the HA address
    comes from a name server's answer naming that master); the broker's ``config.broker_id`` is
    already its controller id when it is called, the id a slave names to its master's HA port."""

    def become_master(self, epoch: int, sync_master: bool) -> object: ...
    def become_slave(self, master_addr: str, ha_addr: str | None, master_epoch: int) -> object: ...


class ReplicasServices(Identity, Store, Protocol):
    """The few parts of the broker the replicas manager uses (the controller passes itself)."""

    @property
    def namesrv_client(self) -> RemotingClient: ...
    @property
    def role(self) -> RoleChanges: ...
    def register_broker_all(self) -> object: ...


@dataclasses.dataclass
class BrokerIdentity:
    """``controller.json``: the id the controllers gave this broker, kept across restarts. ``applied``
    false: asked for with ``register_check_code`` and not yet confirmed (a crash in between asks
    again with the same code, which the controller takes as the same broker's retry)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str
    applied: bool

    def to_json(self) -> str:
        return json.dumps(
            {
                "clusterName": self.cluster_name,
                "brokerName": self.broker_name,
                "brokerId": self.broker_id,
                "registerCheckCode": self.register_check_code,
                "applied": self.applied,
            },
            indent=2,
        )

    @classmethod
    def parse(cls, text: str) -> BrokerIdentity:
        data = json.loads(text)
        return cls(
            str(data["clusterName"]),
            str(data["brokerName"]),
            int(data["brokerId"]),
            str(data["registerCheckCode"]),
            bool(data["applied"]),
        )


class NotLeader(RemotingError):
    """The controller asked is not (or no longer) the leader: find it again."""


class ReplicasManager:
    """Controller mode's broker side, for one broker."""

    def __init__(self, broker: ReplicasServices, store_root: str):
        self.broker = broker
        self.config = broker.config
        self.controller_addrs = broker.config.controller_addr_list
        self.identity_path = Path(store_root) / CONTROLLER_FILE
        # controllers with the cluster account take a broker's writes and heartbeats only signed by it
        self.credentials = broker.config.cluster_credentials()
        # and a broker takes the controllers' notices only signed by it: a forged one naming a made-up
        # master would have it demoted and cut its log to that master's
        self.notice_auth = broker.config.cluster_auth("broker", "rmq.broker")
        self._identity = self._load_identity()
        self.scheduler = Scheduler("rmq-broker-replicas")
        self.leader: str | None = None
        self.broker_id: int | None = None
        # what the controllers last told of this set (scheduler thread writes; others read)
        self.master_broker_id = wire.NO_BROKER_ID
        self.master_address = ""
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.role_decided = threading.Event()
        self._started = False
        self._heartbeats: PeriodicHandle | None = None
        self._check_asked = False
        # the master lease (docs/controller.md#fencing): when the last heartbeat left, and whether a
        # stall longer than the lease waits for the controllers to confirm this master
        self.lease_span = LEASE_SHARE * self.config.controller_heart_beat_timeout_mills / 1000
        self._last_beat = 0.0
        self._confirming = False
        self._newer_seen = False

    @property
    def is_master(self) -> bool:
        return self.broker_id is not None and self.master_broker_id == self.broker_id

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """After the broker started (serving, store open): runs on its own thread from here on."""
        self._started = True
        self.scheduler.start()
        self.scheduler.run_soon(self._start_up)
        self._heartbeats = self.broker.namesrv_client.loop.schedule_periodic(HEARTBEAT_INTERVAL, self.send_heartbeats)

    def shutdown(self) -> None:
        self._started = False
        if self._heartbeats is not None:
            self._heartbeats.cancel()
        self.scheduler.shutdown()

    def _start_up(self) -> None:
        if not self._started:
            return
        try:
            self.find_leader()
            self.broker_id = self.take_broker_id()
            info, sync_state_set = self.register()
            if not info.has_master:
                info, sync_state_set = self.elect()
        except (RemotingError, ResponseError, BadRequest) as e:
            log.warning(
                "broker %s at %s: cannot join the controllers %s yet (%s): trying again in %g s",
                self.config.broker_name,
                self.broker.broker_addr,
                ";".join(self.controller_addrs),
                e,
                RETRY_INTERVAL,
            )
            self.scheduler.call_later(RETRY_INTERVAL, self._start_up)
            return
        self.send_heartbeats()
        if not info.has_master:
            log.warning(
                "broker set %s has no master the controllers could elect (none of its sync state set is "
                "alive): asking again in %g s",
                self.config.broker_name,
                RETRY_INTERVAL,
            )
            self.scheduler.call_later(RETRY_INTERVAL, self._start_up)
            return
        self.apply(info, sync_state_set)
        config = self.config
        self.scheduler.schedule_periodic(config.sync_broker_metadata_period / 1000, self.sync_replica_info)
        self.scheduler.schedule_periodic(config.sync_controller_metadata_period / 1000, self._refresh_leader)
        self.scheduler.schedule_periodic(config.check_sync_state_set_period / 1000, self.check_sync_state_set)

    # -- the controllers ------------------------------------------------------------------------

    def find_leader(self) -> str:
        """Ask each controller which one leads (CONTROLLER_GET_METADATA_INFO); RemotingError when
        none knows one."""
        errors = []
        for addr in self.controller_addrs:
            try:
                response = self._client.invoke_sync(
                    addr, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO, {}), REQUEST_TIMEOUT
                )
            except RemotingError as e:
                errors.append(str(e))
                continue
            if response.code != ResponseCode.SUCCESS:
                errors.append(f"{addr} answered {response.code} {response.remark}")
                continue
            metadata = wire.ControllerMetadata.from_fields(response.ext_fields)
            if metadata.is_leader:
                if self.leader != addr:
                    log.info("controller leader of %s: %s", self.config.broker_name, addr)
                self.leader = addr
                return addr
            errors.append(f"{addr} is not the leader (it names {metadata.leader_address or 'none'})")
        self.leader = None
        raise RemotingError("no controller leader among " + ";".join(self.controller_addrs) + ": " + "; ".join(errors))

    def _refresh_leader(self) -> None:
        try:
            self.find_leader()
        except RemotingError as e:
            log.warning("%s", e)

    @property
    def _client(self) -> RemotingClient:
        return self.broker.namesrv_client

    def call(
        self, code: int, ext: dict[str, str], body: bytes = b"", accept: tuple[int, ...] = (ResponseCode.SUCCESS,)
    ) -> RemotingCommand:
        """A request to the controller leader (found again once when it moved); its answer if its
        code is in ``accept``, else ResponseError."""
        for attempt in (0, 1):
            leader = self.leader or self.find_leader()
            try:
                response = self._client.invoke_sync(leader, self._request(code, ext, body), REQUEST_TIMEOUT)
            except RemotingError:
                self.leader = None
                if attempt:
                    raise
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                self.leader = None
                if attempt:
                    raise NotLeader(f"controller {leader} is not the leader: {response.remark}")
                continue
            if response.code not in accept:
                raise ResponseError(response.code, response.remark, leader)
            return response
        raise AssertionError("unreachable")

    def _request(self, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
        ext = dict(ext)
        if self.credentials is not None:
            self.credentials.sign(ext, body)
        return RemotingCommand.request(code, ext, body)

    def _set(self) -> dict[str, str]:
        return {wire.CLUSTER_NAME: self.config.broker_cluster_name, wire.BROKER_NAME: self.config.broker_name}

    # -- this broker's id -----------------------------------------------------------------------

    def take_broker_id(self) -> int:
        """The id kept in controller.json, else one the controller gave (asked, applied, kept)."""
        identity = self._identity
        config = self.config
        if identity is not None and identity.applied:
            return identity.broker_id
        if identity is None:
            response = self.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, self._set())
            next_id = int(response.ext_fields[wire.NEXT_BROKER_ID])
            code = f"{self.broker.broker_addr};{int(time.time() * 1000)}"
            identity = BrokerIdentity(config.broker_cluster_name, config.broker_name, next_id, code, False)
            self._identity = identity
            # kept before the apply: a crash after the controller took it retries with the same code
            write_file_atomically(self.identity_path, identity.to_json())
        try:
            self.call(
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                {
                    **self._set(),
                    wire.APPLIED_BROKER_ID: str(identity.broker_id),
                    wire.REGISTER_CHECK_CODE: identity.register_check_code,
                },
            )
        except ResponseError:
            # another broker took that id first: ask for the next one at the next try
            for path in (self.identity_path, backup_path(self.identity_path)):
                path.unlink(missing_ok=True)
            self._identity = None
            raise
        identity.applied = True
        self._identity = identity
        write_file_atomically(self.identity_path, identity.to_json())
        log.info(
            "broker %s at %s: the controllers gave it broker id %d",
            config.broker_name,
            self.broker.broker_addr,
            identity.broker_id,
        )
        return identity.broker_id

    def _load_identity(self) -> BrokerIdentity | None:
        """controller.json as kept; ConfigError (the broker does not start) when it cannot be read
        or belongs to another broker set."""
        try:
            identity = read_with_backup(self.identity_path, BrokerIdentity.parse)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(
                f"cannot read {self.identity_path} (this broker's id from the controllers): {e}; fix it or remove "
                "it (and its .bak) to join under a new id"
            ) from None
        config = self.config
        if identity is not None and (identity.cluster_name, identity.broker_name) != (
            config.broker_cluster_name,
            config.broker_name,
        ):
            raise ConfigError(
                f"{self.identity_path} holds broker id {identity.broker_id} of {identity.cluster_name}/"
                f"{identity.broker_name}, and this broker is {config.broker_cluster_name}/{config.broker_name}: "
                "remove it (and its .bak) to join that set under a new id"
            )
        return identity

    # -- registration, election -----------------------------------------------------------------

    def register(self) -> tuple[wire.ReplicaInfo, wire.SyncStateSet]:
        response = self.call(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            {**self._set(), wire.BROKER_ID: str(self.broker_id), wire.BROKER_ADDRESS: self.broker.broker_addr},
        )
        return self._replica_answer(response)

    def elect(self) -> tuple[wire.ReplicaInfo, wire.SyncStateSet]:
        """CONTROLLER_ELECT_MASTER for this broker's set; the master it names (none when no alive
        broker could be elected: asked again later)."""
        response = self.call(
            RequestCode.CONTROLLER_ELECT_MASTER,
            {**self._set(), wire.BROKER_ID: str(self.broker_id), wire.DESIGNATE_ELECT: "false"},
            # another broker was elected meanwhile (its answer names it), or none could be
            accept=(
                ResponseCode.SUCCESS,
                ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
            ),
        )
        if response.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED:
            log.warning("broker set %s: %s", self.config.broker_name, response.remark)
            return NO_MASTER, wire.SyncStateSet(frozenset(), 0)
        return self._replica_answer(response)

    @staticmethod
    def _replica_answer(response: RemotingCommand) -> tuple[wire.ReplicaInfo, wire.SyncStateSet]:
        info = wire.ReplicaInfo.from_fields(response.ext_fields)
        body = body_bytes(response.body)
        sync_state_set = wire.SyncStateSet.decode(body) if body else wire.SyncStateSet(frozenset(), 0)
        return info, sync_state_set

    def send_heartbeats(self) -> None:
        """BROKER_HEARTBEAT to every controller (client loop thread); a master's lease runs on
        from each one, unless this broker stalled (stopped, paused, starved) for longer than the
        lease: then the controllers may have replaced it meanwhile, and it takes no send until they
        confirm it is still master. The answers name the set's master: a newer one fences this
        broker at once."""
        if self.broker_id is None or not self._started:
            return
        store = self.broker.store
        now = lease_clock()
        gap = now - self._last_beat if self._last_beat > 0 else 0.0
        self._last_beat = now
        if self.is_master:
            if gap > self.lease_span and not self._confirming:
                self._confirming = True
                log.warning(
                    "broker %s at %s stalled for %.1f s, longer than its master lease (%.1f s): taking no "
                    "send until the controllers confirm it is still master",
                    self.config.broker_name,
                    self.broker.broker_addr,
                    gap,
                    self.lease_span,
                )
                self.scheduler.run_soon(self.confirm_master)
            elif not self._confirming:
                store.set_master_lease(now + self.lease_span)
        max_offset = store.get_max_phy_offset()
        heartbeat = wire.BrokerHeartbeat(
            self.config.broker_cluster_name,
            self.config.broker_name,
            self.broker.broker_addr,
            self.broker_id,
            store.epoch,
            max_offset,
            max_offset,
            self.config.controller_heart_beat_timeout_mills,
            self.config.broker_election_priority,
        )
        for addr in self.controller_addrs:
            request = self._request(RequestCode.BROKER_HEARTBEAT, heartbeat.fields())
            self._client.invoke_callback(addr, request, REQUEST_TIMEOUT, self._on_heartbeat_answer)
        if self.is_master and self._in_sync() != self.sync_state_set and not self._check_asked:
            # a slave caught up or fell behind: tell the controllers now, not at the next period
            self._check_asked = True
            self.scheduler.run_soon(self.check_sync_state_set)

    def _on_heartbeat_answer(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        if error is not None or response is None or response.code != ResponseCode.SUCCESS:
            log.debug("heartbeat to a controller failed: %s", error or (response and response.remark))
            return
        try:
            info = wire.ReplicaInfo.from_fields(response.ext_fields or {})
        except BadRequest:
            return
        if not info.has_master or info.master_epoch <= self.master_epoch or self._newer_seen:
            return
        self._newer_seen = True
        if self.is_master and not self.broker.store.fenced:
            self.broker.store.fence()
            log.error(
                "broker %s at %s: a controller names %s master in epoch %d, newer than this master's %d: "
                "refusing every send, following it",
                self.config.broker_name,
                self.broker.broker_addr,
                info.master_address,
                info.master_epoch,
                self.master_epoch,
            )
        self.scheduler.run_soon(self.sync_replica_info)

    def confirm_master(self) -> None:
        """After a stall: ask the controllers who is master; still this broker in the same epoch ->
        the lease runs again from when it asked (scheduler thread)."""
        asked = lease_clock()
        epoch = self.master_epoch
        info = self.sync_replica_info()
        if not self.is_master:  # it followed a newer master meanwhile
            self._confirming = False
        elif info is not None and info.master_epoch == epoch and info.master_broker_id == self.broker_id:
            self.broker.store.set_master_lease(asked + self.lease_span)
            self._confirming = False
            log.warning(
                "broker %s at %s: the controllers confirm it is master of epoch %d: taking sends again",
                self.config.broker_name,
                self.broker.broker_addr,
                epoch,
            )
        else:  # no answer yet (no controller leader, say): ask again
            self.scheduler.call_later(RETRY_INTERVAL, self.confirm_master)

    # -- following the controllers' decisions ---------------------------------------------------

    def notice_refused(self, channel: Any, request: RemotingCommand) -> str | None:
        """Why a NOTIFY_BROKER_ROLE_CHANGED is not taken (not signed by the cluster account, when
        this broker has one), or None."""
        return None if self.notice_auth is None else self.notice_auth.check(channel, request).refused

    def on_role_changed(self, info: wire.ReplicaInfo, sync_state_set: wire.SyncStateSet) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (the server's loop thread): applied on the scheduler."""
        self.scheduler.run_soon(self.apply, info, sync_state_set)

    def sync_replica_info(self) -> wire.ReplicaInfo | None:
        """CONTROLLER_GET_REPLICA_INFO, applied (every syncBrokerMetadataPeriod): what the
        controllers answered, None without an answer."""
        try:
            response = self.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, {wire.BROKER_NAME: self.config.broker_name})
            info, sync_state_set = self._replica_answer(response)
        except (RemotingError, ResponseError, BadRequest) as e:
            log.warning("cannot ask the controllers for the master of %s: %s", self.config.broker_name, e)
            return None
        self.apply(info, sync_state_set)
        return info

    def apply(self, info: wire.ReplicaInfo, sync_state_set: wire.SyncStateSet) -> None:
        """Take the controllers' word on this set's master (scheduler thread). An older master
        epoch than the one followed is stale news (a notice overtaken by a poll): ignored."""
        if not info.has_master or info.master_epoch < self.master_epoch or self.broker_id is None:
            return
        store = self.broker.store
        newer = info.master_epoch > self.master_epoch or not self.role_decided.is_set()
        if newer:
            me = info.master_broker_id == self.broker_id
            log.warning(
                "broker %s (id %d) at %s: the controllers name %s (id %d) master in epoch %d: %s",
                self.config.broker_name,
                self.broker_id,
                self.broker.broker_addr,
                info.master_address,
                info.master_broker_id,
                info.master_epoch,
                "becoming master" if me else "following it as a slave",
            )
            followed = (self.master_broker_id, self.master_address, self.master_epoch)
            self.master_broker_id = info.master_broker_id
            self.master_address = info.master_address
            self.master_epoch = info.master_epoch
            self.sync_state_set_epoch = -1  # taken below, whatever its epoch
            self._newer_seen = False
            try:
                if me:
                    self.broker.role.become_master(info.master_epoch, True)
                    # elected just now: the controllers replace it no sooner than a heartbeat timeout
                    # after its next heartbeats stop
                    self._confirming = False
                    store.set_master_lease(lease_clock() + self.lease_span)
                else:
                    # registered as a slave under its own id from now on
                    self.config.broker_id = self.broker_id
                    self.broker.role.become_slave(info.master_address, None, info.master_epoch)
                    store.set_master_lease(0.0)
            except ValueError as e:
                # this store cannot take that role (its log holds a newer epoch than the controllers'
                # master epoch: it served another group of controllers); asked again at the next poll
                self.master_broker_id, self.master_address, self.master_epoch = followed
                log.error("broker %s cannot follow the controllers: %s", self.broker.broker_addr, e)
                return
            if store.fenced:
                store.unfence()
            if not self.role_decided.is_set():
                self.role_decided.set()
                # the role's own registration came before it counted as decided, and was skipped (a
                # broker registers nothing until then): without this one a first master would be
                # routed only at the next registerNameServerPeriod (30 s)
                self.broker.register_broker_all()
        if self.is_master and sync_state_set.epoch > self.sync_state_set_epoch:
            self._take_sync_state_set(sync_state_set)

    def _take_sync_state_set(self, sync_state_set: wire.SyncStateSet) -> None:
        self.sync_state_set = sync_state_set.broker_ids
        self.sync_state_set_epoch = sync_state_set.epoch
        self.broker.store.set_sync_state_set(sync_state_set.broker_ids)

    # -- the sync state set (a master) ----------------------------------------------------------

    def _in_sync(self) -> frozenset[int]:
        ha_service = self.broker.store.ha_service
        assert self.broker_id is not None
        slaves = ha_service.in_sync_slave_ids() if ha_service is not None else frozenset()
        return frozenset(slaves) | {self.broker_id}

    def check_sync_state_set(self) -> None:
        """A master: ask the controllers to make the sync state set what its HA service counts in
        sync (scheduler thread)."""
        self._check_asked = False
        if not self.is_master:
            return
        wanted = self._in_sync()
        if wanted == self.sync_state_set:
            return
        request = wire.SyncStateSet(wanted, self.sync_state_set_epoch)
        try:
            response = self.call(
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                {
                    wire.BROKER_NAME: self.config.broker_name,
                    wire.MASTER_BROKER_ID: str(self.broker_id),
                    wire.MASTER_EPOCH: str(self.master_epoch),
                },
                request.encode(),
            )
        except ResponseError as e:
            if e.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH:
                self.fenced(f"the controllers refused its sync state set as fenced: {e.remark}")
            elif e.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH:
                self.sync_replica_info()  # its view of the set is old: take the current one
            else:
                log.warning("the controllers refused sync state set %s: %s", sorted(wanted), e)
            return
        except RemotingError as e:
            log.warning("cannot ask the controllers to alter the sync state set: %s", e)
            return
        committed = wire.SyncStateSet.decode(body_bytes(response.body))
        log.info(
            "sync state set of %s: %s -> %s (epoch %d)",
            self.config.broker_name,
            sorted(self.sync_state_set),
            sorted(committed.broker_ids),
            committed.epoch,
        )
        self._take_sync_state_set(committed)

    def fenced(self, why: str) -> None:
        """A newer master exists: take no send from now on, then follow it."""
        store = self.broker.store
        if not store.fenced:
            store.fence()
        log.error(
            "broker %s (id %s) at %s is no longer master of epoch %d (%s): refusing every send, following the "
            "controllers' master",
            self.config.broker_name,
            self.broker_id,
            self.broker.broker_addr,
            self.master_epoch,
            why,
        )
        self.sync_replica_info()

    # -- the name servers -----------------------------------------------------------------------

    def follows(self, master_addr: str | None) -> bool:
        """Whether a name server's answer naming ``master_addr`` names the master the controllers
        chose (a slave takes its master's HA address only from such an answer: a paused old master
        still routed must not be replicated from)."""
        return bool(master_addr) and master_addr == self.master_address
