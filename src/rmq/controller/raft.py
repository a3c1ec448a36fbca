"""The controllers' Raft group, on PyPI ``pysyncobj`` (Raft in pure Python, with its own TCP transport,
a journal file and full dumps; docs/controller.md#the-controllers).

``ReplicatedState`` is the ``SyncObj``: its ``@replicated`` methods are appended to the Raft log by
the leader and run, in log order, on every member once a majority holds them; the caller's
callback gets the method's return value on the member that proposed it. ``RaftService`` drives it:
pysyncobj's own tick thread is off (``autoTick=False``: it would be an unnamed thread no shutdown
joins), and ``rmq-controller-raft`` ticks it instead, so the transport, the log, the applies and the
callbacks all run on that one thread.

On disk, under controllerStorePath: ``raft.journal`` (every log entry as it is received, before it
is acknowledged) and ``raft.dump`` (the state, written when the log is compacted); a restarted
member replays them and catches up from the leader.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjException, replicated  # type: ignore[import-untyped]

from rmq._service import ServiceThread
from rmq.controller.replicas import Outcome, ReplicasInfoManager
from rmq.errors import ConfigError
from rmq.protocol.controller import SyncStateSet

log = logging.getLogger("rmq.controller")

JOURNAL_FILE = "raft.journal"
DUMP_FILE = "raft.dump"
# Raft's timers, seconds (pysyncobj's names). A follower that hears no leader for a random time
# between the two election timeouts stands for election; the leader pings every APPEND_ENTRIES_PERIOD.
# pysyncobj's defaults, but for LEADER_FALLBACK_TIMEOUT (30 s there): a leader cut off from the
# majority steps down after it, so that it stops answering as leader from a stale state.
RAFT_MIN_TIMEOUT = 0.4
RAFT_MAX_TIMEOUT = 1.4
APPEND_ENTRIES_PERIOD = 0.1
LEADER_FALLBACK_TIMEOUT = 3.0
# A lost peer is dialled again this often (pysyncobj's 5 s would leave a restarted member out for that long).
CONNECTION_RETRY_TIME = 0.5
# The longest the raft thread waits for a socket event in one tick (a proposal wakes it at once).
TICK_WAIT = 0.05
# Binding the Raft port: tries and the pause between them before the controller gives up on start.
BIND_RETRIES = 10
BIND_RETRY_TIME = 0.1
# A member announces its remoting address again if the group has not taken it within this (the
# proposal may be lost with a leader that died holding it).
ANNOUNCE_RETRY = 2.0

_LEADER_STATE = 2  # pysyncobj's _RAFT_STATE.LEADER


def fail_reason(code: int) -> str:
    """pysyncobj's FAIL_REASON as words, for a remark."""
    names = {v: k for k, v in vars(FAIL_REASON).items() if k.isupper()}
    return names.get(code, str(code))


class ReplicatedState(SyncObj):
    """The replicated broker sets and each member's remoting address."""

    def __init__(
        self, self_node: str, other_nodes: list[str], store_path: str, on_leader: Callable[[bool], None]
    ) -> None:
        os.makedirs(store_path, exist_ok=True)
        # Attributes set before SyncObj.__init__ are pysyncobj's own (left out of its dump): the lock
        # must be, it cannot be pickled. It serialises the applies (raft thread) with the reads
        # (event loop thread).
        self.lock = threading.Lock()
        self._on_leader = on_leader
        conf = SyncObjConf(
            autoTick=False,
            # one entry a proposal, sent at once: a change is a broker's failover, not a throughput
            appendEntriesUseBatch=False,
            journalFile=os.path.join(store_path, JOURNAL_FILE),
            fullDumpFile=os.path.join(store_path, DUMP_FILE),
            # the dump is written by this thread: pysyncobj's default forks the process for it, and a
            # fork of a multi-threaded process is not safe
            useFork=False,
            raftMinTimeout=RAFT_MIN_TIMEOUT,
            raftMaxTimeout=RAFT_MAX_TIMEOUT,
            appendEntriesPeriod=APPEND_ENTRIES_PERIOD,
            leaderFallbackTimeout=LEADER_FALLBACK_TIMEOUT,
            connectionRetryTime=CONNECTION_RETRY_TIME,
            bindRetryTime=BIND_RETRY_TIME,
            maxBindRetries=BIND_RETRIES,
            onStateChanged=self._state_changed,
        )
        try:
            super().__init__(self_node, other_nodes, conf)
        except SyncObjException as e:
            raise ConfigError(
                f"cannot listen on this controller's Raft address {self_node} (controllerDLegerPeers): {e} "
                f"after {BIND_RETRIES} tries; is another process on that port?"
            ) from None
        self.replicas = ReplicasInfoManager()
        #: member id -> its remoting address ("host:port"), as each member announced it
        self.member_addresses: dict[str, str] = {}

    def _state_changed(self, old: int, new: int) -> None:
        if (old == _LEADER_STATE) != (new == _LEADER_STATE):
            self._on_leader(new == _LEADER_STATE)

    @property
    def leader_node(self) -> str | None:
        """The Raft address of the leader this member knows of (itself included), or None."""
        leader = self._getLeader()
        return None if leader is None else str(leader.id)

    @property
    def is_leader(self) -> bool:
        return bool(self._isLeader())

    # -- the log's entries: every member runs them in order ---------------------------------------

    @replicated
    def set_member_address(self, member_id: str, address: str) -> None:
        with self.lock:
            self.member_addresses[member_id] = address

    @replicated
    def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int, check_code: str) -> Outcome:
        with self.lock:
            return self.replicas.apply_broker_id(cluster_name, broker_name, broker_id, check_code)

    @replicated
    def update_broker_address(self, broker_name: str, broker_id: int, address: str) -> Outcome:
        with self.lock:
            return self.replicas.update_broker_address(broker_name, broker_id, address)

    @replicated
    def elect(self, broker_name: str, seen_master_epoch: int, new_master: int | None) -> Outcome:
        with self.lock:
            return self.replicas.elect(broker_name, seen_master_epoch, new_master)

    @replicated
    def alter_sync_state_set(
        self,
        broker_name: str,
        master_id: int,
        master_epoch: int,
        broker_ids: frozenset[int],
        set_epoch: int,
        alive_ids: frozenset[int],
    ) -> Outcome:
        with self.lock:
            return self.replicas.alter_sync_state_set(
                broker_name, master_id, master_epoch, SyncStateSet(broker_ids, set_epoch), alive_ids
            )


class RaftService(ServiceThread):
    """``rmq-controller-raft``: ticks the Raft member (transport, elections, log, applies, callbacks)
    and makes sure the group knows this member's remoting address."""

    def __init__(self, state: ReplicatedState, member_id: str, remoting_address: str) -> None:
        super().__init__("rmq-controller-raft")
        self.state = state
        self.member_id = member_id
        self.remoting_address = remoting_address
        self._announce_after = 0.0

    def run_once(self) -> None:
        self.state.doTick(TICK_WAIT)
        if time.monotonic() >= self._announce_after and self.state.leader_node is not None:
            with self.state.lock:
                known = self.state.member_addresses.get(self.member_id)
            if known != self.remoting_address:
                self._announce_after = time.monotonic() + ANNOUNCE_RETRY
                self.state.set_member_address(self.member_id, self.remoting_address, callback=self._announced)

    def _announced(self, result: Any, error: int) -> None:
        if error != FAIL_REASON.SUCCESS:
            self._announce_after = 0.0
            log.info("announcing this controller's address failed (%s): trying again", fail_reason(error))

    def on_shutdown(self) -> None:
        self.state._doDestroy()
