"""The remoting client: requests to many addresses over one event loop thread.

    with RemotingClient() as client:
        response = client.invoke_sync("127.0.0.1:9876", RemotingCommand.request(code, {...}), timeout=3.0)

One connection per address carries every request to it (answers matched by opaque); it is opened
on first use, without blocking the loop, and again on the next use after it drops. Requests waiting
on a connection that drops fail at once. Requests the server sends to the client
(NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) go to processors registered as on a server.
With ``credentials`` every request it sends is signed for a broker's ACL (``rmq.protocol.acl``),
as Java's AclClientRPCHook does it: one hook here signs for every producer, consumer and admin.
With ``tls`` every connection is TLS (``rmq.net.tls``).
Unless given one, the client starts its own loop thread; docs/threads.md lists each, and who stops it.
"""

from __future__ import annotations

import concurrent.futures
import errno
import math
import select
import socket
import ssl
import threading
import time
from collections import deque
from typing import Any

from rmq.errors import ProtocolError, RemotingConnectError, RemotingError, RemotingSendError, RemotingTimeoutError
from rmq.net.channel import (
    _ACTIVE,
    _EPOLLIN,
    MAX_PENDING_OUTPUT_DEFAULT,
    RECV_SIZE,
    Channel,
    Endpoint,
    ResponseCallback,
    _run_callback,
)
from rmq.net.codec import RemotingCommand
from rmq.net.codec_py import ext_fields_for_wire
from rmq.net.frame import FLAG_RESPONSE, MAX_FRAME_SIZE_DEFAULT
from rmq.net.loop import EventLoop
from rmq.net.tls import TlsChannel, client_context
from rmq.protocol.acl import SessionCredentials

CONNECT_TIMEOUT_DEFAULT = 3.0
# How long invoke_sync waits past its timeout for the loop to report it (the loop's own timer
# normally fires first, with the precise error).
_SYNC_GRACE_SECONDS = 1.0
# How late a pre-encoded request's timeout may be reported: the deadline sweep runs at most this
# often (RocketMQ's scanResponseTable: every second), not once per request.
SWEEP_GRANULARITY = 0.01


def parse_address(addr: str) -> tuple[str, int]:
    """("host", port) from "host:port"; RemotingConnectError if it is not one."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RemotingConnectError(f"invalid address {addr!r}, expected host:port")
    return host, int(port)


class RemotingClient(Endpoint):
    """Pooled connections to remoting servers, on its own event loop or a shared one."""

    def __init__(
        self,
        *,
        connect_timeout: float = CONNECT_TIMEOUT_DEFAULT,
        max_frame_size: int = MAX_FRAME_SIZE_DEFAULT,
        max_pending_output: int = MAX_PENDING_OUTPUT_DEFAULT,
        loop: EventLoop | None = None,
        name: str = "rmq-client",
        credentials: SessionCredentials | tuple[str, ...] | None = None,
        tls: bool | ssl.SSLContext = False,
    ):
        """``name`` names the loop thread when the client owns its loop; ``credentials``
        (``(access_key, secret_key[, security_token])``) sign every request; ``tls``: connect with
        TLS (True: verify servers against the system's CAs; or the ``ssl.SSLContext`` to use)."""
        super().__init__()
        self.credentials = SessionCredentials.of(credentials)
        self.tls_context = client_context(tls) if tls else None
        self.connect_timeout = connect_timeout
        self.max_frame_size = max_frame_size
        self.max_pending_output = max_pending_output
        self._owns_loop = loop is None
        self.loop = loop or EventLoop(name=name)
        self._channels: dict[str, Channel] = {}
        # a token per request handed to the loop thread and not yet on a connection's books (a
        # deque: appends and pops need no lock): while any is, no sender writes past it
        # (ClientChannel.submit_frame), so the requests of each thread keep their order
        self._hops: deque[None] = deque()
        self._started = False
        self._closed = False

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self._owns_loop:
            self.loop.start()

    def shutdown(self) -> None:
        """Close every connection (pending requests fail) and stop the loop if it is this client's."""
        if self._closed:
            return
        self._closed = True
        self.loop.run_and_wait(self._close_channels)
        if self._owns_loop:
            self.loop.shutdown()

    def __enter__(self) -> RemotingClient:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown()

    def _close_channels(self) -> None:
        for channel in list(self._channels.values()):
            channel._close(None)

    # -- invoking -----------------------------------------------------------------------------

    def invoke_sync(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for its answer.

        Raises RemotingTimeoutError, RemotingConnectError or RemotingSendError (connection lost),
        each naming the address. Not from the loop thread (it would wait on itself).
        """
        if self.loop.in_loop_thread():
            raise RuntimeError("invoke_sync on the loop thread would wait forever: use invoke_callback")
        future = self.invoke_async(addr, request, timeout)
        try:
            return future.result(timeout + _SYNC_GRACE_SECONDS)
        except concurrent.futures.TimeoutError:
            self.loop.call_soon_threadsafe(self._forget, addr, request.opaque)
            raise RemotingTimeoutError(
                f"no answer from {addr} to request code {request.code} (opaque {request.opaque}) within {timeout}s"
            ) from None

    def invoke_async(self, addr: str, request: RemotingCommand, timeout: float) -> concurrent.futures.Future:
        """Send ``request``; the future gets the response, or the RemotingError that stopped it."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def complete(response: RemotingCommand | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(response)
            else:
                future.set_exception(error)

        self.invoke_callback(addr, request, timeout, complete)
        return future

    def invoke_callback(self, addr: str, request: RemotingCommand, timeout: float, callback: ResponseCallback) -> None:
        """Send ``request``; ``callback(response, None)`` or ``callback(None, error)`` runs on the loop
        thread. The cheapest way to keep many requests in flight."""
        self._check_usable()
        if self.credentials is not None:
            self._sign(request)
        if self.loop.in_loop_thread():
            self._invoke_in_loop(addr, request, timeout, callback)
        else:
            self._hop(self._invoke_in_loop, addr, request, timeout, callback)

    def invoke_frame(
        self,
        addr: str,
        opaque: int,
        code: int,
        frame: bytes,
        timeout: float,
        callback: ResponseCallback,
        body: bytes = b"",
        waited: bool = False,
    ) -> None:
        """``invoke_callback`` for a request already encoded to ``frame`` (``rmq.client.send_wire``;
        ``opaque`` and ``code`` are the frame's), or to ``frame`` and then ``body`` (a big body
        written from where it is). Not for a client with ``credentials``: the signature is
        computed over the fields, which a frame no longer has apart. ``waited``: the caller waits
        for the answer (a sync send): when nothing is in flight before it, written from this
        thread, and its answer read here too, ``callback`` run before this returns (at the
        latest by the deadline: ``ClientChannel.submit_frame``); otherwise the loop thread writes
        it, with the others of its iteration in one burst."""
        self._check_usable()
        if self.credentials is not None:
            raise RemotingError("a signed request cannot be sent pre-encoded: use invoke_callback")
        channel = self._channels.get(addr)
        if (
            waited
            and type(channel) is ClientChannel
            and not self._hops
            and not channel._pending  # (checked again under its lock)
            and channel.submit_frame(opaque, code, frame, timeout, callback, body)
        ):
            return
        if self.loop.in_loop_thread():
            self._frame_in_loop(addr, opaque, code, frame, timeout, callback, body)
        else:
            self._hop(self._frame_in_loop, addr, opaque, code, frame, timeout, callback, body)

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send ``request`` flagged oneway: no answer, no retry. Connection errors are only logged."""
        self._check_usable()
        if self.credentials is not None:
            self._sign(request)
        if self.loop.in_loop_thread():
            self._oneway_in_loop(addr, request)
        else:
            self._hop(self._oneway_in_loop, addr, request)

    def _hop(self, fn: Any, *args: Any) -> None:
        """``fn(*args)`` on the loop thread, counted in ``_hops`` until it ran."""
        self._hops.append(None)
        try:
            self.loop.call_soon_threadsafe(self._hopped, fn, args)
        except BaseException:
            self._hops.pop()
            raise

    def _hopped(self, fn: Any, args: tuple[Any, ...]) -> None:
        try:
            fn(*args)
        finally:  # the request is on the books (or failed): senders may write past it
            self._hops.pop()

    def _sign(self, request: RemotingCommand) -> None:
        assert self.credentials is not None
        # the signature covers the values as they go on the wire (True as "true", None left out)
        ext = ext_fields_for_wire(request.ext_fields)
        self.credentials.sign(ext, request.body)
        request.ext_fields = ext

    def close_channel(self, addr: str) -> None:
        """Close the connection to ``addr`` (pending requests to it fail)."""
        channel = self._channels.get(addr)
        if channel is not None:
            channel.close()

    def _check_usable(self) -> None:
        if self._closed:
            raise RemotingError("remoting client is shut down")
        if not self._started:
            raise RemotingError("remoting client is not started: call start() first")

    # -- on the loop thread -------------------------------------------------------------------

    def _invoke_in_loop(self, addr: str, request: RemotingCommand, timeout: float, callback: ResponseCallback) -> None:
        try:
            channel = self._channel_for(addr)
        except RemotingError as exc:
            callback(None, exc)
            return
        channel.invoke_async(request, timeout, callback)

    def _frame_in_loop(
        self,
        addr: str,
        opaque: int,
        code: int,
        frame: bytes,
        timeout: float,
        callback: ResponseCallback,
        body: bytes,
    ) -> None:
        try:
            channel = self._channel_for(addr)
        except RemotingError as exc:
            callback(None, exc)
            return
        channel.invoke_frame(opaque, code, frame, timeout, callback, body)

    def _oneway_in_loop(self, addr: str, request: RemotingCommand) -> None:
        try:
            channel = self._channel_for(addr)
        except RemotingError:
            return
        channel.send_oneway(request)

    def _forget(self, addr: str, opaque: int) -> None:
        channel = self._channels.get(addr)
        if channel is not None:
            channel.forget(opaque)

    def _channel_for(self, addr: str) -> Channel:
        channel = self._channels.get(addr)
        if channel is not None:
            return channel
        if self._closed:
            raise RemotingError("remoting client is shut down")
        host, port = parse_address(addr)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            err = sock.connect_ex((host, port))
        except OSError as exc:  # e.g. a host name that does not resolve
            sock.close()
            raise RemotingConnectError(f"cannot connect to {addr}: {exc}") from None
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            raise RemotingConnectError(f"cannot connect to {addr}: {errno.errorcode.get(err, err)}")
        options: dict[str, Any] = {"max_frame_size": self.max_frame_size, "max_pending_output": self.max_pending_output}
        if self.tls_context is None:
            channel = ClientChannel(self.loop, sock, self, addr, connecting=True, **options)
        else:
            channel = TlsChannel(self.loop, sock, self, addr, context=self.tls_context, connecting=True, **options)
        self._channels[addr] = channel
        self.loop.call_later(self.connect_timeout, self._connect_timed_out, channel)
        return channel

    def _connect_timed_out(self, channel: Channel) -> None:
        if not channel.is_active:  # still connecting (a closed channel ignores _close)
            channel._close(
                RemotingConnectError(
                    f"cannot connect to {channel.remote_address}: no answer within {self.connect_timeout}s"
                )
            )

    def _channel_closed(self, channel: Channel) -> None:
        if self._channels.get(channel.remote_address) is channel:
            del self._channels[channel.remote_address]
        super()._channel_closed(channel)


class ClientChannel(Channel):
    """A client's plain connection, to which a thread sending a pre-encoded request
    (``submit_frame``: a producer's send) writes it itself when nothing is in flight on it, and
    whose answer that thread then reads itself.

    A sync send that waited for the loop to wake, write it and go back to epoll paid two thread
    switches more per round trip: here the sender registers the request and writes it at once,
    under the connection's lock, which the loop thread takes for what it does to the output and
    the pending table. Requests nobody waits on (``send_async``), or behind others in flight,
    go to the loop as before: written there in one burst per iteration, while the sender, which
    holds the GIL most of the time, builds the next (measured: written by the sender, each
    ``send_async`` cost it 2-3 us more of CPU, a loopback send's TCP work included, and
    throughput fell).

    The answer to such a send is read by its sender too (``_read_own``): the loop waking on it,
    decoding it and waking the sender was the other half of the hops. While a sender reads, the
    loop does not (EPOLLIN is off for the connection, and the loop's read checks under the lock
    who reads); whatever else the sender reads (answers to requests other threads sent meanwhile,
    requests of the server) it hands to the loop, which handles it as if it had read it. The
    sender stops at its answer, at its deadline (the sweep reports the timeout, as for any
    request), or when the connection fails or closes (the loop finds it, and fails what waits).

    A deadline sweep, not a timer per request, reports the pre-encoded requests that got no
    answer in time (a TimerHandle made and cancelled per request was a tenth of the loop's work
    at 64 sends in flight)."""

    def __init__(self, *args: Any, **options: Any):
        super().__init__(*args, **options)
        self._lock = threading.RLock()
        # (deadline, opaque, code, timeout) of pre-encoded requests, deadlines in order
        self._deadlines: deque[tuple[float, int, int, float]] = deque()
        self._sweep_armed = False
        # the thread that reads its own answer now (``_read_own``), None while the loop reads
        self._reader: int | None = None
        self._poller: select.poll | None = None
        # what the loop's read decoded while holding the lock, handled after it
        self._deferred: list[RemotingCommand] | None = None
        # what a sender read that was not its answer, for the loop, in the order read
        self._forwarded: list[RemotingCommand] = []

    def submit_frame(
        self, opaque: int, code: int, frame: bytes, timeout: float, callback: ResponseCallback, body: bytes = b""
    ) -> bool:
        """``invoke_frame`` from any thread when nothing is in flight or queued on the connection;
        False (nothing done) otherwise, or when it is not active: then the loop thread's path takes it.
        Off the loop thread the caller then reads the answer itself and runs ``callback`` before
        this returns."""
        if self._pending:
            return False
        with self._lock:
            if self._pending or self._out.size or self._flush_scheduled or not self.is_active:
                return False
            self._register(opaque, code, timeout, callback)
            # the read is taken from the loop before the request leaves: its answer can be fast
            reads = self._reader is None and self._reading and not self._loop.in_loop_thread()
            if reads:
                self._take_read()
            try:
                written = self._sock.sendmsg((frame, body)) if body else self._sock.send(frame)
            except (BlockingIOError, InterruptedError):
                written = 0
            except OSError:
                written = 0  # the loop's flush meets the error again and closes the connection
            if written == len(frame) + len(body):
                self.last_active = time.monotonic()
            else:
                if reads:  # the rest waits for the loop's flush: so does the answer
                    self._give_read()
                    reads = False
                _append_rest(self._out, frame, body, written)
                self._flush_scheduled = True
                if self._loop.in_loop_thread():
                    self._loop.mark_dirty(self)
                else:
                    self._loop.call_soon_threadsafe(self._flush)
        if reads:
            self._read_own(opaque, time.monotonic() + timeout)
        return True

    def _take_read(self) -> None:
        """Under the lock: this thread reads the connection, the loop no longer."""
        self._reader = threading.get_ident()
        events = self._events & ~_EPOLLIN
        if events != self._events:
            self._events = events
            self._loop.update_handler(self._fd, events)

    def _give_read(self) -> None:
        """Under the lock: the loop reads the connection again."""
        self._reader = None
        if self._state is _ACTIVE and self._reading and not self._events & _EPOLLIN:
            self._events |= _EPOLLIN
            self._loop.update_handler(self._fd, self._events)

    def _read_own(self, opaque: int, deadline: float) -> None:
        """The sender's read of the answer to ``opaque`` (it holds the read): its callback runs here
        once it is read; anything else read goes to the loop."""
        entry = None
        answer = None
        try:
            poller = self._poller
            if poller is None:
                poller = self._poller = select.poll()
                poller.register(self._fd, select.POLLIN)
            while answer is None and opaque in self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not poller.poll(math.ceil(remaining * 1000)):
                    return  # the deadline sweep reports it
                with self._lock:
                    if self._state is not _ACTIVE:
                        return  # closed meanwhile: the close failed the request
                    try:
                        data = self._sock.recv(RECV_SIZE)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        return  # the loop's read meets the error again and closes the connection
                    if not data:
                        return  # the same: the end of the stream stays readable
                    self.last_active = self.read_at = time.monotonic()
                    try:
                        commands = self._decoder.feed(data)
                    except ProtocolError as exc:
                        self._loop.call_soon_threadsafe(
                            self._close,
                            RemotingSendError(f"connection to {self.remote_address} sent a bad frame: {exc}"),
                        )
                        return
                    others = []
                    for cmd in commands:
                        if answer is None and cmd.opaque == opaque and cmd.flag & FLAG_RESPONSE:
                            entry = self._pending.pop(opaque, None)
                            answer = cmd
                        else:
                            others.append(cmd)
                    if others:
                        if not self._forwarded:
                            self._loop.call_soon_threadsafe(self._handle_forwarded)
                        self._forwarded.extend(others)
        finally:
            with self._lock:
                self._give_read()
        if entry is not None:
            if entry[1] is not None:
                entry[1].cancel()
            _run_callback(entry[0], answer, None)

    def _read(self) -> None:
        """The loop's read, unless a sender reads its own answer now; what it decodes is handled
        after the lock is let go (callbacks may send, or block)."""
        with self._lock:
            if self._reader is not None:
                return
            # what a sender read before goes first
            self._deferred, self._forwarded = self._forwarded, []
            try:
                super()._read()
            finally:
                commands, self._deferred = self._deferred, None
        if commands:
            super()._handle(commands)

    def _handle_forwarded(self) -> None:
        with self._lock:
            commands, self._forwarded = self._forwarded, []
        if commands:
            super()._handle(commands)

    def _handle(self, commands: list[RemotingCommand]) -> None:
        deferred = self._deferred
        if deferred is not None:
            deferred.extend(commands)
        else:
            super()._handle(commands)

    def invoke_frame(self, *args: Any, **kwargs: Any) -> None:
        """Loop thread: ``Channel.invoke_frame``, its timeout reported by the deadline sweep."""
        with self._lock:
            self._invoke_frame(*args, **kwargs)

    def _invoke_frame(
        self, opaque: int, code: int, frame: bytes, timeout: float | None, callback: ResponseCallback, body: bytes = b""
    ) -> None:
        if timeout is None or self._state is not _ACTIVE:
            super().invoke_frame(opaque, code, frame, timeout, callback, body)
            return
        # queued behind what is there, written at the end of the loop's iteration
        self._register(opaque, code, timeout, callback)
        self._out.append_frame(frame, body)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.mark_dirty(self)

    def _register(self, opaque: int, code: int, timeout: float, callback: ResponseCallback) -> None:
        """Under the lock: ``opaque`` pending until its answer, or its deadline."""
        deadline = time.monotonic() + timeout
        deadlines = self._deadlines
        if not deadlines or deadlines[-1][0] <= deadline:
            self._pending[opaque] = (callback, None)
            deadlines.append((deadline, opaque, code, timeout))
            if not self._sweep_armed:
                self._sweep_armed = True
                self._loop.call_at(deadline, self._sweep)
        else:  # a shorter timeout than those before it: a timer of its own
            self._pending[opaque] = (callback, self._loop.call_at(deadline, self._expire, opaque, code, timeout))

    def _sweep(self) -> None:
        """Fail the pre-encoded requests past their deadline; drop the answered ones from the front."""
        now = time.monotonic()
        expired = []
        with self._lock:
            deadlines = self._deadlines
            pending = self._pending
            while deadlines and (deadlines[0][0] <= now or deadlines[0][1] not in pending):
                deadline, opaque, code, timeout = deadlines.popleft()
                if deadline <= now:
                    entry = pending.pop(opaque, None)
                    if entry is not None:
                        expired.append((entry[0], opaque, code, timeout))
            if deadlines and self.is_active:
                self._loop.call_at(max(deadlines[0][0], now + SWEEP_GRANULARITY), self._sweep)
            else:
                self._sweep_armed = False
        for callback, opaque, code, timeout in expired:
            error = RemotingTimeoutError(
                f"no answer from {self.remote_address} to request code {code} (opaque {opaque}) within {timeout}s"
            )
            _run_callback(callback, None, error)

    # What the loop thread does to the output and the pending table, under the senders' lock.
    def _queue(self, cmd: RemotingCommand) -> None:
        with self._lock:
            super()._queue(cmd)

    def _flush(self) -> None:
        with self._lock:
            super()._flush()
            if self._reader is not None and self._events & _EPOLLIN:  # a sender reads: keep it so
                self._events &= ~_EPOLLIN
                self._loop.update_handler(self._fd, self._events)

    def invoke_async(self, request: RemotingCommand, timeout: float | None, callback: ResponseCallback) -> None:
        with self._lock:
            super().invoke_async(request, timeout, callback)

    def _close(self, reason: RemotingError | None) -> None:
        with self._lock:
            if self._reader is not None and self._state is _ACTIVE:
                try:  # wakes the sender polling the socket (closing it would not)
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            super()._close(reason)


def _append_rest(out: Any, frame: bytes, body: bytes, written: int) -> None:
    """Queue what a direct write left of ``frame`` + ``body``."""
    if written < len(frame):
        out.append_frame(memoryview(frame)[written:] if written else frame, body)
    else:
        out.append_frame(memoryview(body)[written - len(frame) :])
