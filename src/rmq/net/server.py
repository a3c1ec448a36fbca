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
Unless given one, the server starts its own loop thread; docs/threads.md lists each, and who stops it.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from rmq.net.channel import (
    MAX_PENDING_OUTPUT_DEFAULT,
    Channel,
    Endpoint,
    format_address,
)
from rmq.net.frame import MAX_FRAME_SIZE_DEFAULT
from rmq.net.loop import EventLoop, PeriodicHandle, TimerHandle
from rmq.net.tls import TlsChannel, TlsServerOptions

log = logging.getLogger(__name__)

IDLE_TIMEOUT_DEFAULT = 120.0
LISTEN_BACKLOG = 1024
# How often idle connections are looked for, at most (a fraction of the idle timeout below that).
_IDLE_SCAN_MAX_INTERVAL = 1.0
_ACCEPT_RETRY_SECONDS = 0.1


class RemotingServer(Endpoint):
    """A listening socket and every connection accepted from it, on one event loop thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_frame_size: int = MAX_FRAME_SIZE_DEFAULT,
        idle_timeout: float = IDLE_TIMEOUT_DEFAULT,
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
        self.idle_timeout = idle_timeout
        self.max_pending_output = max_pending_output
        self._owns_loop = loop is None
        self.loop = loop or EventLoop(name=name or f"rmq-server-{port}")
        self._listener: socket.socket | None = None
        self._channels: set[Channel] = set()
        self._idle_scan: PeriodicHandle | None = None
        self._lock = threading.Lock()

    # -- the loop's services, for processors and the roles built on the server ----------------

    def call_soon_threadsafe(self, fn: Callable, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def call_later(self, delay: float, fn: Callable, *args) -> TimerHandle:
        return self.loop.call_later(delay, fn, *args)

    def schedule_periodic(self, interval: float, fn: Callable, initial_delay: float | None = None) -> PeriodicHandle:
        return self.loop.schedule_periodic(interval, fn, initial_delay)

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
                listener.listen(LISTEN_BACKLOG)
                listener.setblocking(False)
            except OSError:
                listener.close()
                raise
            self._listener = listener

        def register() -> None:  # on the loop thread, which may already run (a shared loop)
            self.loop.add_handler(listener.fileno(), select.EPOLLIN, self._on_acceptable)
            scan_interval = min(_IDLE_SCAN_MAX_INTERVAL, self.idle_timeout / 4)
            self._idle_scan = self.loop.schedule_periodic(scan_interval, self._close_idle_channels)

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
        if self._idle_scan is not None:
            self._idle_scan.cancel()
            self._idle_scan = None
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
                # EMFILE and friends: the listener stays readable, so pause accepting for a moment
                # rather than spin; the connections already open keep being served.
                log.error("accept on %s failed: %s; retrying in %ss", self.address, exc, _ACCEPT_RETRY_SECONDS)
                self.loop.remove_handler(listener.fileno())
                self.loop.call_later(_ACCEPT_RETRY_SECONDS, self._resume_accepting, listener)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            options: dict[str, Any] = {
                "max_frame_size": self.max_frame_size,
                "max_pending_output": self.max_pending_output,
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

    def _resume_accepting(self, listener: socket.socket) -> None:
        if listener is self._listener:
            self.loop.add_handler(listener.fileno(), select.EPOLLIN, self._on_acceptable)

    def _channel_closed(self, channel: Channel) -> None:
        self._channels.discard(channel)
        super()._channel_closed(channel)

    def _close_idle_channels(self) -> None:
        deadline = time.monotonic() - self.idle_timeout
        for channel in list(self._channels):
            if channel.last_active < deadline:
                log.info("closing %s: idle for more than %ss", channel.remote_address, self.idle_timeout)
                channel._close(None)
