"""A remoting connection on the event loop, and the processor table it dispatches requests to.

Both ends of a connection are alike: either side may send requests (the broker asks a producer
CHECK_TRANSACTION_STATE), so the server's accepted connections and the client's outgoing ones are
the same ``Channel``, attached to an ``Endpoint`` (the server or the client) that holds the
processors. A channel is touched only on its loop's thread; the public methods hop there when called
from another thread.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any

from rmq._log import RateLimitedLog
from rmq._service import TimerHandle
from rmq.errors import (
    ProtocolError,
    RemotingConnectError,
    RemotingError,
    RemotingSendError,
    RemotingTimeoutError,
    RequestRefused,
)
from rmq.net.codec import FrameDecoder, RemotingCommand, encode_head, encode_into
from rmq.net.codec_py import body_parts
from rmq.net.frame import FLAG_ONEWAY, FLAG_RESPONSE, MAX_FRAME_SIZE_DEFAULT
from rmq.net.loop import EventLoop
from rmq.protocol.codes import ResponseCode

if TYPE_CHECKING:
    from rmq.net._codec import FastLane  # compiled only: the pure twin's decoder takes no lane

log = logging.getLogger(__name__)

Handler = Callable[["Channel", RemotingCommand], RemotingCommand | None]
# Called on the loop thread with (response, None) or (None, error).
ResponseCallback = Callable[[RemotingCommand | None, BaseException | None], None]

# Default unsent-output limit past which a connection is no longer read (back-pressure).
MAX_PENDING_OUTPUT_DEFAULT = 8 * 1024 * 1024
# Default bound on the unsent output of all of a server's connections together
# (serverMaxPendingWriteBytes): many connections each under their own limit add up otherwise.
MAX_PENDING_OUTPUT_TOTAL_DEFAULT = 256 * 1024 * 1024
RECV_SIZE = 256 * 1024
# What one read takes when more than two connections are ready in one pass: a connection that
# always has a full socket (a flood) then gets its turn in smaller bites, and a client beside it
# waits for less of it (the overload test's probe: median 7.5 -> 2.3 ms). One or two busy
# connections keep the big read, which batched sends need (at 64 KiB they lost ~9 %).
SHARED_RECV_SIZE = 64 * 1024
# Body buffers above this size are written from where they are (sendmsg), not copied.
COPY_LIMIT = 16 * 1024
IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024)

_EPOLLIN = select.EPOLLIN
_EPOLLOUT = select.EPOLLOUT
_EPOLL_FAILED = select.EPOLLERR | select.EPOLLHUP

_CONNECTING, _ACTIVE, _CLOSED = "connecting", "active", "closed"
# What an unexpected failure's remark keeps of its message.
_MAX_ERROR_REMARK = 512

# Past the total, a flood of connections pauses one after another: one line per interval says so.
_over_total_log = RateLimitedLog(log)


def format_address(address: tuple) -> str:
    return f"{address[0]}:{address[1]}"


class OutputAccount:
    """The unsent output of a group of connections (a server's), and the bound on its total.

    Each connection is bounded on its own (``max_pending_output``), but hundreds of peers that
    pipeline requests and never read would each fill theirs. Past ``limit`` in total, a connection
    is paused as soon as it holds more than its share, ``limit / connections``: those that hold the
    most stop being read, and the total stays under about twice the limit (those under their share
    may still grow to it). A peer that reads its answers drains within the iteration and is read
    again at once. Touched on the loop thread only."""

    __slots__ = ("connections", "limit", "total")

    def __init__(self, limit: int | None = None):
        #: bytes queued on every connection and not yet taken by the kernel
        self.total = 0
        #: the bound on ``total`` (sys.maxsize: none)
        self.limit = limit if limit else sys.maxsize
        #: connections open
        self.connections = 0

    def share(self) -> int:
        """What one connection may hold while the total is past the limit."""
        return self.limit // max(1, self.connections)


class OutputBuffer:
    """Frames waiting to be written: small ones coalesced into bytearrays, big bodies by reference."""

    __slots__ = ("_account", "_parts", "size")

    def __init__(self, account: OutputAccount | None = None) -> None:
        self._parts: deque = deque()
        self.size = 0
        self._account = account if account is not None else OutputAccount()

    def append(self, cmd: RemotingCommand) -> None:
        parts = self._parts
        body = cmd.body
        if parts and type(parts[-1]) is bytearray:
            tail = parts[-1]
        else:
            tail = bytearray()
            parts.append(tail)
        if type(body) is bytes and len(body) <= COPY_LIMIT:
            length = encode_into(tail, cmd)
            self.size += length
            self._account.total += length
            return
        pieces, body_length = body_parts(body)
        head = encode_head(cmd, body_length)
        tail += head
        length = len(head) + body_length
        self.size += length
        self._account.total += length
        for piece in pieces:
            if len(piece) <= COPY_LIMIT and type(parts[-1]) is bytearray:
                parts[-1] += piece
            elif len(piece):
                parts.append(piece)

    def append_frame(self, frame: bytes, body: bytes = b"") -> None:
        """Queue a frame already encoded (``rmq.client.send_wire``), or its head and then its
        ``body``: each copied behind the small ones, or kept by reference when it is big."""
        parts = self._parts
        for piece in (frame, body) if body else (frame,):
            length = len(piece)
            if length > COPY_LIMIT:
                parts.append(piece)
            elif parts and type(parts[-1]) is bytearray:
                parts[-1] += piece
            else:
                parts.append(bytearray(piece))
            self.size += length
            self._account.total += length

    def write_to(self, sock: socket.socket) -> int:
        """Write as much as the socket takes now; the number of bytes written."""
        parts = self._parts
        written = 0
        while parts:
            try:
                if len(parts) == 1:
                    wanted = len(parts[0])
                    n = sock.send(parts[0])
                else:
                    batch = list(islice(parts, 0, IOV_MAX))
                    wanted = sum(len(part) for part in batch)
                    n = sock.sendmsg(batch)
            except (BlockingIOError, InterruptedError):
                break
            written += n
            self.size -= n
            self._account.total -= n
            while n:
                first = parts[0]
                if n >= len(first):
                    n -= len(first)
                    parts.popleft()
                elif type(first) is bytearray:
                    del first[:n]
                    n = 0
                else:
                    parts[0] = memoryview(first)[n:]
                    n = 0
            if written < wanted:
                break
        return written

    def append_frames(self, frames: bytearray) -> None:
        """Whole frames already encoded (a fast lane's answers)."""
        parts = self._parts
        if parts and type(parts[-1]) is bytearray:
            parts[-1] += frames
        else:
            parts.append(bytearray(frames))
        self.size += len(frames)
        self._account.total += len(frames)

    def take_frames(self, frames: bytearray, start: int = 0) -> None:
        """Whole frames already encoded, and big (a fast lane's pull answers), from ``start`` on:
        kept by reference, no longer the caller's. A memoryview, so that a partial write slices it
        instead of moving the rest of it to a new buffer."""
        self._parts.append(memoryview(frames)[start:])
        self.size += len(frames) - start
        self._account.total += len(frames) - start

    def clear(self) -> None:
        self._parts.clear()
        self._account.total -= self.size
        self.size = 0


class Endpoint:
    """What channels dispatch to: processors per request code, and hooks for closed channels."""

    def __init__(self) -> None:
        self._processors: dict[int, Handler] = {}
        self._default_processor: Handler | None = None
        self._closed_callbacks: list[Callable[[Channel], object]] = []
        self._request_check: Callable[[Channel, RemotingCommand], object] | None = None
        self._request_timer: Callable[[int, int | None, float], object] | None = None
        self._fast_lane: FastLane | None = None
        # A peer repeating a bad request or frame gets a line per key now and then, not one per request.
        self.rate_limited_log = RateLimitedLog(log)

    def register_processor(self, code: int, handler: Handler) -> None:
        """``handler(channel, request)`` answers requests of ``code``: it returns the response, or
        None when it answers later with ``channel.send_response`` (or the request is oneway). A
        handler that raises ``RequestRefused`` is answered with the refusal's code and remark."""
        self._processors[int(code)] = handler

    def register_default_processor(self, handler: Handler) -> None:
        """The handler for request codes without a processor of their own."""
        self._default_processor = handler

    def set_request_check(self, check: Callable[[Channel, RemotingCommand], object] | None) -> None:
        """Run ``check(channel, request)`` before every request's processor (RocketMQ's server
        RPCHook, where its ACL runs): a check that raises ``RequestRefused`` answers the refusal
        instead, and the processor never sees the request."""
        self._request_check = check

    def set_fast_lane(self, lane: FastLane | None) -> None:
        """Offer every request read to ``lane`` before decoding it for the processors (the broker's
        compiled send lane); not while a request check or timer is set: those see every request."""
        self._fast_lane = lane

    def open_lane(self) -> FastLane | None:
        """The fast lane the requests of a read are offered to now, if any."""
        if self._request_check is None and self._request_timer is None:
            return self._fast_lane
        return None

    def on_channel_closed(self, callback: Callable[[Channel], object]) -> None:
        """Call ``callback(channel)`` on the loop thread whenever a channel closes (its result is ignored)."""
        self._closed_callbacks.append(callback)

    def _channel_closed(self, channel: Channel) -> None:
        for callback in self._closed_callbacks:
            try:
                callback(channel)
            except Exception:
                log.exception("channel-closed callback %r failed for %s", callback, channel.remote_address)

    def set_request_timer(self, timer: Callable[[int, int | None, float], object] | None) -> None:
        """Call ``timer(request_code, response_code, seconds)`` once every request is answered: the
        seconds from its dispatch (``time.perf_counter``) to its answer being queued, its response
        code (None for a oneway request, timed to its processor's return). A request answered later
        (``channel.send_response``) is timed then, with the code it was answered with."""
        self._request_timer = timer

    def dispatch(self, channel: Any, request: RemotingCommand) -> None:
        """Loop thread: serve ``request`` as if read from ``channel``, a connection or a stand-in
        for one (a ``PeerChannel``: rmq.proxy.bridge's LocalChannel, which also has ``send_oneway``):
        the same request check, timer and processors."""
        self._dispatch(channel, request)

    def channel_closed(self, channel: Any) -> None:
        """Loop thread: forget ``channel`` as a closed connection is forgotten (its clients); the
        closed-channel callbacks only: a stand-in was never one of a server's sockets."""
        Endpoint._channel_closed(self, channel)

    def _dispatch(self, channel: Channel, request: RemotingCommand) -> None:
        timer = self._request_timer
        if timer is None:
            self._process(channel, request)
            return
        start = time.perf_counter()
        response_code = self._process(channel, request)
        if response_code is None and not request.flag & FLAG_ONEWAY:
            channel._answers_due[request.opaque] = (request.code, start, timer)  # answered later
            return
        timer(request.code, response_code, time.perf_counter() - start)

    def _process(self, channel: Channel, request: RemotingCommand) -> int | None:
        """Hand ``request`` to its processor; the code it was answered with now, if it was."""
        handler = self._processors.get(request.code, self._default_processor)
        if handler is None:
            self.rate_limited_log.log(
                logging.DEBUG,
                ("unsupported", channel.remote_host),
                "request code %d from %s not supported",
                request.code,
                channel.remote_address,
            )
            if request.flag & FLAG_ONEWAY:
                return None
            _answer_error(channel, request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "not supported")
            return ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        response = self._run_handler(channel, request, handler, self._request_check)
        if response is None or request.flag & FLAG_ONEWAY:
            return None
        channel._queue(response)  # on the loop thread: no hop to check for
        return response.code

    def answer_later(self, channel: Channel, request: RemotingCommand, handler: Handler) -> None:
        """Loop thread: answer ``request``, whose processor returned None, with what ``handler``
        returns now (a refusal it raises, or its failure, answered as a processor's are); None
        again: it answers later still."""
        response = self._run_handler(channel, request, handler, None)
        if response is not None and not request.flag & FLAG_ONEWAY:
            channel.send_response(response)

    def _run_handler(
        self,
        channel: Channel,
        request: RemotingCommand,
        handler: Handler,
        check: Callable[[Channel, RemotingCommand], object] | None,
    ) -> RemotingCommand | None:
        try:
            if check is not None:
                check(channel, request)
            return handler(channel, request)
        except RequestRefused as refusal:
            # keyed without the remark: a client repeating a bad request with variations is one key
            self.rate_limited_log.log(
                logging.INFO,
                ("refused", request.code, refusal.code, channel.remote_host),
                "refused request code %d from %s: %s (code %d)",
                request.code,
                channel.remote_address,
                refusal.remark,
                refusal.code,
            )
            return RemotingCommand.response_to(request, refusal.code, remark=refusal.remark)
        except Exception as exc:
            self.rate_limited_log.exception(
                ("failed", request.code, type(exc), channel.remote_host),
                "processor for request code %d from %s failed",
                request.code,
                channel.remote_address,
            )
            remark = f"request code {request.code} failed: {type(exc).__name__}: {exc}"
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=remark[:_MAX_ERROR_REMARK])


class PeerChannel:
    """What an endpoint's processors answer on: a connection (``Channel``) or a stand-in for one
    (rmq.proxy.bridge's ``LocalChannel``, a gRPC client served in process). Both keep the
    request timer's books the same way: a request answered later is timed until ``send_response``."""

    def __init__(self, remote_address: str) -> None:
        self.remote_address = remote_address
        # requests answered later, with a request timer: opaque -> (request code, start, timer)
        self._answers_due: dict[int, tuple[int, float, Callable[[int, int | None, float], object]]] = {}

    @property
    def remote_host(self) -> str:
        """The peer's address without its port: one client however often it reconnects."""
        return self.remote_address.rpartition(":")[0]

    def send_response(self, response: RemotingCommand) -> None:
        """Send an answer (any thread)."""
        if self._answers_due:
            due = self._answers_due.pop(response.opaque, None)
            if due is not None:
                request_code, start, timer = due
                timer(request_code, response.code, time.perf_counter() - start)
        self._send(response)

    def _send(self, cmd: RemotingCommand) -> None:
        raise NotImplementedError


class Channel(PeerChannel):
    """One TCP connection carrying remoting frames both ways, many requests in flight. An answer
    (``send_response``) is queued and goes out at the end of the loop iteration."""

    def __init__(
        self,
        loop: EventLoop,
        sock: socket.socket,
        endpoint: Endpoint,
        remote_address: str,
        *,
        max_frame_size: int = MAX_FRAME_SIZE_DEFAULT,
        max_pending_output: int = MAX_PENDING_OUTPUT_DEFAULT,
        output_account: OutputAccount | None = None,
        connecting: bool = False,
    ):
        """``output_account``: the group whose total unsent output is bounded too (a server's)."""
        super().__init__(remote_address)
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._endpoint = endpoint
        self._decoder = FrameDecoder(max_frame_size)
        # what the endpoint's fast lane keeps of this connection (FastLane.connect), once asked
        self._lane_peer: object = None
        self._lane_connected = False
        self._lane_answers = bytearray()
        self._account = output_account if output_account is not None else OutputAccount()
        self._account.connections += 1
        self._out = OutputBuffer(self._account)
        self._max_pending_output = max_pending_output
        # the unsent output a paused connection must drain to before it is read again
        self._resume_mark = max_pending_output // 2
        self._pending: dict[int, tuple[ResponseCallback, TimerHandle | None]] = {}
        self._state = _CONNECTING if connecting else _ACTIVE
        self._reading = True
        # Requests read but not yet handed to processors, held while the peer does not read.
        self._backlog: list[RemotingCommand] = []
        self._pauses = 0
        self._flush_scheduled = False
        self._events = _EPOLLOUT if connecting else _EPOLLIN
        self.last_active = time.monotonic()
        # When the requests being handled were read: a backlog keeps the time of its read, so a
        # processor sees how long a request waited in the broker (waitTimeMillsInSendQueue).
        self.read_at = self.last_active
        # When the frame (or TLS handshake) not yet complete began; None between frames.
        self.incomplete_since: float | None = None
        loop.add_handler(self._fd, self._events, self._on_events)

    def __repr__(self) -> str:
        return f"<Channel {self.remote_address} {self._state}>"

    @property
    def is_active(self) -> bool:
        return self._state is _ACTIVE

    @property
    def pending_output(self) -> int:
        """Bytes queued for this connection and not yet taken by the kernel."""
        return self._out.size

    # -- sending ------------------------------------------------------------------------------

    def send_oneway(self, request: RemotingCommand) -> None:
        """Send a request that gets no answer."""
        request.flag |= FLAG_ONEWAY
        self._send(request)

    def invoke_async(self, request: RemotingCommand, timeout: float | None, callback: ResponseCallback) -> None:
        """Send ``request``; ``callback(response, None)`` or ``callback(None, error)`` runs on the loop
        thread once the answer arrives, ``timeout`` seconds pass (RemotingTimeoutError) or the
        connection closes."""
        if not self._loop.in_loop_thread():
            self._loop.call_soon_threadsafe(self.invoke_async, request, timeout, callback)
            return
        if self._state is _CLOSED:
            _run_callback(callback, None, RemotingSendError(f"connection to {self.remote_address} is closed"))
            return
        timer = None
        if timeout is not None:
            timer = self._loop.call_later(timeout, self._expire, request.opaque, request.code, timeout)
        self._pending[request.opaque] = (callback, timer)
        self._send(request)

    def invoke_frame(
        self,
        opaque: int,
        code: int,
        frame: bytes,
        timeout: float | None,
        callback: ResponseCallback,
        body: bytes = b"",
    ) -> None:
        """``invoke_async`` for a request already encoded to ``frame`` (its ``opaque`` and ``code``
        are those in the frame), or to ``frame`` and then ``body``. Loop thread only."""
        if self._state is _CLOSED:
            _run_callback(callback, None, RemotingSendError(f"connection to {self.remote_address} is closed"))
            return
        timer = None
        if timeout is not None:
            timer = self._loop.call_later(timeout, self._expire, opaque, code, timeout)
        self._pending[opaque] = (callback, timer)
        self._out.append_frame(frame, body)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.mark_dirty(self)

    def _expire(self, opaque: int, code: int, timeout: float) -> None:
        entry = self._pending.pop(opaque, None)
        if entry is not None:
            error = RemotingTimeoutError(
                f"no answer from {self.remote_address} to request code {code} (opaque {opaque}) within {timeout}s"
            )
            _run_callback(entry[0], None, error)

    def forget(self, opaque: int) -> None:
        """Drop the pending request ``opaque`` without calling its callback (its caller gave up)."""
        entry = self._pending.pop(opaque, None)
        if entry is not None and entry[1] is not None:
            entry[1].cancel()

    def _send(self, cmd: RemotingCommand) -> None:
        if self._loop._thread_id != threading.get_ident():
            self._loop.call_soon_threadsafe(self._queue, cmd)
            return
        self._queue(cmd)

    def _queue(self, cmd: RemotingCommand) -> None:
        """``_send`` on the loop thread."""
        if self._state is _CLOSED:
            log.debug("dropped %r: connection to %s closed", cmd, self.remote_address)
            return
        try:
            self._out.append(cmd)
        except Exception:
            # A command that cannot be encoded (a body that is no buffer, ext keys that are no
            # strings) is a bug of its sender: drop it, keep the connection and its other answers.
            log.exception(
                "cannot encode command code %s opaque %s for %s: dropped", cmd.code, cmd.opaque, self.remote_address
            )
            return
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.mark_dirty(self)

    def _queue_frames(self, frames: bytearray) -> None:
        """Whole answer frames a fast lane completed after the read (SYNC_FLUSH sends, once their
        flush round ended); any thread: a store shutting down completes what still waits on its own."""
        if self._loop._thread_id != threading.get_ident():
            try:
                self._loop.call_soon_threadsafe(self._queue_frames, frames)
            except RuntimeError:
                pass  # the loop is closed: so is the connection
            return
        if self._state is _CLOSED:
            return
        self._out.append_frames(frames)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.mark_dirty(self)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._state is not _ACTIVE:
            return
        out = self._out
        if out.size:
            try:
                if out.write_to(self._sock):
                    self.last_active = time.monotonic()
            except OSError as exc:
                self._close(RemotingSendError(f"send to {self.remote_address} failed: {exc}"))
                return
        pending = out.size
        if not self._reading and pending <= self._resume_mark:
            # Back-pressure with hysteresis: resume once half of the backlog has drained.
            self._reading = True
            backlog, self._backlog = self._backlog, []
            self._handle(backlog)
            if self._state is _CLOSED:
                return
            pending = out.size
        events = (_EPOLLIN if self._reading else 0) | (_EPOLLOUT if pending else 0)
        if events != self._events:
            self._events = events
            self._loop.update_handler(self._fd, events)

    # -- receiving ----------------------------------------------------------------------------

    def _on_events(self, mask: int) -> None:
        if self._state is _CONNECTING:
            self._finish_connect()
            return
        if mask & _EPOLLOUT:
            self._flush()
            if self._state is _CLOSED:
                return
        if self._reading and mask & (_EPOLLIN | _EPOLL_FAILED):
            self._read()
        elif mask & _EPOLL_FAILED:
            self._close(RemotingSendError(f"connection to {self.remote_address} failed"))

    def _read(self) -> None:
        try:
            data = self._sock.recv(RECV_SIZE if self._loop.events_ready <= 2 else SHARED_RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(RemotingSendError(f"connection to {self.remote_address} broke: {exc}"))
            return
        if not data:
            self._close(None)
            return
        self.last_active = self.read_at = now = time.monotonic()
        lane = self._endpoint.open_lane()
        served = 0
        try:
            if lane is None:
                commands = self._decoder.feed(data)
            else:
                served = self._decoder.lane_served
                commands = self._feed_lane(lane, data)
                served = self._decoder.lane_served - served
        except ProtocolError as exc:
            self._endpoint.rate_limited_log.warning(
                ("bad frame", self.remote_host), "closing connection from %s: %s", self.remote_address, exc
            )
            self._close(RemotingSendError(f"connection to {self.remote_address} sent a bad frame: {exc}"))
            return
        if not self._decoder.buffered:
            self.incomplete_since = None
        elif commands or served or self.incomplete_since is None:
            self.incomplete_since = now  # the frame left incomplete began in these bytes
        if served and self._over_output_limit() and self._hold_back():
            # the lane's answers filled the output: what it left waits, as in _handle
            self._backlog.extend(commands)
            return
        self._handle(commands)

    def _over_output_limit(self) -> bool:
        account = self._account
        return self._out.size > self._max_pending_output or account.total > account.limit

    def _feed_lane(self, lane: FastLane, data: bytes) -> list[RemotingCommand]:
        """Decode ``data`` with ``lane`` serving what it can; its answers queued after the read. (Not
        written into the output as they come: what the lane wakes, a parked pull, answers there.)"""
        if not self._lane_connected:
            self._lane_peer = lane.connect(self.remote_address, self._queue_frames)
            self._lane_connected = True
        out = self._out
        account = self._account
        answers = self._lane_answers
        # past either bound the processors would hold the rest back: so does the lane
        room = min(self._max_pending_output - out.size, account.limit - account.total, sys.maxsize)
        try:
            commands = self._decoder.feed(data, lane, self._lane_peer, answers, max(room, 0))
        except BaseException:
            if answers:
                self._queue_lane_answers(answers, 0)
            raise
        if answers:
            sent = 0
            if not commands and not out.size and len(answers) <= COPY_LIMIT and type(self._sock) is socket.socket:
                # The read's every frame was the lane's and nothing was queued before its answers:
                # they go now, one send, instead of through the output at the end of the iteration.
                # Plain sockets only (a TLS channel's _flush also pushes the records left behind);
                # small answers only: a pull lane's (a bytearray of hundreds of KiB) went out this
                # way at a third of its rate (2.3M -> 0.5-0.9M msgs/s, pulls of 32 at 16 in flight),
                # its buffer emptied and grown again every read, where the output takes it whole.
                try:
                    sent = self._sock.send(answers)
                except OSError:
                    pass  # full (the output takes the rest), or broken: _flush meets it and closes
                if sent == len(answers):
                    answers.clear()
                    return commands
            self._queue_lane_answers(answers, sent)
        return commands

    def _queue_lane_answers(self, answers: bytearray, sent: int) -> None:
        """The lane's answers from ``sent`` on into the output, ``answers`` left empty."""
        if len(answers) - sent > COPY_LIMIT:
            # handed over, not copied (a pull lane's answers carry their messages)
            self._out.take_frames(answers, sent)
            self._lane_answers = bytearray()
        else:
            self._out.append_frames(answers[sent:] if sent else answers)
            answers.clear()
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.mark_dirty(self)

    def _handle(self, commands: list[RemotingCommand]) -> None:
        endpoint = self._endpoint
        out = self._out
        account = self._account
        for index, cmd in enumerate(commands):
            if cmd.flag & FLAG_RESPONSE:
                entry = self._pending.pop(cmd.opaque, None)
                if entry is None:
                    log.debug("answer from %s to unknown opaque %d (given up?)", self.remote_address, cmd.opaque)
                    continue
                if entry[1] is not None:
                    entry[1].cancel()
                _run_callback(entry[0], cmd, None)
            else:
                endpoint._dispatch(self, cmd)
            if self._state is _CLOSED:
                return
            if (out.size > self._max_pending_output or account.total > account.limit) and self._hold_back():
                self._backlog.extend(commands[index + 1 :])
                return

    def _hold_back(self) -> bool:
        """True when this connection holds too much unsent output to be read on: more than its own
        limit, or more than its share while all connections together are past theirs. Its peer
        does not read its answers (fast enough): stop reading it (and handing its requests to
        processors) until they drain, so that neither its backlog nor the total can grow without bound."""
        size = self._out.size
        account = self._account
        mark = self._max_pending_output
        over_total = account.total > account.limit
        if over_total:
            mark = min(mark, account.share())
        if size <= mark:
            return False
        if self._reading:
            self._reading = False
            # Back-pressure with hysteresis: resume once half of it has drained.
            self._resume_mark = mark // 2
            self._pauses += 1
            if over_total:
                _over_total_log.warning(
                    "total",
                    "unsent answers of all connections past %d bytes (serverMaxPendingWriteBytes): "
                    "pausing the input of each connection holding more than %d, such as %s (%d bytes)",
                    account.limit,
                    mark,
                    self.remote_address,
                    size,
                )
            else:
                # once per connection: a slow reader pauses again every time half drained
                log.log(
                    logging.WARNING if self._pauses == 1 else logging.DEBUG,
                    "%s does not read its answers: %d bytes unsent, pausing its input",
                    self.remote_address,
                    size,
                )
        return True

    # -- connecting (client side) -------------------------------------------------------------

    def _finish_connect(self) -> None:
        err = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._close(RemotingConnectError(f"cannot connect to {self.remote_address}: {os.strerror(err)}"))
            return
        self._state = _ACTIVE
        self.last_active = time.monotonic()
        self._events = _EPOLLIN
        self._loop.update_handler(self._fd, _EPOLLIN)
        self._flush()

    # -- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (any thread); requests still waiting for answers fail."""
        if self._loop.in_loop_thread():
            self._close(None)
        else:
            self._loop.call_soon_threadsafe(self._close, None)

    def _close(self, reason: RemotingError | None) -> None:
        if self._state is _CLOSED:
            return
        self._state = _CLOSED
        self._loop.remove_handler(self._fd)
        self._sock.close()
        self._out.clear()
        self._backlog = []
        # the lane's peer holds this channel's _queue_frames: a cycle the garbage collector would
        # have to find, holding every closed connection's buffers until it runs
        self._lane_peer = None
        self._account.connections -= 1
        pending, self._pending = self._pending, {}
        if pending:
            error = reason or RemotingSendError(f"connection to {self.remote_address} closed before the answer")
            for callback, timer in pending.values():
                if timer is not None:
                    timer.cancel()
                _run_callback(callback, None, error)
        self._endpoint._channel_closed(self)


def _answer_error(channel: Channel, request: RemotingCommand, code: int, what: str) -> None:
    remark = f"request code {request.code} {what}"
    channel.send_response(RemotingCommand.response_to(request, code, remark=remark))


def _run_callback(callback: ResponseCallback, response, error) -> None:
    try:
        callback(response, error)
    except Exception:
        log.exception("response callback %r failed", callback)
