"""Answers a controller's requests (docs/controller.md#requests), as RocketMQ 5.x's
ControllerRequestProcessor and ReplicasInfoManager do.

Every handler runs on the event loop thread. Metadata and heartbeats are answered by any member;
the rest only by the Raft leader (a follower answers CONTROLLER_NOT_LEADER naming the leader). A
change is proposed to the Raft log and answered from its callback once committed, never by
blocking the loop; a proposal not committed within COMMIT_TIMEOUT (no majority) is answered
SYSTEM_ERROR: it is not in effect then, though it stays in this leader's log and a majority back
may still commit it (Raft's rule), which is why every change a broker asks for is safe to
repeat. A header field or body that cannot be used is answered CONTROLLER_INVALID_REQUEST with a
remark naming it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rmq.controller.heartbeat import BrokerLiveTable
from rmq.controller.raft import FAIL_REASON, ReplicatedState, fail_reason
from rmq.controller.replicas import BrokerSet, Outcome
from rmq.errors import RequestRefused
from rmq.net.channel import Handler
from rmq.net.cluster_auth import ClusterAuth
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.controller import (
    APPLIED_BROKER_ID,
    BROKER_ADDRESS,
    BROKER_ID,
    BROKER_NAME,
    CLUSTER_NAME,
    DESIGNATE_ELECT,
    HEARTBEAT_TIMEOUT_MILLIS_DEFAULT,
    MASTER_BROKER_ID,
    MASTER_EPOCH,
    NO_BROKER_ID,
    REGISTER_CHECK_CODE,
    BrokerHeartbeat,
    ControllerMetadata,
    ReplicaInfo,
    SyncStateSet,
    decode_broker_names,
    encode_replicas_infos,
)
from rmq.protocol.fields import BadRequest, bool_field, int_field, str_field

log = logging.getLogger("rmq.controller")

# Seconds a proposed change may take to be committed before the request is answered with an error
# (a majority of the group is unreachable, or the leader changed under it); shorter than the 3 s a
# broker gives its controller requests (RocketMQ's), so that the broker reads why.
COMMIT_TIMEOUT = 2.0

#: the requests that change what the controllers decide, or feed an election: signed by the cluster
#: account when the controller has one (reads stay open)
WRITE_CODES = frozenset(
    {
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        RequestCode.CONTROLLER_REGISTER_BROKER,
        RequestCode.CONTROLLER_ELECT_MASTER,
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        RequestCode.BROKER_HEARTBEAT,
    }
)

Finish = Callable[[Outcome], None]


def elect_policy(
    broker_set: BrokerSet,
    live: BrokerLiveTable,
    unclean: bool,
    prefer: int | None,
) -> int | None:
    """RocketMQ's DefaultElectPolicy: among the alive brokers of the sync state set (then, with
    ``unclean``, of the whole set), the old master if it is alive and nobody is preferred, else the
    preferred one if it is there, else the highest epoch, the longest log, the lowest
    electionPriority, the lowest id. None: no candidate."""

    def alive(ids: frozenset[int] | set[int]) -> list[int]:
        return sorted(i for i in ids if live.is_alive(broker_set.cluster_name, broker_set.broker_name, i))

    pools = [broker_set.sync_state_set] + ([frozenset(broker_set.brokers)] if unclean else [])
    for pool in pools:
        candidates = alive(pool)
        if not candidates:
            continue
        old = broker_set.master_broker_id
        if old in candidates and (prefer is None or prefer == old):
            return old
        if prefer is not None:
            if prefer in candidates:
                return prefer
            continue

        def rank(broker_id: int) -> tuple[int, int, int, int]:
            hb = live.heartbeat(broker_set.cluster_name, broker_set.broker_name, broker_id)
            if hb is None:
                return (0, 0, 0, broker_id)
            return (-hb.epoch, -hb.max_offset, hb.election_priority, broker_id)

        return min(candidates, key=rank)
    return None


class _Reply:
    """One answer to a request answered later: the commit's callback or the timeout, whichever
    comes first (both on the loop thread)."""

    __slots__ = ("_done", "_deliver")

    def __init__(self, deliver: Finish) -> None:
        self._done = False
        self._deliver = deliver

    def __call__(self, outcome: Outcome) -> None:
        if not self._done:
            self._done = True
            self._deliver(outcome)


class ControllerProcessor:
    def __init__(
        self,
        state: ReplicatedState,
        live: BrokerLiveTable,
        *,
        self_id: str,
        group: str,
        peers: dict[str, str],
        call_soon_threadsafe: Callable[..., None],
        call_later: Callable[..., Any],
        notify: Callable[[str], None],
        enable_elect_unclean_master: bool = False,
        auth: ClusterAuth | None = None,
    ) -> None:
        """``peers``: member id -> Raft address; ``call_soon_threadsafe`` / ``call_later``: the event
        loop's; ``notify(broker_name)``: tell the set's alive brokers of its master (after a change)."""
        self.state = state
        self.live = live
        self.self_id = self_id
        self.group = group
        self.peers = peers
        self._member_by_raft_address = {addr: member for member, addr in peers.items()}
        self._call_soon_threadsafe = call_soon_threadsafe
        self._call_later = call_later
        self._notify = notify
        self.unclean = enable_elect_unclean_master
        self.auth = auth
        self.lock = state.lock
        handlers: dict[int, Callable[[Any, RemotingCommand], RemotingCommand | None]] = {
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata_info,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
        }
        self.handlers: dict[int, Handler] = {code: self._guarded(code, h) for code, h in handlers.items()}

    # -- the frame around every handler ----------------------------------------------------------

    def _guarded(self, code: int, handler: Callable[[Any, RemotingCommand], RemotingCommand | None]) -> Handler:
        leader_only = code not in (RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.BROKER_HEARTBEAT)

        def guarded(channel: Any, request: RemotingCommand) -> RemotingCommand | None:
            if self.auth is not None and code in WRITE_CODES:
                verdict = self.auth.check(channel, request)
                if verdict.refused is not None:
                    return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, remark=verdict.refused)
            if leader_only and not self.state.is_leader:
                return self._not_leader(request)
            try:
                return handler(channel, request)
            except BadRequest as e:
                raise RequestRefused(ResponseCode.CONTROLLER_INVALID_REQUEST, e.remark) from None

        return guarded

    def metadata(self) -> ControllerMetadata:
        leader_node = self.state.leader_node
        leader_id = self._member_by_raft_address.get(leader_node, "") if leader_node else ""
        with self.lock:
            leader_address = self.state.member_addresses.get(leader_id, "") if leader_id else ""
        return ControllerMetadata(
            self.group,
            leader_id,
            leader_address,
            self.state.is_leader,
            ";".join(f"{member}-{addr}" for member, addr in self.peers.items()),
            self.state.raftCurrentTerm,
        )

    def _not_leader(self, request: RemotingCommand) -> RemotingCommand:
        meta = self.metadata()
        if meta.leader_id:
            where = f"the leader is {meta.leader_id} at {meta.leader_address or '(address not known yet)'}"
        else:
            where = "the group has no leader now (an election is under way, or no majority is reachable)"
        return RemotingCommand.response_to(
            request,
            ResponseCode.CONTROLLER_NOT_LEADER,
            remark=f"controller {self.self_id} is not the leader of {self.group}: {where}",
            ext_fields=meta.fields(),
        )

    def _answer_later(self, channel: Any, request: RemotingCommand) -> Finish:
        def deliver(outcome: Outcome) -> None:
            channel.send_response(_response(request, outcome))

        return deliver

    def propose(self, method: Callable[..., Any], *args: Any, then: Finish) -> None:
        """Append ``method(*args)`` to the Raft log; ``then(outcome)`` on the loop thread once it is
        committed and applied here (its result), or once it failed or timed out (SYSTEM_ERROR)."""
        reply = _Reply(then)
        timer = self._call_later(
            COMMIT_TIMEOUT,
            reply,
            Outcome(
                ResponseCode.SYSTEM_ERROR,
                f"the controllers did not commit the change within {COMMIT_TIMEOUT:g} s (no majority of "
                f"{self.group} reachable?): it is not in effect; a majority back may still commit it, so "
                "ask again (what a broker asks is safe to repeat)",
            ),
        )

        def committed(result: Any, error: int) -> None:  # on the raft thread
            if error == FAIL_REASON.SUCCESS:
                outcome = result if isinstance(result, Outcome) else Outcome()
            else:
                outcome = Outcome(
                    ResponseCode.SYSTEM_ERROR,
                    f"the controllers did not commit the change ({fail_reason(error)}): try again",
                )
            self._call_soon_threadsafe(self._finish, reply, timer, outcome)

        method(*args, callback=committed)

    @staticmethod
    def _finish(reply: _Reply, timer: Any, outcome: Outcome) -> None:
        timer.cancel()
        reply(outcome)

    def _broker_set(self, broker_name: str) -> BrokerSet | None:
        return self.state.replicas.get(broker_name)

    # -- any member -------------------------------------------------------------------------------

    def get_metadata_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=self.metadata().fields())

    def broker_heartbeat(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        heartbeat = BrokerHeartbeat.from_fields(request.ext_fields, HEARTBEAT_TIMEOUT_MILLIS_DEFAULT)
        if heartbeat.heartbeat_timeout_millis <= 0:
            raise BadRequest(f"heartbeatTimeoutMills must be positive, got {heartbeat.heartbeat_timeout_millis}")
        self.live.on_heartbeat(heartbeat, channel)
        # the set's master as this member's committed state has it: a master that was paused learns
        # from its first heartbeat after waking that it was replaced (docs/controller.md#fencing)
        with self.lock:
            found = self._broker_set(heartbeat.broker_name)
            fields = found.replica_info().fields() if found is not None else {}
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=fields)

    # -- the leader's -----------------------------------------------------------------------------

    def get_next_broker_id(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        with self.lock:
            outcome = self.state.replicas.next_broker_id(str_field(ext, CLUSTER_NAME), str_field(ext, BROKER_NAME))
        return _response(request, outcome)

    def apply_broker_id(self, channel: Any, request: RemotingCommand) -> None:
        ext = request.ext_fields
        broker_id = int_field(ext, APPLIED_BROKER_ID)
        if broker_id < 1:
            raise BadRequest(f"header field 'appliedBrokerId' is {broker_id}, expected a broker id of at least 1")
        check_code = str_field(ext, REGISTER_CHECK_CODE)
        if not check_code.split(";")[0]:
            raise BadRequest(f"header field 'registerCheckCode' is {check_code!r}, expected 'address;time'")
        self.propose(
            self.state.apply_broker_id,
            str_field(ext, CLUSTER_NAME),
            str_field(ext, BROKER_NAME),
            broker_id,
            check_code,
            then=self._answer_later(channel, request),
        )
        return None

    def register_broker(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        ext = request.ext_fields
        cluster_name, broker_name = str_field(ext, CLUSTER_NAME), str_field(ext, BROKER_NAME)
        broker_id, address = int_field(ext, BROKER_ID), str_field(ext, BROKER_ADDRESS)
        with self.lock:
            found = self._broker_set(broker_name)
            known = found is not None and broker_id in found.brokers
            moved = known and found is not None and found.address(broker_id) != address
        if not known:
            return RemotingCommand.response_to(
                request,
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                remark=f"broker id {broker_id} of broker set {broker_name!r} is not registered: apply for it "
                "first (CONTROLLER_GET_NEXT_BROKER_ID, CONTROLLER_APPLY_BROKER_ID)",
            )
        # a registering broker is alive (its heartbeats follow), so that it may be elected at once
        self.live.on_register(cluster_name, broker_name, broker_id, address, channel)
        if not moved:
            return _response(request, self._registered(broker_name))
        deliver = self._answer_later(channel, request)

        def then(outcome: Outcome) -> None:
            deliver(self._registered(broker_name) if outcome.ok else outcome)

        self.propose(self.state.update_broker_address, broker_name, broker_id, address, then=then)
        return None

    def _registered(self, broker_name: str) -> Outcome:
        """REGISTER_BROKER's answer: the set's master only if it is alive (else the broker asks for an
        election), and its sync state set."""
        with self.lock:
            found = self._broker_set(broker_name)
            assert found is not None
            info = found.replica_info()
            body = found.sync_state().encode()
            cluster_name = found.cluster_name
        if info.has_master and not self.live.is_alive(cluster_name, broker_name, info.master_broker_id):
            info = ReplicaInfo(NO_BROKER_ID, "", info.master_epoch, info.sync_state_set_epoch)
        return Outcome(fields={CLUSTER_NAME: cluster_name, BROKER_NAME: broker_name, **info.fields()}, body=body)

    def elect_master(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        ext = request.ext_fields
        broker_name = str_field(ext, BROKER_NAME)
        broker_id = int_field(ext, BROKER_ID, NO_BROKER_ID)
        designate = bool_field(ext, DESIGNATE_ELECT)
        if designate and broker_id == NO_BROKER_ID:
            raise BadRequest("designateElect=true needs the brokerId to elect")
        with self.lock:
            found = self._broker_set(broker_name)
            if found is None:
                return RemotingCommand.response_to(
                    request,
                    ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                    remark=f"broker set {broker_name!r} is not registered",
                )
            if broker_id != NO_BROKER_ID and broker_id not in found.brokers:
                return RemotingCommand.response_to(
                    request,
                    ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                    remark=f"broker id {broker_id} of broker set {broker_name!r} is not registered "
                    f"(ids {sorted(found.brokers)})",
                )
            seen_epoch = found.master_epoch
            if seen_epoch == 0 and broker_id != NO_BROKER_ID:
                new_master: int | None = broker_id  # the set's first master: whoever asks first
            else:
                new_master = elect_policy(found, self.live, self.unclean, broker_id if designate else None)
            if new_master is not None and new_master == found.master_broker_id:
                return _response(
                    request,
                    found.replica_outcome(
                        ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                        f"broker {new_master} is still the alive master of {broker_name!r}: nothing to elect",
                    ),
                )
            if new_master is None:
                pool = "its brokers" if self.unclean else f"its sync state set {sorted(found.sync_state_set)}"
                wanted = f"broker {broker_id}" if designate else "a broker"
                return _response(
                    request,
                    found.replica_outcome(
                        ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                        f"cannot elect {wanted} of {broker_name!r}: no alive broker of {pool} fits",
                    ),
                )
        self.elect(broker_name, seen_epoch, new_master, self._answer_later(channel, request))
        return None

    def elect(self, broker_name: str, seen_epoch: int, new_master: int | None, then: Finish) -> None:
        """Propose the election, and tell the set's brokers once it is committed."""

        def elected(outcome: Outcome) -> None:
            if outcome.ok:
                log.info("broker set %s: master is now %s (%s)", broker_name, new_master, outcome.fields)
                self._notify(broker_name)
            then(outcome)

        self.propose(self.state.elect, broker_name, seen_epoch, new_master, then=elected)

    def get_replica_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        broker_name = str_field(request.ext_fields, BROKER_NAME)
        with self.lock:
            outcome = self.state.replicas.replica_info(broker_name)
        return _response(request, outcome)

    def alter_sync_state_set(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        ext = request.ext_fields
        broker_name = str_field(ext, BROKER_NAME)
        master_id, master_epoch = int_field(ext, MASTER_BROKER_ID), int_field(ext, MASTER_EPOCH)
        new_set = SyncStateSet.decode(body_bytes(request.body))
        with self.lock:
            found = self._broker_set(broker_name)
            cluster_name = found.cluster_name if found is not None else ""
            ids = list(found.brokers) if found is not None else []
        alive = frozenset(i for i in ids if self.live.is_alive(cluster_name, broker_name, i))
        self.propose(
            self.state.alter_sync_state_set,
            broker_name,
            master_id,
            master_epoch,
            new_set.broker_ids,
            new_set.epoch,
            alive,
            then=self._answer_later(channel, request),
        )
        return None

    def get_sync_state_data(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        names = decode_broker_names(body_bytes(request.body))
        with self.lock:
            infos = self.state.replicas.sync_state_data(names, self.live.is_alive)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=encode_replicas_infos(infos))


def _response(request: RemotingCommand, outcome: Outcome) -> RemotingCommand:
    return RemotingCommand.response_to(
        request, outcome.code, remark=outcome.remark, ext_fields=outcome.fields, body=outcome.body
    )
