"""Master -> slave replication of the CommitLog (RocketMQ's HAService, HAConnection and HAClient).

The wire format is ``rmq.protocol.ha``'s. Two sides, each on a thread of its own so that the
broker's client loop never waits for them:

    master: HAService, an EventLoop ``rmq-store-ha``       slave: HAClient, ``rmq-store-ha-client``
      accepts slaves on haListenPort                         connects to haMasterAddress (or the
      per slave (HAConnection): reads 8-byte reports,   <--  address the name server answered),
        the first one says where to start                    reports its max offset at connect,
      streams [startOffset][size][data] frames          -->  after every append and every
        zero-copy from the mapped CommitLog (views of         haSendHeartbeatInterval; appends each
        the mapping handed to sendmsg), heartbeats when       frame's bytes (StoreCore.append_replica,
        idle, drops slaves silent for                         which dispatches ConsumeQueues and the
        haHousekeepingInterval                                index); reconnects with backoff
      publishes the best ack into the group commit
        (StoreCore.group_commit.publish_replicated): the
        SYNC_MASTER sends waiting on it complete

A slave that breaks the protocol (an offset beyond the master's end, one that goes backwards or past
what it was sent, bytes that are not reports) is logged and disconnected; the master serves on.

Once a plain (not TLS) slave has sent its first report, the master's HA loop hands its socket to
the compiled stream (``rmq.store._ha_stream.HAStream``, thread ``rmq-store-ha-stream``): a C loop that
never takes the GIL reads its reports, sends its frames from the mappings and publishes its acks,
so that replicating costs the broker's loop no GIL hand-off per frame. The HA loop keeps the
handshakes, the TLS slaves, and the logging and closing of the slaves the stream gives up on.

With cluster credentials (``HASecurity``, clusterAccessKey/clusterSecretKey) master and slave prove
to each other that they hold the cluster secret before the master sends a CommitLog byte (the
HELLO / CHALLENGE / PROOF of ``rmq.protocol.ha``). clusterAuthMode enforcing: a slave that does not
is closed at once; permissive: it is served (an upgrade, slaves given the credentials one by one),
but only authenticated slaves' acks complete SYNC_MASTER sends, so a process that acks without
storing cannot make a send look replicated. Refusals are logged rate-limited (a stranger retrying
cannot flood the log). With tlsEnable the HA port speaks TLS with the broker's certificate
(tlsServerMode permissive: TLS and plain slaves, told apart by the first byte as on the client port;
enforcing: TLS only), and a slave with tlsEnable connects with TLS.
Past haMaxConnections connections, one more is closed as soon as it is accepted (logged, as the
client port's past serverMaxConnections: ``rmq.net.server.ConnectionRefusals``).
Both threads, what they may touch and who stops them: docs/threads.md.

Controller mode (docs/controller.md#the-sync-state-set): a slave names its broker id first
(SLAVE_ID); the master tells which named slaves held its whole CommitLog within
haMaxTimeSlaveNotCatchup (``HAService.in_sync_slave_ids``), and, given the sync state set
(``set_sync_state_set``), publishes into the group commit the ack its rule asks for
(``sync_state_set_rule``) instead of the best one: the stream computes it where the acks arrive,
with the acks of the slaves this loop serves handed to it by id.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import hmac
import logging
import os
import select
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from rmq._log import RateLimitedLog
from rmq._service import PeriodicHandle, ServiceThread
from rmq.errors import StoreError
from rmq.net.loop import EventLoop
from rmq.net.server import ConnectionRefusals, open_file_limit_connections, pause_accepting
from rmq.net.tls import TlsServerOptions, TlsSocket
from rmq.protocol import ha as wire
from rmq.protocol.acl import ClusterAuthMode, SessionCredentials
from rmq.protocol.tls import TLS_HANDSHAKE_RECORD, TlsMode
from rmq.store._group_commit import ReplicaRule
from rmq.store._ha_stream import Failure, HAStream

if TYPE_CHECKING:
    from rmq.store._commit_log import CommitLog
    from rmq.store._group_commit import GroupCommit
    from rmq.store.config import MessageStoreConfig
    from rmq.store.epoch import EpochEntry

# What a slave calls before replicating: its master's epoch table and CommitLog end (the broker asks
# the master with GET_EPOCH_TABLE). Raises when the master cannot be asked.
EpochSource = Callable[[], "tuple[list[EpochEntry], int]"]

log = logging.getLogger("rmq.store.ha")

BIND_ADDRESS = "0.0.0.0"
# How often the master looks for new CommitLog bytes (for the TLS slaves this loop serves; the
# compiled stream does the same for the plain ones, and an idle stream looks at least every
# NEW_DATA_POLL). SYNC_MASTER: a broker also tells it after every loop iteration that stored (a
# send waits for the slave). ASYNC_MASTER polls while bytes keep coming, so that a burst of
# iterations costs one wake-up of the HA thread (and one hand-off of the GIL the broker's loop
# needs), not one each. While polling it reads its slaves' reports on the polls rather than on each
# report's arrival (no send waits for them, and each arrival would be one more wake-up). After
# ASYNC_IDLE_POLLS polls in a row found no new bytes and every slave caught up, it is idle: no
# polls; the slaves' reports wake it, and the store's next put (whichever thread makes it: a send,
# a delayed or timed message's re-put) writes its eventfd once (``StoreCore.wake_ha_on_next_put``).
# RocketMQ's WriteSocketService waits up to 100 ms.
NEW_DATA_POLL = 0.1
ASYNC_NEW_DATA_POLL = 0.002
ASYNC_IDLE_POLLS = 25
# One wake-up of a connection sends at most this much before it lets the loop serve the others.
MAX_BYTES_PER_WAKEUP = 1 << 20
# Frames a master hands to one sendmsg when a slave is behind.
FRAMES_PER_SEND = 16
# Offset/time samples kept to tell how many ms a slave lags (oldest dropped first).
LAG_SAMPLES = 4096
# Slave: the socket timeout (how soon a shutdown is noticed) and the reconnect backoff.
SLAVE_POLL = 0.2
# Bytes a slave reads at once (frames come back to back when it is behind).
READ_BUFFER = 1 << 20
RECONNECT_MIN = 0.1
RECONNECT_MAX = 5.0
# Failed fetches of the master's epoch table in a row before the slave logs a warning (the backoff
# makes that ~10 s).
EPOCH_FAILURES_LOGGED = 8


@dataclasses.dataclass(frozen=True)
class HASecurity:
    """What the HA port and a slave's connection to it authenticate and encrypt with (the broker
    builds it from its settings: ``BrokerConfig.ha_security``). The default: neither, as 4.x."""

    credentials: SessionCredentials | None = None  # clusterAccessKey / clusterSecretKey
    mode: ClusterAuthMode = ClusterAuthMode.ENFORCING  # clusterAuthMode
    server_tls: TlsServerOptions | None = None  # a master's HA port (tlsEnable)
    client_tls: ssl.SSLContext | None = None  # a slave's connection to its master (tlsEnable)

    @property
    def enforcing(self) -> bool:
        return self.mode is ClusterAuthMode.ENFORCING


@dataclasses.dataclass
class SlaveStatus:
    """What the master knows of one slave connection."""

    address: str
    connected_since: float  # time.time()
    acked_offset: int  # -1 until its first report
    lag_bytes: int
    lag_ms: int
    authenticated: bool = False  # proved the cluster secret
    tls: bool = False
    # authenticated, or the master has no credentials: its acks complete SYNC_MASTER sends
    acks_count: bool = True
    broker_id: int = -1  # the id it named (controller mode), -1: none


class Phase(enum.Enum):
    """Where a slave's connection is before it replicates."""

    SNIFFING = "sniffing"  # TLS served: waiting for the first byte (a TLS handshake or not)
    OPENING = "opening"  # waiting for a HELLO or a first report (after the TLS handshake, if any)
    PROVING = "proving"  # CHALLENGE sent: waiting for the slave's PROOF
    REPLICATING = "replicating"  # reports in, frames out


class CatchUp:
    """When a slave last held everything its master's CommitLog held (RocketMQ 5.x's
    lastCaughtUpTime), for the slaves the HA loop serves; ``_ha_stream.track_catch_up`` is the
    compiled stream's twin. An ack of the end seen now proves it for now; one of the end a pending
    check saw proves it for then (under steady puts the end moves on before each ack comes back,
    so the check, not the end, is what a slave that keeps up reaches)."""

    __slots__ = ("caught_up_ns", "check_end", "check_ns")

    def __init__(self) -> None:
        self.caught_up_ns = 0  # time.monotonic_ns(); 0: never
        self.check_end = 0
        self.check_ns = 0  # 0: no check pending

    def track(self, acked: int, end: int, now_ns: int) -> None:
        """After the slave's reports were read, ``end`` the CommitLog's end now."""
        if acked >= end:
            self.caught_up_ns, self.check_ns = now_ns, 0
            return
        if self.check_ns and acked >= self.check_end:
            self.caught_up_ns = max(self.caught_up_ns, self.check_ns)
            self.check_ns = 0
        if not self.check_ns:
            self.check_end, self.check_ns = end, now_ns

    def in_sync(self, acked: int, end: int, now_ns: int, window_ns: int) -> bool:
        """It holds everything now, or did within the last ``window_ns``."""
        if self.check_ns and acked >= self.check_end:
            self.caught_up_ns = max(self.caught_up_ns, self.check_ns)
        return acked >= end or (self.caught_up_ns > 0 and now_ns - self.caught_up_ns <= window_ns)


class HAConnection:
    """One slave's connection on the master (runs on the HA loop only)."""

    def __init__(self, service: HAService, sock: socket.socket, address: str):
        self.service = service
        self.sock = sock
        self.fd = sock.fileno()
        self.address = address
        self.connected_since = time.time()
        self.acked = -1  # the slave's last report
        self.next_offset = -1  # where the next frame starts (set by the first report)
        self.broker_id = -1  # the id the slave named (controller mode's SLAVE_ID), -1: none
        self.catch_up = CatchUp()
        self.accepted_at = self.last_read = self.last_write = time.monotonic()
        self._inbuf = bytearray()
        self._out: collections.deque = collections.deque()  # buffers not yet sent (views of the mapping)
        self._want_write = False
        self._events = select.EPOLLIN  # what the loop watches: reports (EPOLLIN), room to send (EPOLLOUT)
        self.closed = False
        security = service.security
        self.phase = Phase.SNIFFING if security.server_tls is not None else Phase.OPENING
        self._tls: TlsSocket | None = None
        self.authenticated = False
        self._nonce = self._slave_nonce = b""  # of the CHALLENGE and of the HELLO
        # replicating over plain TCP: served by the compiled stream (HAService.stream), not this loop
        self.streamed = False

    @property
    def acks_count(self) -> bool:
        """With credentials on the master, only a slave that proved them completes SYNC_MASTER sends."""
        return self.authenticated or self.service.security.credentials is None

    @property
    def host(self) -> str:
        return self.address.rpartition(":")[0]

    def refuse(self, kind: str, reason: str) -> None:
        """Close for a reason a stranger can repeat at will: logged rate-limited per kind and host."""
        self.service.refusal_log.warning((kind, self.host), "slave %s refused: %s", self.address, reason)
        self.close(reason, logged=True)

    # -- reading reports --------------------------------------------------------------------------

    def on_events(self, events: int) -> None:
        if self.streamed:
            return  # an event of the batch that handed it over: the stream reads it from now on
        if events & (select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP):
            if self._read():
                self.transfer()
                return
        if not self.closed and events & select.EPOLLOUT:
            if self.phase is Phase.REPLICATING:
                self.transfer()
            elif not self._out or self._send() >= 0:  # the CHALLENGE, or a TLS handshake's records
                self._push_tls()

    def read_reports(self) -> None:
        """ASYNC_MASTER: take the reports that came since the last poll (the socket is not watched
        for them once the first one arrived)."""
        if not self.closed and not self.streamed:
            self._read()

    def caught_up(self, end: int) -> bool:
        """Nothing left to send up to the CommitLog's ``end`` (or not started yet)."""
        if self.closed or self.next_offset < 0 or self.streamed:
            return True
        return not self._out and not self._cipher_pending() and self.next_offset >= end

    def _read(self) -> bool:
        """Take the reports there are: whether there was a whole one (and the connection is open)."""
        if self.phase is Phase.SNIFFING and not self._sniff():
            return False
        try:
            data = self.sock.recv(4096)
        except BlockingIOError:
            self._push_tls()  # a handshake step may have answers to send
            return False
        except OSError as e:  # ssl.SSLError included: a failed TLS handshake
            if self._tls is not None and not self._tls.handshake_done:
                self.refuse("tls", f"TLS handshake failed: {e}")
            else:
                self.close(f"read failed: {e}")
            return False
        if not data:
            self.close("it closed the connection")
            return False
        self.last_read = time.monotonic()
        self._inbuf += data
        if self.phase is not Phase.REPLICATING and not self._open():
            return False
        whole = len(self._inbuf) - len(self._inbuf) % wire.REPORT_SIZE
        if whole == 0:
            return False
        started = self.next_offset >= 0
        # only the newest report matters: each one is the slave's whole state
        for position in range(0, whole, wire.REPORT_SIZE):
            if not self._on_report(wire.decode_report(self._inbuf, position)):
                return False
        del self._inbuf[:whole]
        self.catch_up.track(self.acked, self.service.store.commit_log.get_max_offset(), time.monotonic_ns())
        if self._tls is None and not self._out:
            # plain TCP, nothing of this loop's left to send: the stream takes it from here
            self._hand_to_stream()
            return False
        if not started:
            self.service.serving_started()
        if self.service.sync:
            self.service.publish_acks()
        elif self._events & select.EPOLLIN:
            self.update_events()  # ASYNC_MASTER, replicating: reports may be read on polls from now on
        return True

    def _hand_to_stream(self) -> None:
        service = self.service
        service.loop.remove_handler(self.fd)
        try:
            service.stream.add(
                self.fd,
                self.next_offset,
                self.acked,
                self.acks_count,
                bytes(self._inbuf),
                self.broker_id,
                self.catch_up.caught_up_ns,
            )
        except OSError as e:
            self.streamed = True  # not on the loop any more
            self.close(f"cannot stream to it: {e}")
            return
        self.streamed = True
        self._inbuf.clear()
        service.connection_streamed()

    # -- before replicating: TLS, authentication -------------------------------------------------

    def _sniff(self) -> bool:
        """TLS served: a first byte 0x16 (a ClientHello) starts TLS; any other is a plain slave's,
        refused by an enforcing port. False while it has not come (or the connection was closed)."""
        try:
            first = self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except OSError:
            first = b""  # the read that follows meets the error
        options = self.service.security.server_tls
        assert options is not None
        if first and first[0] == TLS_HANDSHAKE_RECORD:
            self._tls = TlsSocket.wrap(self.sock, options.context, server_side=True)
            self.sock = self._tls  # type: ignore[assignment]
        elif first and options.mode is TlsMode.ENFORCING:
            self.refuse("plain", "a plain connection: this HA port takes TLS only (tlsServerMode enforcing)")
            return False
        self.phase = Phase.OPENING
        return True

    def _open(self) -> bool:
        """Take the HELLO and PROOF there are in what was read; True once the connection replicates
        (what is left of the input is reports), False while it waits or once it is closed."""
        security = self.service.security
        credentials = security.credentials
        inbuf = self._inbuf
        if self.phase is Phase.OPENING:
            if len(inbuf) < wire.REPORT_SIZE:
                return False
            if self.broker_id < 0 and wire.is_slave_id(inbuf):
                # controller mode: the slave names its broker id first
                if len(inbuf) < wire.SLAVE_ID_SIZE:
                    return False
                try:
                    self.broker_id = wire.decode_slave_id(inbuf)
                except ValueError as e:
                    self.refuse("slave-id", f"a malformed SLAVE_ID: {e}")
                    return False
                del inbuf[: wire.SLAVE_ID_SIZE]
                log.info("slave %s is broker %d of this set", self.address, self.broker_id)
                if len(inbuf) < wire.REPORT_SIZE:
                    return False
            if not wire.is_hello(inbuf):
                if credentials is None:
                    self.phase = Phase.REPLICATING  # a 4.x slave: the first report
                    return True
                if security.enforcing:
                    self.refuse("auth", "it did not authenticate (no clusterAccessKey/clusterSecretKey on it?)")
                    return False
                self.service.refusal_log.warning(
                    ("auth", self.host),
                    "slave %s did not authenticate: served (clusterAuthMode permissive), its acks not counted "
                    "for SYNC_MASTER",
                    self.address,
                )
                self.phase = Phase.REPLICATING
                return True
            if len(inbuf) < wire.HELLO_SIZE:
                return False
            self._slave_nonce = bytes(inbuf[len(wire.AUTH_MAGIC) : wire.HELLO_SIZE])
            del inbuf[: wire.HELLO_SIZE]
            if credentials is None:
                challenge = wire.encode_challenge(0, bytes(wire.NONCE_SIZE), bytes(wire.PROOF_SIZE))
            else:
                self._nonce = os.urandom(wire.NONCE_SIZE)
                proof = wire.master_proof(
                    credentials.secret_key, credentials.access_key, self._slave_nonce, self._nonce
                )
                challenge = wire.encode_challenge(wire.CHALLENGE_AUTHENTICATES, self._nonce, proof)
            self.phase = Phase.PROVING
            self._out.append(challenge)
            if self._send() < 0:
                return False
            self._watch_writable(bool(self._out) or self._cipher_pending())
        if self.phase is Phase.PROVING:
            try:
                taken = wire.decode_proof(inbuf)
            except ValueError as e:
                self.refuse("proof", f"a malformed PROOF: {e}")
                return False
            if taken is None:
                return False
            access_key, proof, size = taken
            del inbuf[:size]
            self.phase = Phase.REPLICATING
            if credentials is not None and not self._proved(credentials, access_key, proof):
                return False
        return True

    def _proved(self, credentials: SessionCredentials, access_key: str, proof: bytes) -> bool:
        """Whether the slave's PROOF holds; else enforcing closes it, permissive serves it untrusted."""
        expected = wire.slave_proof(credentials.secret_key, credentials.access_key, self._nonce, self._slave_nonce)
        if hmac.compare_digest(proof, expected) and access_key == credentials.access_key:
            self.authenticated = True
            log.info("slave %s authenticated as %s", self.address, access_key)
            return True
        what = "a wrong proof of the cluster secret" if access_key == credentials.access_key else "another access key"
        reason = f"authentication failed: {what} (access key {access_key!r})"
        if self.service.security.enforcing:
            self.refuse("proof", reason)
            return False
        self.service.refusal_log.warning(
            ("proof", self.host),
            "slave %s %s: served (clusterAuthMode permissive), its acks not counted for SYNC_MASTER",
            self.address,
            reason,
        )
        return True

    def _cipher_pending(self) -> bool:
        return self._tls is not None and self._tls.cipher_pending > 0

    def _push_tls(self) -> bool:
        """TLS: write what records wait as far as the socket takes them; watch for room while
        anything waits. False once the connection is closed."""
        if self.closed:
            return False
        if self._tls is not None:
            try:
                self._tls.push()
            except OSError as e:
                self.close(f"send failed: {e}")
                return False
        self._watch_writable(bool(self._out) or self._cipher_pending())
        return True

    def _on_report(self, offset: int) -> bool:
        store = self.service.store
        master_end = store.commit_log.get_max_offset()
        if offset < 0 or offset > master_end:
            self.close(f"refused: it reports offset {offset}, beyond this master's CommitLog [0, {master_end}]")
            return False
        if self.next_offset < 0:  # the first report: where to start
            start = offset
            if offset == 0:
                files = store.commit_log.mapped_files
                start = files[-1].file_from_offset if files else 0
            elif offset < store.commit_log.get_min_offset():
                self.close(f"refused: it reports offset {offset}, below this master's oldest CommitLog byte")
                return False
            self.next_offset = start
            log.info(
                "slave %s connected%s%s: reports %d, replication starts at %d",
                self.address,
                " over TLS" if self._tls is not None else "",
                "" if self.acks_count else " (unauthenticated: its acks do not count)",
                offset,
                start,
            )
        elif offset < self.acked:
            self.close(f"refused: its offset went backwards from {self.acked} to {offset}")
            return False
        elif offset > self.next_offset:
            self.close(f"refused: it reports offset {offset}, past the {self.next_offset} it was sent")
            return False
        self.acked = offset
        return True

    # -- sending frames -------------------------------------------------------------------------

    def transfer(self) -> None:
        """Send what is pending, then new frames of CommitLog bytes, until the socket is full,
        the slave is caught up or this wake-up sent its share."""
        if self.closed or self.next_offset < 0 or self.streamed:
            return
        if self._tls is not None and not self._push_tls():
            return
        store = self.service.store
        batch = self.service.batch_size
        out = self._out
        sent = 0
        while sent < MAX_BYTES_PER_WAKEUP:
            if not out:
                # several frames per sendmsg: one syscall (and one GIL hand-off) for up to
                # FRAMES_PER_SEND batches when the slave is behind
                for _ in range(FRAMES_PER_SEND):
                    view = store.replica_view(self.next_offset, batch)
                    if view is None:
                        self.close(f"offset {self.next_offset} is no longer in this master's CommitLog")
                        return
                    if not view:
                        break
                    out.append(wire.encode_frame_header(self.next_offset, len(view)))
                    out.append(view)
                    self.next_offset += len(view)
                if not out:
                    break
            n = self._send()
            if n < 0:
                return
            sent += n
            if out:
                break  # the socket is full: EPOLLOUT resumes
        self._watch_writable(bool(out) or sent >= MAX_BYTES_PER_WAKEUP or self._cipher_pending())

    def heartbeat(self) -> None:
        if not self._out and self.next_offset >= 0 and not self.streamed:
            self._out.append(wire.encode_frame_header(self.next_offset, wire.HEARTBEAT_SIZE))
            self._send()
            self._watch_writable(bool(self._out) or self._cipher_pending())

    def _send(self) -> int:
        """sendmsg the pending buffers (no copy of the views); how many bytes went, -1 if closed."""
        try:
            n = self.sock.sendmsg(self._out)
        except BlockingIOError:
            return 0
        except OSError as e:
            self.close(f"send failed: {e}")
            return -1
        self.last_write = time.monotonic()
        left = n
        out = self._out
        while out and left >= len(out[0]):
            left -= len(out.popleft())
        if left:
            out[0] = memoryview(out[0])[left:]
        return n

    def _watch_writable(self, want: bool) -> None:
        if want != self._want_write:
            self._want_write = want
            self.update_events()

    def update_events(self) -> None:
        """Watch for reports unless an ASYNC_MASTER that polls reads them; for room to send while
        frames wait."""
        if self.closed or self.streamed:
            return
        service = self.service
        reports = service.sync or service.polls_idle or self.next_offset < 0
        events = (select.EPOLLIN if reports else 0) | (select.EPOLLOUT if self._want_write else 0)
        if events != self._events:
            self._events = events
            service.loop.update_handler(self.fd, events)

    def close(self, reason: str, logged: bool = False) -> None:
        """``logged``: the caller logged why (rate-limited)."""
        if self.closed:
            return
        self.closed = True
        if not logged:
            level = log.info if reason.startswith("it closed") else log.warning
            level("slave %s disconnected: %s", self.address, reason)
        if self.streamed:
            self.service.stream.remove(self.fd)  # before the close: the stream must not use a reused fd
        else:
            self.service.loop.remove_handler(self.fd)
        self.sock.close()
        self._out.clear()
        self.service.connection_closed(self)


class ReplicatedStore(Protocol):
    """What the HA service and client use of the message store (a MessageStore; typed here because
    rmq.store.message_store imports this module)."""

    @property
    def config(self) -> MessageStoreConfig: ...
    @property
    def commit_log(self) -> CommitLog: ...
    @property
    def group_commit(self) -> GroupCommit: ...
    @property
    def sync_master(self) -> bool: ...
    @property
    def reput_offset(self) -> int: ...
    @property
    def sync_state_set(self) -> frozenset[int] | None: ...
    def append_replica(self, offset: int, data: Any) -> int: ...
    def attach_ha_stream(self, stream: HAStream | None) -> None: ...
    def dispatch_replica(self) -> None: ...
    def replica_view(self, offset: int, max_bytes: int) -> memoryview | None: ...
    def wake_ha_on_next_put(self, fd: int) -> None: ...
    def reconcile_with_master(self, theirs: list[EpochEntry], their_max: int) -> tuple[int, int, int]: ...


class HAService:
    """The master's side: accepts slaves on haListenPort and streams them its CommitLog, on the
    event loop thread ``rmq-store-ha``. ``notify_new_data`` (any thread) says new bytes are there."""

    def __init__(self, store: ReplicatedStore, security: HASecurity | None = None):
        self.store = store
        self.security = security or HASecurity()
        # refusals a stranger can repeat at will (unauthenticated, a plain connection to a TLS-only
        # port, a stalled handshake): one line per kind and peer host per interval
        self.refusal_log = RateLimitedLog(log)
        config = store.config
        self.port = config.ha_listen_port
        self.bind_address = config.ha_listen_address or BIND_ADDRESS
        self.batch_size = config.ha_transfer_batch_size
        self.heartbeat_interval = config.ha_send_heartbeat_interval / 1000
        self.housekeeping_interval = config.ha_housekeeping_interval / 1000
        # a flood of connects on the HA port must not take the descriptors the store's files need
        max_connections = config.ha_max_connections
        self.refusals = ConnectionRefusals(
            open_file_limit_connections() if max_connections is None else max_connections, log
        )
        self.loop = EventLoop("rmq-store-ha")
        self.connections: dict[int, HAConnection] = {}
        self._listener: socket.socket | None = None
        self._new_data_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._notified = False
        # ASYNC_MASTER: the polls stopped, every slave this loop serves had every byte; the next
        # put wakes the thread
        self.polls_idle = False
        self._quiet_polls = 0
        self._last_end = -1
        self._samples: collections.deque = collections.deque(maxlen=LAG_SAMPLES)
        # the poll for new CommitLog bytes runs only while a slave is connected: a master without
        # slaves (every standalone broker) has an HA thread that sleeps, not one that takes the GIL
        # every ASYNC_NEW_DATA_POLL
        self._poll: PeriodicHandle | None = None
        # SYNC_MASTER: told of every stored iteration, and every ack goes to the group commit
        self.sync = store.sync_master
        # plain slaves, once replicating, are streamed by compiled code on a thread of its own that
        # never takes the GIL; this loop keeps the handshakes and the TLS slaves
        self.stream = HAStream(
            store.group_commit,
            sync=self.sync,
            batch_size=self.batch_size,
            max_bytes_per_wakeup=MAX_BYTES_PER_WAKEUP,
            frames_per_send=FRAMES_PER_SEND,
            poll=ASYNC_NEW_DATA_POLL,
            idle_polls=ASYNC_IDLE_POLLS,
            idle_wait=NEW_DATA_POLL,
            heartbeat_interval=self.heartbeat_interval,
            housekeeping_interval=self.housekeeping_interval,
        )
        self._stream_thread = HAStreamThread(self.stream)
        # a connection this loop serves (handshaking, or TLS): notify_new_data writes its eventfd
        self._loop_serves = False
        # controller mode: the brokers whose acks SYNC_MASTER sends wait for (None: the best slave's)
        self.sync_state_set: frozenset[int] | None = None
        self.not_catchup_window_ns = config.ha_max_time_slave_not_catchup * 1_000_000
        # published at once: the group commit forgets what an earlier term's stream published
        self.set_sync_state_set(store.sync_state_set)

    def start(self) -> HAService:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.bind_address, self.port))
        listener.listen(16)
        listener.setblocking(False)
        self._listener = listener
        self.loop.add_handler(listener.fileno(), select.EPOLLIN, self._accept)
        self.loop.add_handler(self._new_data_fd, select.EPOLLIN, self._on_new_data)
        self.loop.add_handler(self.stream.notify_fd, select.EPOLLIN, self._on_stream_failures)
        self.store.attach_ha_stream(self.stream)
        self._stream_thread.start()
        tick = min(self.heartbeat_interval, self.housekeeping_interval, 1.0) / 2
        self.loop.schedule_periodic(tick, self._housekeeping)
        self.loop.start()
        log.info(
            "HA service listening on %s:%d%s%s",
            self.bind_address,
            self.port,
            ", TLS" if self.security.server_tls is not None else "",
            f", slaves authenticate ({self.security.mode.value})" if self.security.credentials else "",
        )
        return self

    def shutdown(self) -> None:
        self.loop.run_and_wait(self._close_all)
        self.loop.shutdown()
        self._stream_thread.shutdown()
        self.store.attach_ha_stream(None)
        self.store.wake_ha_on_next_put(-1)
        self.stream.close()
        os.close(self._new_data_fd)

    def _close_all(self) -> None:
        for connection in list(self.connections.values()):
            connection.close("the master is shutting down")
        if self._listener is not None:
            self.loop.remove_handler(self._listener.fileno())
            self._listener.close()
            self._listener = None

    @property
    def idle(self) -> bool:
        """ASYNC_MASTER: nothing polls for new bytes, every slave has had every byte for a while
        (the store's next put wakes whatever serves them)."""
        connections = list(self.connections.values())
        streamed = [c for c in connections if c.streamed]
        return (self.polls_idle or len(streamed) == len(connections)) and (self.stream.idle or not streamed)

    def notify_new_data(self) -> None:
        """New CommitLog bytes were written (any thread; one eventfd write per wake-up). Only a
        SYNC_MASTER's sends wait: an ASYNC_MASTER's HA thread finds the bytes on its next poll, or,
        idle, is woken by the store's next put."""
        if not self.sync:
            return
        self.stream.notify()
        if not self._notified and self._loop_serves:
            self._notified = True
            try:
                os.eventfd_write(self._new_data_fd, 1)
            except OSError:
                pass  # shut down

    # -- on the HA loop ---------------------------------------------------------------------------

    def _accept(self, _events: int) -> None:
        assert self._listener is not None
        while True:
            try:
                sock, (host, port) = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as e:
                pause_accepting(self.loop, self._listener, self._accept, f"HA port {self.port}", e)
                return
            if self.refusals.full(len(self.connections)):
                self.refusals.refuse(sock, (host, port), f"HA port {self.port}")
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = HAConnection(self, sock, f"{host}:{port}")
            self.connections[connection.fd] = connection
            self.loop.add_handler(connection.fd, select.EPOLLIN, connection.on_events)
            self._loop_serves = True

    def serving_started(self) -> None:
        """A slave this loop serves (TLS) sent its first report: look for new bytes for it."""
        if not self.sync:
            self._set_busy()  # polls until the new slave has caught up
        elif self._poll is None:
            self._poll_every(NEW_DATA_POLL)

    def connection_streamed(self) -> None:
        """A slave went over to the stream."""
        self._loop_serves = any(not c.streamed for c in self.connections.values())
        self.publish_acks()

    def _poll_every(self, interval: float) -> None:
        self._stop_polls()
        self._poll = self.loop.schedule_periodic(interval, self._transfer_all)

    def _set_busy(self) -> None:
        """ASYNC_MASTER: new bytes after idling: poll, read reports on the polls."""
        self.polls_idle = False
        self.store.wake_ha_on_next_put(-1)
        self._quiet_polls = 0
        self._poll_every(ASYNC_NEW_DATA_POLL)
        for connection in list(self.connections.values()):
            connection.update_events()

    def _set_idle(self) -> None:
        """ASYNC_MASTER: every slave has had every byte for a while: no polls; reports and the
        store's next put wake this thread."""
        self.polls_idle = True
        self._stop_polls()
        self.store.wake_ha_on_next_put(self._new_data_fd)
        for connection in list(self.connections.values()):
            connection.update_events()

    def _stop_polls(self) -> None:
        if self._poll is not None:
            self._poll.cancel()
            self._poll = None

    def _on_new_data(self, _events: int) -> None:
        try:
            os.eventfd_read(self._new_data_fd)
        except BlockingIOError:
            pass
        self._notified = False
        self._transfer_all()

    def _on_stream_failures(self, _events: int) -> None:
        for fd, failure, a, b in self.stream.take_failures():
            connection = self.connections.get(fd)
            if connection is None:
                self.stream.remove(fd)
            else:
                connection.close(self._stream_failure(Failure(failure), a, b))

    def _stream_failure(self, failure: Failure, a: int, b: int) -> str:
        """What the stream's ``failure`` of a slave means, as this loop says it of the slaves it serves."""
        if failure is Failure.CLOSED_BY_SLAVE:
            return "it closed the connection"
        if failure is Failure.READ_FAILED:
            return f"read failed: {OSError(a, os.strerror(a))}"
        if failure is Failure.SEND_FAILED:
            return f"send failed: {OSError(a, os.strerror(a))}"
        if failure is Failure.BEYOND_END:
            return f"refused: it reports offset {a}, beyond this master's CommitLog [0, {b}]"
        if failure is Failure.WENT_BACKWARDS:
            return f"refused: its offset went backwards from {a} to {b}"
        if failure is Failure.PAST_SENT:
            return f"refused: it reports offset {a}, past the {b} it was sent"
        if failure is Failure.OFFSET_GONE:
            return f"offset {a} is no longer in this master's CommitLog"
        return f"silent for more than {self.housekeeping_interval:g} s (haHousekeepingInterval)"

    def _transfer_all(self) -> None:
        connections = [c for c in self.connections.values() if not c.streamed and c.next_offset >= 0]
        if not connections:
            # the stream serves every replicating slave: nothing for this loop to poll
            self._stop_polls()
            self.store.wake_ha_on_next_put(-1)
            self.polls_idle = False
            self._quiet_polls = 0
            return
        end = self.store.commit_log.get_max_offset()
        if not self._samples or self._samples[-1][0] < end:
            self._samples.append((end, time.monotonic()))
        if self.polls_idle and end != self._last_end:
            self._set_busy()
        for connection in connections:
            if not self.sync:
                connection.read_reports()
            connection.transfer()
        if self.sync or self.polls_idle:
            return
        if end != self._last_end or not all(c.caught_up(end) for c in connections):
            self._quiet_polls = 0
            self._last_end = end
            return
        self._quiet_polls += 1
        if self._quiet_polls >= ASYNC_IDLE_POLLS:
            # idle first, then look again: a put after that look finds idle set and wakes this
            # thread, one before it is seen here
            self._set_idle()
            if self.store.commit_log.get_max_offset() != end:
                self._set_busy()

    def _housekeeping(self) -> None:
        now = time.monotonic()
        for connection in list(self.connections.values()):
            if connection.streamed:
                continue  # the stream keeps its slaves' time
            if connection.phase is not Phase.REPLICATING and now - connection.accepted_at > self.housekeeping_interval:
                connection.refuse(
                    "slow", f"no handshake within {self.housekeeping_interval:g} s (haHousekeepingInterval)"
                )
            elif now - connection.last_read > self.housekeeping_interval:
                connection.close(f"silent for more than {self.housekeeping_interval:g} s (haHousekeepingInterval)")
            elif now - connection.last_write >= self.heartbeat_interval:
                connection.heartbeat()

    def connection_closed(self, connection: HAConnection) -> None:
        self.connections.pop(connection.fd, None)
        self._loop_serves = any(not c.streamed for c in self.connections.values())
        if not self._loop_serves:
            self._stop_polls()
            self.store.wake_ha_on_next_put(-1)
            self.polls_idle = False
            self._quiet_polls = 0
        self.publish_acks()

    def publish_acks(self) -> None:
        """The acks of the slaves that reported, into the group commit (SYNC_MASTER sends): the
        best, and those of the sync state set's brokers."""
        # an unauthenticated slave (permissive mode) is served, but its word is not taken for a send;
        # the stream adds its slaves' acks
        reporting = [c for c in self.connections.values() if not c.streamed and c.acked >= 0 and c.acks_count]
        best = max((c.acked for c in reporting), default=0)
        named: dict[int, int] = {}
        members = self.sync_state_set or ()
        for c in reporting:
            if c.broker_id in members:
                named[c.broker_id] = max(named.get(c.broker_id, -1), c.acked)
        self.stream.publish_python_acks(best, len(reporting), named.items())
        samples = self._samples
        while len(samples) > 1 and samples[0][0] <= best:
            samples.popleft()

    # -- controller mode: the sync state set -----------------------------------------------------

    def set_sync_state_set(self, broker_ids: frozenset[int] | None) -> None:
        """SYNC_MASTER sends wait for the acks ``broker_ids``' rule needs (``sync_state_set_rule``);
        None: for the best slave's, as without controllers (any thread)."""
        self.sync_state_set = broker_ids
        if broker_ids is None:
            self.stream.set_sync_state_set((), 0, ReplicaRule.REPLICAS_BEST_SLAVE)
        else:
            needed, rule = sync_state_set_rule(broker_ids, self.store.config)
            self.stream.set_sync_state_set(sorted(broker_ids), needed, rule)
        # the acks of the slaves this loop serves, as members now or no longer
        self.loop.call_soon_threadsafe(self.publish_acks)

    def in_sync_slave_ids(self) -> frozenset[int]:
        """The broker ids of the connected slaves that held all of this CommitLog within the last
        haMaxTimeSlaveNotCatchup ms, or hold it now (5.x's isSlaveCatchUp): what the master asks the
        controllers to make its sync state set, itself added (any thread). A slave that named no
        id, or whose acks do not count (unauthenticated, permissive mode), is never in it."""
        ids = set(self.stream.in_sync(self.not_catchup_window_ns / 1e9))
        end = self.store.commit_log.get_max_offset()
        now = time.monotonic_ns()
        for c in list(self.connections.values()):
            if c.streamed or c.closed or c.broker_id < 0 or not c.acks_count or c.acked < 0:
                continue
            if c.catch_up.in_sync(c.acked, end, now, self.not_catchup_window_ns):
                ids.add(c.broker_id)
        return frozenset(ids)

    # -- status -----------------------------------------------------------------------------------

    def slaves(self) -> list[SlaveStatus]:
        """Each connected slave: address, connected since, acked offset, lag in bytes and ms (any thread)."""
        end = self.store.commit_log.get_max_offset()
        now = time.monotonic()
        found = []
        for c in list(self.connections.values()):
            lag_ms = 0
            acked = c.acked
            streamed = self.stream.status(c.fd) if c.streamed else None
            if streamed is not None:
                acked, lag_ms = streamed
            elif acked < end:
                oldest = next((t for offset, t in list(self._samples) if offset > acked), now)
                lag_ms = int((now - oldest) * 1000)
            lag = end - acked if acked >= 0 else end
            found.append(
                SlaveStatus(
                    c.address,
                    c.connected_since,
                    acked,
                    lag,
                    lag_ms,
                    c.authenticated,
                    c._tls is not None,
                    c.acks_count,
                    c.broker_id,
                )
            )
        return found


def sync_state_set_rule(broker_ids: frozenset[int], config: MessageStoreConfig) -> tuple[int, ReplicaRule]:
    """How many slaves of a sync state set (the master's id among ``broker_ids``) must ack a
    SYNC_MASTER put, and the group commit's rule: every one with allAckInSyncStateSet, else
    inSyncReplicas brokers counting the master, never fewer than minInSyncReplicas. A set smaller
    than minInSyncReplicas, or than the brokers the rule needs, answers SLAVE_NOT_AVAILABLE at once
    (RocketMQ 5.x refuses the put, IN_SYNC_REPLICAS_NOT_ENOUGH; rmq stores it as a degraded send)."""
    size = len(broker_ids)
    if size < config.min_in_sync_replicas:
        return 0, ReplicaRule.REPLICAS_TOO_FEW
    if config.all_ack_in_sync_state_set:
        needed = size - 1
    else:
        needed = max(config.in_sync_replicas, config.min_in_sync_replicas) - 1
    if needed <= 0:
        return 0, ReplicaRule.REPLICAS_MASTER_ALONE
    if needed > size - 1:
        return needed, ReplicaRule.REPLICAS_TOO_FEW
    return needed, ReplicaRule.REPLICAS_SYNC_STATE_SET


class HAStreamThread(ServiceThread):
    """``rmq-store-ha-stream``: the compiled stream's loop (``HAStream.run``), without the GIL."""

    def __init__(self, stream: HAStream):
        super().__init__("rmq-store-ha-stream")
        self.stream = stream

    def run_once(self) -> None:
        self.stream.run()

    def shutdown(self, timeout: float = 30.0) -> None:
        self._stopped = True
        self.stream.stop()
        super().shutdown(timeout)


class HAClient(ServiceThread):
    """The slave's side, on ``rmq-store-ha-client``: copy the master's CommitLog into this store.

    The master's address is haMasterAddress, else the one the name server answered to this slave's
    registration (``update_master_address``). Before each connection it takes the master's epoch
    table (``epoch_source``) and cuts what its own log holds past their last common point
    (``MessageStore.reconcile_with_master``). A broken connection is retried with a backoff; a
    restarted slave resumes from its own max offset.

    With ``security``: TLS to the master (``client_tls``), and with credentials the master must prove
    the cluster secret before this slave reconciles or copies anything (a fake master could otherwise
    cut its log or feed it records)."""

    def __init__(
        self, store: ReplicatedStore, epoch_source: EpochSource | None = None, security: HASecurity | None = None
    ):
        super().__init__("rmq-store-ha-client")
        self.store = store
        self.epoch_source = epoch_source
        self.security = security or HASecurity()
        # a master refused at every reconnect (another secret, no TLS): one line per interval
        self.refusal_log = RateLimitedLog(log)
        self._epoch_failures = 0
        config = store.config
        self.master_address: str | None = config.ha_master_address
        self.heartbeat_interval = config.ha_send_heartbeat_interval / 1000
        self.housekeeping_interval = config.ha_housekeeping_interval / 1000
        self._sock: socket.socket | None = None
        self._backoff = RECONNECT_MIN
        self._last_report = 0.0
        self._last_read = 0.0
        self._max_frame = config.ha_transfer_batch_size
        # what was read and not yet appended: [0, self._filled); several frames per recv
        self._buffer = bytearray(max(READ_BUFFER, 2 * (wire.FRAME_HEADER_SIZE + self._max_frame)))
        self._filled = 0
        self._authenticated = False  # the current connection's master proved the cluster secret
        # controller mode: the broker id this slave names to its master (None: it names none, as 4.x)
        self.slave_id: int | None = None
        self._switch_master = False  # follow(): drop the connection to the old master

    def update_master_address(self, address: str | None) -> None:
        """The master's HA address as the name server answered it (any thread)."""
        if address and address != self.master_address:
            log.info("HA master address: %s", address)
            self.master_address = address
            self.wakeup()

    def follow(self, address: str | None) -> None:
        """Replicate from another master (controller mode: the controllers named it) at HA address
        ``address``, or, None, the one the name servers will answer (any thread): the connection to
        the old one is dropped within SLAVE_POLL, and the next reconciles with the new master's
        epochs first."""
        if address != self.master_address:
            log.info("HA master address: %s", address or "the one the name servers will route")
            self.master_address = address
        self._switch_master = True
        self.wakeup()

    def run_once(self) -> None:
        if self._switch_master:
            self._switch_master = False
            self._disconnect()
            self._backoff = RECONNECT_MIN
        if self._sock is None:
            if not self._connect():
                self.wait_for_running(self._backoff)
                self._backoff = min(self._backoff * 2, RECONNECT_MAX)
                return
        try:
            self._serve()
        except (OSError, StoreError, ConnectionError) as e:
            log.warning("replication from master %s stopped: %s; reconnecting", self.master_address, e)
            self._disconnect()

    def on_shutdown(self) -> None:
        self._disconnect()

    def _connect(self) -> bool:
        address = self.master_address
        if not address:
            return False
        host, _, port = address.rpartition(":")
        try:
            sock = socket.create_connection((host, int(port)), timeout=SLAVE_POLL * 5)
        except OSError as e:
            log.debug("cannot connect to master %s: %s", address, e)
            return False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock = self._secure(sock, address)
        except (OSError, ConnectionError) as e:  # ssl.SSLError included
            self.refusal_log.warning(("master", address), "cannot replicate from master %s: %s", address, e)
            sock.close()
            return False
        if not self._prepare(address):
            sock.close()
            return False
        sock.settimeout(SLAVE_POLL)
        self._sock = sock
        self._filled = 0
        self._last_read = time.monotonic()
        self._report()
        log.info(
            "replicating from master %s%s%s, from offset %d",
            address,
            " over TLS" if self.security.client_tls is not None else "",
            ", both authenticated" if self._authenticated else "",
            self.store.commit_log.get_max_offset(),
        )
        self._backoff = RECONNECT_MIN
        return True

    def _secure(self, sock: socket.socket, address: str) -> socket.socket:
        """TLS and the cluster secret's mutual proof on a new connection (each when configured);
        the socket to replicate on, or ConnectionError (OSError, ssl.SSLError) saying why not."""
        security = self.security
        self._authenticated = False
        if security.client_tls is not None:
            # the handshake, within the connect timeout
            sock = security.client_tls.wrap_socket(sock, server_hostname=address.rpartition(":")[0])
        if self.slave_id is not None:
            sock.sendall(wire.encode_slave_id(self.slave_id))
        credentials = security.credentials
        if credentials is None:
            return sock
        nonce = os.urandom(wire.NONCE_SIZE)
        sock.sendall(wire.encode_hello(nonce))
        challenge = bytearray()
        while len(challenge) < wire.CHALLENGE_SIZE:
            got = sock.recv(wire.CHALLENGE_SIZE - len(challenge))
            if not got:
                raise ConnectionError(
                    "it closed the connection before its challenge (a master without cluster authentication, "
                    "or one that refused this slave's credentials?)"
                )
            challenge += got
        try:
            flags, master_nonce, proof = wire.decode_challenge(challenge)
        except ValueError as e:
            raise ConnectionError(f"not a cluster challenge: {e}") from None
        # answered whatever the master's proof: a master with another secret then logs the mismatch
        # too (what it learns, an HMAC over its own nonce, proves nothing on another connection)
        sock.sendall(wire.encode_proof(credentials.access_key, wire.slave_proof(
            credentials.secret_key, credentials.access_key, master_nonce, nonce
        )))  # fmt: skip
        if not flags & wire.CHALLENGE_AUTHENTICATES:
            if security.enforcing:
                raise ConnectionError("it holds no cluster credentials, so it cannot prove it is this cluster's master")
            self.refusal_log.warning(
                ("master-unauthenticated", address),
                "master %s holds no cluster credentials: replicating from it all the same (clusterAuthMode permissive)",
                address,
            )
        else:
            expected = wire.master_proof(credentials.secret_key, credentials.access_key, nonce, master_nonce)
            if not hmac.compare_digest(proof, expected):
                raise ConnectionError(
                    "its proof of the cluster secret is wrong (another clusterSecretKey or clusterAccessKey "
                    "than this slave's): not replicating from it"
                )
            self._authenticated = True
        return sock

    def _prepare(self, address: str) -> bool:
        """Before the first report: reconcile with the master's epoch table and queue what the last
        connection copied; whether replication may start."""
        if self.epoch_source is not None:
            # the master's terms first, at every (re)connect: a tail this log holds that the master
            # never had is cut before a byte is copied
            try:
                theirs, their_max = self.epoch_source()
            except Exception as e:
                # at start-up the master is not known yet: a warning only once it keeps failing
                self._epoch_failures += 1
                (log.warning if self._epoch_failures == EPOCH_FAILURES_LOGGED else log.debug)(
                    "cannot fetch the epoch table of master %s: %s; retrying", address, e
                )
                return False
            self._epoch_failures = 0
            try:
                self.store.reconcile_with_master(theirs, their_max)
            except StoreError as e:
                log.error("cannot reconcile this log with master %s's: %s", address, e)
                return False
        try:
            # records copied before a full disk refused their ConsumeQueue file: queued now, or
            # no copying until they can be (the CommitLog would run ahead of what consumers see)
            self.store.dispatch_replica()
        except OSError as e:
            log.warning("cannot dispatch the replicated records from offset %d: %s", self.store.reput_offset, e)
            return False
        return True

    def _disconnect(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _report(self) -> None:
        assert self._sock is not None
        self._sock.sendall(wire.encode_report(self.store.commit_log.get_max_offset()))
        self._last_report = time.monotonic()

    def _read_records(self, buffer: memoryview, end: int) -> int:
        """TLS: a read answers one record (16 KiB at most), where a plain one answers all that came:
        take the records already there too, so that a burst costs one append and one report (not
        one per record, each report a record of its own for the master to open). Where the data
        now ends."""
        sock = self._sock
        assert sock is not None
        sock.settimeout(0)
        try:
            while end < len(buffer):
                got = sock.recv_into(buffer[end:])
                if not got:
                    break  # the next read meets the end
                end += got
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            pass
        finally:
            sock.settimeout(SLAVE_POLL)
        return end

    def _serve(self) -> None:
        """Read what came (or time out), append every whole frame, report once."""
        assert self._sock is not None
        now = time.monotonic()
        if now - self._last_report >= self.heartbeat_interval:
            self._report()
        if now - self._last_read > self.housekeeping_interval:
            raise ConnectionError(f"master silent for more than {self.housekeeping_interval:g} s")
        buffer = memoryview(self._buffer)
        try:
            got = self._sock.recv_into(buffer[self._filled :])
        except TimeoutError:
            return
        if got == 0:
            raise ConnectionError("the master closed the connection")
        self._last_read = time.monotonic()
        end = self._filled + got
        if isinstance(self._sock, ssl.SSLSocket):
            end = self._read_records(buffer, end)
        position = 0
        appended = False
        while end - position >= wire.FRAME_HEADER_SIZE:
            start, size = wire.decode_frame_header(buffer, position)
            if size < 0 or size > self._max_frame:
                raise ConnectionError(f"frame of {size} bytes, more than haTransferBatchSize {self._max_frame}")
            if end - position - wire.FRAME_HEADER_SIZE < size:
                break
            data_at = position + wire.FRAME_HEADER_SIZE
            if size:
                self.store.append_replica(start, buffer[data_at : data_at + size])
                appended = True
            position = data_at + size
        # the start of a frame still to come moves to the front (at most one frame's bytes)
        self._buffer[: end - position] = buffer[position:end]
        self._filled = end - position
        if appended:
            self._report()
