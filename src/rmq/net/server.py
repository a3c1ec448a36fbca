"""The remoting server: accepts connections on the event loop and hands requests to processors.

    server = RemotingServer(port=9876)
    server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, get_route)   # handler(channel, request)
    server.start()          # loop in a background thread; or serve_forever() in this one
    ...
    server.shutdown()

A handler returns the response, or None to answer later with ``channel.send_response`` (from the
loop, or from another thread: it hops to the loop by itself). Answers go out in any order, matched by
opaque. Unknown request codes get REQUEST_CODE_NOT_SUPPORTED; a handler that raises ``RequestRefused``
gets its code and remark, one that raises anything else SYSTEM_ERROR;
the connection stays open either way. A connection whose bytes cannot be framed is closed (the
stream cannot be trusted past them), with one log line, and nobody else notices.

What a connection may take is ``ConnectionLimits`` (the broker's settings
serverChannelMaxIdleTimeSeconds, serverMaxConnections, serverFrameTimeoutSeconds,
serverMaxPendingWriteBytes): one idle longer
than the idle timeout is closed, as RocketMQ's IdleStateHandler closes it; so is one whose frame (or
TLS handshake) began longer ago than the frame timeout and is still incomplete, a client trickling a
byte a second being busy but not idle. Past the maximum a new connection is accepted and closed at
once (counted in ``connections_refused``, logged once per 10 s at most), so a flood of connects can
neither take the descriptors the broker's own files need nor slow the clients already served.
A connection whose peer does not read its answers is no longer read past max_pending_output unsent
bytes; past serverMaxPendingWriteBytes over all connections, those holding the most are no longer
read (``rmq.net.channel.OutputAccount``); each is read again once it drained half of it.
Unless given one, the server starts its own loop thread; docs/threads.md lists each, and who stops it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import resource
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from rmq.net.channel import (
    MAX_PENDING_OUTPUT_DEFAULT,
    MAX_PENDING_OUTPUT_TOTAL_DEFAULT,
    Channel,
    Endpoint,
    OutputAccount,
    format_address,
)
from rmq.net.frame import MAX_FRAME_SIZE_DEFAULT
from rmq.net.loop import EventLoop, PeriodicHandle, TimerHandle
from rmq.net.tls import TlsChannel, TlsServerOptions

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 1024
# Descriptors kept from connections when the maximum follows the open-file limit: the store's files
# as it opens them, log files, epoll and event fds, the broker's own outgoing connections.
RESERVED_DESCRIPTORS = 256
# How often idle and stalled connections are looked for, at most (a fraction of the timeouts below that).
_SCAN_MAX_INTERVAL = 1.0
_ACCEPT_RETRY_SECONDS = 0.1
_REFUSAL_LOG_INTERVAL = 10.0
# The allocator keeps what the answers of connections that did not read took, once they leave: glibc
# trims its heap only past a threshold it raises after each large block freed (up to 64 MiB), and
# 16 such connections left 24 of their 37 MiB behind. malloc_trim hands it back; it is glibc's
# (None elsewhere: musl, macOS), and costs well under a millisecond, twice a second at most.
_malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
_TRIM_DELAY = 0.5


def open_file_limit_connections() -> int | None:
    """The connections the open-file limit (RLIMIT_NOFILE, soft) leaves room for beside
    RESERVED_DESCRIPTORS; None when it is unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(1, soft - RESERVED_DESCRIPTORS)


def pause_accepting(
    loop: EventLoop, listener: socket.socket, on_acceptable: Callable[[int], None], where: str, exc: OSError
) -> None:
    """accept() on ``listener`` failed (EMFILE and friends): it stays readable, so stop watching it
    for _ACCEPT_RETRY_SECONDS rather than spin; the connections already open keep being served.
    Then ``on_acceptable`` watches it again, unless it was closed meanwhile. For the client port
    here and the HA port (rmq.store.ha)."""
    log.error("accept on %s failed: %s; retrying in %ss", where, exc, _ACCEPT_RETRY_SECONDS)
    fd = listener.fileno()
    loop.remove_handler(fd)

    def resume() -> None:
        if listener.fileno() == fd:  # a closed socket's fileno() is -1
            loop.add_handler(fd, select.EPOLLIN, on_acceptable)

    loop.call_later(_ACCEPT_RETRY_SECONDS, resume)


class ConnectionRefusals:
    """A listener's bound on connections open at once: past ``maximum`` (None: no bound) a new one
    is accepted and closed at once. Refusals are counted, and logged a line per
    _REFUSAL_LOG_INTERVAL at most with the count since the last line, so that a flood of connects
    does not flood the log too. For the client port here and the HA port (rmq.store.ha)."""

    def __init__(self, maximum: int | None, logger: logging.Logger = log):
        self.maximum = maximum
        #: connections closed at once because ``maximum`` were open
        self.count = 0
        self._log = logger
        self._unlogged = 0
        self._next_log = 0.0

    def full(self, open_now: int) -> bool:
        return self.maximum is not None and open_now >= self.maximum

    def refuse(self, sock: socket.socket, address: tuple, where: str) -> None:
        """Close ``sock`` (just accepted from ``address`` on ``where``); the connections served do
        not notice. Counted and logged first: whoever sees the close finds both done."""
        self.count += 1
        self._unlogged += 1
        now = time.monotonic()
        if now >= self._next_log:
            self._log.warning(
                "%s serves its maximum of %d connections: refused %d since the last line (the last from %s)",
                where,
                self.maximum,
                self._unlogged,
                format_address(address),
            )
            self._unlogged = 0
            self._next_log = now + _REFUSAL_LOG_INTERVAL
        sock.close()


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """What a server allows its connections; 0 turns a timeout off. The defaults are those of the
    settings (serverChannelMaxIdleTimeSeconds ...), which this layer cannot read: tests/test_settings.py
    holds them equal."""

    #: seconds without a byte read or written (RocketMQ's serverChannelMaxIdleTimeSeconds)
    idle_timeout: float = 120.0
    #: connections served at once; None: what the open-file limit leaves (open_file_limit_connections)
    max_connections: int | None = None
    #: seconds from the first byte of a frame, or of a TLS handshake, to its last
    frame_timeout: float = 60.0
    #: connections the kernel completes and queues for accept (RocketMQ's serverSocketBacklog;
    #: the kernel caps it at net.core.somaxconn)
    backlog: int = LISTEN_BACKLOG
    #: bytes of unsent answers of all connections together past which those holding the most are
    #: no longer read (serverMaxPendingWriteBytes; rmq.net.channel.OutputAccount); None: no bound
    max_pending_output_total: int | None = MAX_PENDING_OUTPUT_TOTAL_DEFAULT


class RemotingServer(Endpoint):
    """A listening socket and every connection accepted from it, on one event loop thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_frame_size: int = MAX_FRAME_SIZE_DEFAULT,
        limits: ConnectionLimits = ConnectionLimits(),
        max_pending_output: int = MAX_PENDING_OUTPUT_DEFAULT,
        loop: EventLoop | None = None,
        name: str | None = None,
        tls: TlsServerOptions | None = None,
    ):
        """``name`` names the loop thread when the server owns its loop (default ``rmq-server-<port>``);
        ``tls``: serve TLS too (permissive) or only (enforcing), ``rmq.net.tls``."""
        super().__init__()
        self.tls = tls
        self.host = host
        self._requested_port = port
        self.max_frame_size = max_frame_size
        self.limits = limits
        self.max_connections = (
            limits.max_connections if limits.max_connections is not None else open_file_limit_connections()
        )
        self._refusals = ConnectionRefusals(self.max_connections)
        self.max_pending_output = max_pending_output
        self._output_account = OutputAccount(limits.max_pending_output_total)
        self._owns_loop = loop is None
        self.loop = loop or EventLoop(name=name or f"rmq-server-{port}")
        self._listener: socket.socket | None = None
        self._channels: set[Channel] = set()
        self._scan: PeriodicHandle | None = None
        self._trim: TimerHandle | None = None
        self._lock = threading.Lock()

    # -- the loop's services, for processors and the roles built on the server ----------------

    def call_soon_threadsafe(self, fn: Callable, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def call_later(self, delay: float, fn: Callable, *args) -> TimerHandle:
        return self.loop.call_later(delay, fn, *args)

    def schedule_periodic(self, interval: float, fn: Callable, initial_delay: float | None = None) -> PeriodicHandle:
        return self.loop.schedule_periodic(interval, fn, initial_delay)

    @property
    def connections_refused(self) -> int:
        """Connections closed at once because max_connections were open (since the server started)."""
        return self._refusals.count

    @property
    def pending_output(self) -> int:
        """Bytes of answers queued on all connections and not yet taken by the kernel."""
        return self._output_account.total

    @property
    def port(self) -> int:
        """The port actually listened on (known once started)."""
        if self._listener is None:
            raise RuntimeError("the server is not listening yet: call start() or serve_forever() first")
        return self._listener.getsockname()[1]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def channels(self) -> list[Channel]:
        """The open connections (a snapshot)."""
        return list(self._channels)

    # -- lifecycle ----------------------------------------------------------------------------

    def _listen(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((self.host, self._requested_port))
                listener.listen(self.limits.backlog)
                listener.setblocking(False)
            except OSError:
                listener.close()
                raise
            self._listener = listener

        def register() -> None:  # on the loop thread, which may already run (a shared loop)
            self.loop.add_handler(listener.fileno(), select.EPOLLIN, self._on_acceptable)
            timeouts = [t for t in (self.limits.idle_timeout, self.limits.frame_timeout) if t > 0]
            if timeouts:
                scan_interval = min(_SCAN_MAX_INTERVAL, min(timeouts) / 4)
                self._scan = self.loop.schedule_periodic(scan_interval, self._close_stalled_channels)

        self.loop.run_and_wait(register)
        log.info("remoting server listening on %s:%d", self.host, self.port)

    def start(self) -> None:
        """Listen, and run the loop in a background thread (returns once listening)."""
        self._listen()
        if self._owns_loop:
            self.loop.start()

    def serve_forever(self) -> None:
        """Listen, and run the loop in the calling thread until ``shutdown()`` (from another thread)."""
        self._listen()
        self.loop.run_forever()

    def shutdown(self) -> None:
        """Stop accepting, close every connection, stop the loop and join its thread."""
        self.loop.run_and_wait(self._close_everything)
        if self._owns_loop:
            self.loop.shutdown()

    def __enter__(self) -> RemotingServer:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown()

    def _close_everything(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
            self._scan = None
        if self._trim is not None:
            self._trim.cancel()
            self._trim = None
        listener, self._listener = self._listener, None
        if listener is not None:
            self.loop.remove_handler(listener.fileno())
            listener.close()
        for channel in list(self._channels):
            channel._close(None)

    # -- connections --------------------------------------------------------------------------

    def _on_acceptable(self, events: int) -> None:
        listener = self._listener
        # Take every connection waiting in the backlog: a burst of connects costs one wake-up.
        while listener is not None:
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                pause_accepting(self.loop, listener, self._on_acceptable, self.address, exc)
                return
            if self._refusals.full(len(self._channels)):
                self._refusals.refuse(sock, address, self.address)
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            options: dict[str, Any] = {
                "max_frame_size": self.max_frame_size,
                "max_pending_output": self.max_pending_output,
                "output_account": self._output_account,
            }
            if self.tls is None:
                channel = Channel(self.loop, sock, self, format_address(address), **options)
            else:
                channel = TlsChannel(
                    self.loop,
                    sock,
                    self,
                    format_address(address),
                    context=self.tls.context,
                    server_mode=self.tls.mode,
                    **options,
                )
            self._channels.add(channel)
            log.debug("accepted %s", channel.remote_address)

    def _channel_closed(self, channel: Channel) -> None:
        self._channels.discard(channel)
        if not channel._reading and _malloc_trim is not None and self._trim is None:
            # it left with its answers unread: they were freed, give the memory back (once for a crowd)
            self._trim = self.loop.call_later(_TRIM_DELAY, self._release_memory)
        super()._channel_closed(channel)

    def _release_memory(self) -> None:
        self._trim = None
        assert _malloc_trim is not None
        _malloc_trim(0)

    def _close_stalled_channels(self) -> None:
        """Close the connections idle too long, and those whose frame has been incomplete too long
        (a paused one, whose answers its peer does not read, is not reading its frame: it is spared)."""
        now = time.monotonic()
        idle_timeout, frame_timeout = self.limits.idle_timeout, self.limits.frame_timeout
        idle_deadline = now - idle_timeout if idle_timeout > 0 else float("-inf")
        frame_deadline = now - frame_timeout if frame_timeout > 0 else float("-inf")
        idle, stalled = [], []
        for channel in list(self._channels):
            if channel.last_active < idle_deadline:
                idle.append(channel)
            else:
                since = channel.incomplete_since
                if since is not None and since < frame_deadline and channel._reading:
                    stalled.append(channel)
        # one line a scan for each reason, however many connections it closes
        for channels, why in (
            (idle, f"idle for more than {idle_timeout:g} s"),
            (stalled, f"a frame or TLS handshake still incomplete after {frame_timeout:g} s"),
        ):
            if channels:
                shown = ", ".join(channel.remote_address for channel in channels[:3])
                more = f" and {len(channels) - 3} more" if len(channels) > 3 else ""
                log.info("closing %s%s: %s", shown, more, why)
                for channel in channels:
                    channel._close(None)
