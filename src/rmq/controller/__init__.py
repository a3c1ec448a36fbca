"""The controller: one member of the Raft group that decides each broker set's master (RocketMQ 5.x's
controller mode, docs/controller.md).

Embeddable: ``Controller(ControllerConfig(...)).start()`` runs it on its own remoting server (loop
thread ``rmq-controller-loop``); ``Controller(config, server=name_server.server)`` serves on a name
server's port instead (``rmq-namesrv`` with enableControllerInNamesrv). Either way the Raft member
ticks on ``rmq-controller-raft`` (docs/threads.md), and the leader's scan for masters whose
heartbeats stopped runs on the loop every scanNotActiveBrokerInterval; a broker whose connection
closes is taken for gone at once, and the leader elects if it was a master.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq.controller.config import ControllerConfig, ControllerSettings
from rmq.controller.heartbeat import BrokerLiveTable
from rmq.controller.processor import ControllerProcessor, elect_policy
from rmq.controller.raft import RaftService, ReplicatedState
from rmq.controller.replicas import Outcome
from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.net.loop import PeriodicHandle
from rmq.net.server import RemotingServer
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.controller import NO_BROKER_ID

log = logging.getLogger("rmq.controller")

__all__ = ["Controller", "ControllerConfig", "ControllerSettings"]


class Controller:
    """A running controller: the Raft member, the liveness table and the request handlers."""

    def __init__(self, config: ControllerConfig | None = None, server: RemotingServer | None = None):
        """``server``: serve on this (started or not) remoting server, which the caller owns, instead
        of one of the controller's own."""
        self.config = config or ControllerConfig()
        self.peers = self.config.peer_addresses()
        self._owns_server = server is None
        self.server = server or RemotingServer(
            self.config.listen_host,
            self.config.listen_port,
            name="rmq-controller-loop",
            tls=self.config.tls,
            limits=self.config.limits,
        )
        self.live = BrokerLiveTable()
        self.state: ReplicatedState | None = None
        self.raft: RaftService | None = None
        self.processor: ControllerProcessor | None = None
        # NOTIFY_BROKER_ROLE_CHANGED goes out on the server's loop: no thread of its own; signed by
        # the cluster account when there is one, so that a broker can tell a notice from a forgery
        self._client = RemotingClient(loop=self.server.loop, credentials=self.config.cluster_credentials)
        self._scan: PeriodicHandle | None = None
        self._electing: set[str] = set()
        self._address: str | None = None

    @property
    def address(self) -> str:
        """The remoting address brokers and tools reach this controller at (known once started)."""
        if self._address is None:
            raise RuntimeError("the controller is not started: call start() first")
        return self._address

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])

    def start(self) -> Controller:
        """Join the Raft group and serve; returns once the remoting port accepts connections."""
        if self._owns_server:
            self.server.start()
        host = self.server.host if self.server.host not in ("0.0.0.0", "") else "127.0.0.1"
        self._address = f"{host}:{self.server.port}"
        self_node = self.peers[self.config.self_id]
        others = [addr for member, addr in self.peers.items() if member != self.config.self_id]
        try:
            self.state = ReplicatedState(self_node, others, self.config.store_path, self._leadership_changed)
        except Exception:
            self._client.shutdown()
            if self._owns_server:
                self.server.shutdown()
            raise
        self.processor = ControllerProcessor(
            self.state,
            self.live,
            self_id=self.config.self_id,
            group=self.config.group,
            peers=self.peers,
            call_soon_threadsafe=self.server.call_soon_threadsafe,
            call_later=self.server.call_later,
            notify=self._notify,
            enable_elect_unclean_master=self.config.enable_elect_unclean_master,
            auth=self.config.cluster_auth,
        )
        for code, handler in self.processor.handlers.items():
            self.server.register_processor(code, handler)
        self.server.on_channel_closed(self._channel_closed)
        self._client.start()
        self.raft = RaftService(self.state, self.config.self_id, self._address)
        self.raft.start()
        self._scan = self.server.schedule_periodic(self.config.scan_not_active_broker_interval, self.scan)
        log.info(
            "controller %s of %s serving on %s, Raft on %s with %s",
            self.config.self_id,
            self.config.group,
            self._address,
            self_node,
            ", ".join(others) or "no other member",
        )
        return self

    def shutdown(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
        if self.raft is not None:
            self.raft.shutdown()
        self._client.shutdown()
        if self._owns_server:
            self.server.shutdown()
        log.info("controller %s stopped", self.config.self_id)

    def __enter__(self) -> Controller:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    # -- elections the leader starts ----------------------------------------------------------------

    def _leadership_changed(self, leader: bool) -> None:  # on the raft thread
        log.info("controller %s %s", self.config.self_id, "is the leader" if leader else "is no longer the leader")
        if leader:
            # a new leader looks at once: the master may have died with the old one
            self.server.call_soon_threadsafe(self.scan)

    def scan(self) -> None:
        """Loop thread: elect anew in every broker set whose master's heartbeats stopped while another
        of its brokers is alive (the leader only, once it has run long enough to judge)."""
        if self.live.may_judge():
            self._reelect_where_master_gone(None)

    def _channel_closed(self, channel: Any) -> None:
        """Loop thread: a connection closed; the brokers whose last word came over it are gone on
        every member (RocketMQ's onBrokerChannelClose), and the leader elects where one of them was
        master, without waiting for controllerHeartBeatTimeoutMills and the scan."""
        gone = self.live.on_channel_closed(channel)
        if not gone:
            return
        log.info(
            "controller %s: the connection of broker(s) %s closed: taken for gone",
            self.config.self_id,
            ", ".join(f"{name} id {broker_id}" for _, name, broker_id in gone),
        )
        self._reelect_where_master_gone({name for _, name, _ in gone})

    def _reelect_where_master_gone(self, among: set[str] | None) -> None:
        """The leader: elect in the broker sets (of ``among``, None: all) whose master is not alive
        while another of their brokers is."""
        state, processor = self.state, self.processor
        if state is None or processor is None or not state.is_leader:
            return
        with state.lock:
            names = state.replicas.sets_to_reelect(self.live.is_alive, self.config.enable_elect_unclean_master)
        for name in names:
            if (among is None or name in among) and name not in self._electing:
                self._electing.add(name)
                self._reelect(name, self.config.elect_master_max_retry_count)

    def _reelect(self, broker_name: str, tries: int) -> None:
        state, processor = self.state, self.processor
        assert state is not None and processor is not None
        with state.lock:
            found = state.replicas.get(broker_name)
            if found is None or not state.is_leader:
                self._electing.discard(broker_name)
                return
            seen_epoch, old = found.master_epoch, found.master_broker_id
            new_master = elect_policy(found, self.live, self.config.enable_elect_unclean_master, None)
        log.warning(
            "broker set %s: %s; electing %s in master epoch %d",
            broker_name,
            "no master" if old == NO_BROKER_ID else f"master {old} gone (silent, or its connection closed)",
            "nobody (no alive broker of its sync state set)" if new_master is None else new_master,
            seen_epoch + 1,
        )

        def done(outcome: Outcome) -> None:
            # only a change the group did not commit is tried again; a committed refusal (the set
            # moved on meanwhile) is the next scan's to look at
            if outcome.code == ResponseCode.SYSTEM_ERROR and tries > 1:
                log.warning("broker set %s: %s (%d tries left)", broker_name, outcome.remark, tries - 1)
                self._reelect(broker_name, tries - 1)
            else:
                self._electing.discard(broker_name)

        processor.elect(broker_name, seen_epoch, new_master, done)

    def _notify(self, broker_name: str) -> None:
        """Loop thread: NOTIFY_BROKER_ROLE_CHANGED to every alive broker of the set (oneway: brokers
        also poll GET_REPLICA_INFO, a lost notice only delays them)."""
        state = self.state
        if not self.config.notify_broker_role_changed or state is None:
            return
        with state.lock:  # the raft thread may add a broker meanwhile
            found = state.replicas.get(broker_name)
            if found is None or not found.replica_info().has_master:
                return
            fields, body = found.replica_info().fields(), found.sync_state().encode()
            cluster_name, brokers = found.cluster_name, list(found.brokers.items())
        for broker_id, (address, _) in brokers:
            if address and self.live.is_alive(cluster_name, broker_name, broker_id):
                request = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, dict(fields), body)
                try:
                    self._client.invoke_oneway(address, request)
                except Exception as e:  # an unreachable broker learns it from its next poll
                    log.info("could not notify %s of broker set %s's master: %s", address, broker_name, e)
