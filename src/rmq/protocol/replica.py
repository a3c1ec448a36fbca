"""Bodies of rmq's own replication requests (no RocketMQ counterpart), shared by broker and admin client.

    GET_COMMIT_LOG_DIGESTS (9100) {startOffset, endOffset, rangeSize} ->
        {"minOffset": m, "maxOffset": M, "rangeSize": r, "digests": [[offset, length, "xxh3-128 hex"], ...],
         "nextOffset": n}
        an admin request (ACL). One answer holds at most MAX_DIGESTS_PER_ANSWER ranges and begins no
        range once MAX_DIGEST_BYTES_PER_ANSWER bytes are hashed; when it stops short of endOffset it
        says where to ask on, nextOffset (the start of the next range; absent when the answer is whole).
    GET_EPOCH_TABLE (9102) {} ->
        {"epochs": [[epoch, startOffset], ...], "maxOffset": M}   the master's terms and CommitLog end
    PROMOTE_TO_MASTER (9103) {role: ASYNC_MASTER | SYNC_MASTER (optional)} ->
        extFields {epoch, startOffset}: the new term the promoted slave opened

A master also sends ``epoch`` (its current term) in REGISTER_BROKER's extFields (``REGISTER_EPOCH``):
an rmq name server refuses a master whose epoch is older than the routed master's, Apache's ignore it.
A broker in controller mode adds ``controllerMode`` = ``true`` (``REGISTER_CONTROLLER_MODE``).

    GET_HA_STATUS (9101) {} -> {"masterMaxOffset": M, "syncStateSet": [id, ...] | null,
        "slaves": [{"address": "ip:port", "connectedSince": ms, "ackedOffset": o, "lagBytes": n,
        "lagMs": n, "authenticated": b, "tls": b, "acksCount": b, "brokerId": id, "inSync": b,
        "inSyncStateSet": b}, ...]}
        what a master's HA service knows of each slave connection (``rmq.store.ha``); ackedOffset
        is -1 until the slave's first report; address is the slave's end of its HA connection;
        brokerId the id it named in the HA handshake (-1: none, outside controller mode); inSync:
        it held the whole CommitLog within haMaxTimeSlaveNotCatchup (what the master asks the
        controllers to make its sync state set); syncStateSet: the set the controllers committed
        (null: none given, no controllers), inSyncStateSet: the slave is a member of it.

Ranges are aligned on multiples of rangeSize from offset 0 (``rmq.store.digest``), so a master and
its slave cut the same ranges and a command compares them one by one.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rmq.protocol.java_json import COMPACT

DEFAULT_RANGE_SIZE = 64 << 20
# REGISTER_BROKER's extField with the registering master's epoch
REGISTER_EPOCH = "epoch"
# REGISTER_BROKER's extField of a broker in controller mode ("true"; docs/controller.md): its master's
# epoch comes from the controllers' Raft group, so an rmq name server lets a master of a newer one
# replace a live master of controller mode, when nothing can be signed (no cluster credentials)
REGISTER_CONTROLLER_MODE = "controllerMode"
# GET_BROKER_RUNTIME_INFO's key of a broker in controller mode: its controllerAddr (where
# ``rmq-admin broker promote`` asks for the election)
RUNTIME_CONTROLLER_ADDR = "controllerAddr"
# PROMOTE_TO_MASTER's request field (the role the slave takes) and answer fields
PROMOTE_ROLE = "role"
PROMOTED_EPOCH = "epoch"
PROMOTED_START_OFFSET = "startOffset"
# The most ranges one request may ask for (a 1 TiB log in 64 MiB ranges is 16,384).
MAX_RANGES = 65_536
# What one answer holds at most, so that each request is bounded work for the broker (a worker of
# its own hashes them one at a time) and a bounded answer: the ranges, and the bytes hashed past
# which no further range is begun (the first always is, whatever its size). The rest is asked for
# from nextOffset.
MAX_DIGESTS_PER_ANSWER = 1024
MAX_DIGEST_BYTES_PER_ANSWER = 256 << 20


@dataclasses.dataclass(frozen=True)
class RangeDigest:
    """The xxh3-128 of the CommitLog bytes ``[offset, offset + length)``."""

    offset: int
    length: int
    digest: str


@dataclasses.dataclass(frozen=True)
class CommitLogDigests:
    """One broker's answer: what its CommitLog holds, and the digests of the ranges asked for."""

    min_offset: int
    max_offset: int
    range_size: int
    digests: list[RangeDigest]
    #: where the ranges asked for go on, when this answer stopped short of them (None: it is whole)
    next_offset: int | None = None

    def encode(self) -> bytes:
        data: dict[str, Any] = {
            "minOffset": self.min_offset,
            "maxOffset": self.max_offset,
            "rangeSize": self.range_size,
            "digests": [[d.offset, d.length, d.digest] for d in self.digests],
        }
        if self.next_offset is not None:
            data["nextOffset"] = self.next_offset
        return json.dumps(data, separators=COMPACT).encode()

    @classmethod
    def decode(cls, body: bytes) -> CommitLogDigests:
        data: dict[str, Any] = json.loads(body)
        next_offset = data.get("nextOffset")
        return cls(
            int(data["minOffset"]),
            int(data["maxOffset"]),
            int(data["rangeSize"]),
            [RangeDigest(int(o), int(n), str(d)) for o, n, d in data["digests"]],
            None if next_offset is None else int(next_offset),
        )


@dataclasses.dataclass(frozen=True)
class EpochTable:
    """A master's answer to GET_EPOCH_TABLE: its terms, oldest first, as ``(epoch, startOffset)``
    pairs, and where its CommitLog ends."""

    epochs: list[tuple[int, int]]
    max_offset: int

    def encode(self) -> bytes:
        return json.dumps(
            {"epochs": [[e, o] for e, o in self.epochs], "maxOffset": self.max_offset}, separators=COMPACT
        ).encode()

    @classmethod
    def decode(cls, body: bytes) -> EpochTable:
        data: dict[str, Any] = json.loads(body)
        return cls([(int(e), int(o)) for e, o in data["epochs"]], int(data["maxOffset"]))


@dataclasses.dataclass(frozen=True)
class SlaveReplication:
    """One slave connection as its master sees it."""

    address: str
    connected_since: int  # ms since the epoch
    acked_offset: int  # -1 until its first report
    lag_bytes: int
    lag_ms: int
    authenticated: bool = False  # proved the cluster secret (clusterAccessKey/clusterSecretKey)
    tls: bool = False
    acks_count: bool = True  # its acks complete SYNC_MASTER sends (false: unauthenticated, permissive)
    broker_id: int = -1  # the id it named in the HA handshake (controller mode), -1: none
    in_sync: bool = False  # held the whole CommitLog within haMaxTimeSlaveNotCatchup
    in_sync_state_set: bool = False  # a member of the sync state set the controllers committed


@dataclasses.dataclass(frozen=True)
class HAStatus:
    """A master's answer to GET_HA_STATUS: its CommitLog's end, each connected slave, and the sync
    state set the controllers gave it (None: none, outside controller mode)."""

    master_max_offset: int
    slaves: list[SlaveReplication]
    sync_state_set: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        """The body's object (what ``rmq-admin broker ha-status --json`` prints too)."""
        return {
            "masterMaxOffset": self.master_max_offset,
            "syncStateSet": self.sync_state_set,
            "slaves": [
                {
                    "address": s.address,
                    "connectedSince": s.connected_since,
                    "ackedOffset": s.acked_offset,
                    "lagBytes": s.lag_bytes,
                    "lagMs": s.lag_ms,
                    "authenticated": s.authenticated,
                    "tls": s.tls,
                    "acksCount": s.acks_count,
                    "brokerId": s.broker_id,
                    "inSync": s.in_sync,
                    "inSyncStateSet": s.in_sync_state_set,
                }
                for s in self.slaves
            ],
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=COMPACT).encode()

    @classmethod
    def decode(cls, body: bytes) -> HAStatus:
        data: dict[str, Any] = json.loads(body)
        members = data.get("syncStateSet")  # absent from a master before controller mode
        return cls(
            int(data["masterMaxOffset"]),
            [
                SlaveReplication(
                    str(s["address"]),
                    int(s["connectedSince"]),
                    int(s["ackedOffset"]),
                    int(s["lagBytes"]),
                    int(s["lagMs"]),
                    # absent from a master before cluster authentication
                    bool(s.get("authenticated", False)),
                    bool(s.get("tls", False)),
                    bool(s.get("acksCount", True)),
                    int(s.get("brokerId", -1)),
                    bool(s.get("inSync", False)),
                    bool(s.get("inSyncStateSet", False)),
                )
                for s in data["slaves"]
            ],
            None if members is None else [int(m) for m in members],
        )
