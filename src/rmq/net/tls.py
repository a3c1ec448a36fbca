"""TLS on the event loop: a Channel whose bytes go through the standard ``ssl`` module's memory BIOs.

    server: RemotingServer(..., tls=TlsServerOptions(context, mode))   permissive | enforcing
    client: RemotingClient(tls=True | ssl.SSLContext)

No thread and no blocking call: the socket stays the loop's non-blocking socket, and an
``ssl.SSLObject`` turns what ``recv`` brings into plaintext and plaintext into records to ``send``
(``TlsSocket``, a stand-in for the socket the Channel reads and writes). The handshake runs on the
same readiness events; requests queued before it ends go out once it has.

A server in ``permissive`` mode (RocketMQ 4.x's default ``tls.server.mode``) serves both kinds of
client on one port by a connection's first byte, as RocketMQ's HandshakeHandler does; ``enforcing``
only TLS (``rmq.protocol.tls``).
"""

from __future__ import annotations

import dataclasses
import logging
import select
import socket
import ssl
import time
from typing import Any

from rmq.errors import RemotingSendError
from rmq.net.channel import Channel
from rmq.protocol.tls import TLS_HANDSHAKE_RECORD, TlsMode

log = logging.getLogger(__name__)

# Ciphertext waiting for the socket past which no more plaintext is taken (the Channel's own output
# buffer then holds it, and its back-pressure applies).
CIPHER_BACKLOG_LIMIT = 1 << 20
_READ_CHUNK = 256 * 1024


@dataclasses.dataclass(frozen=True)
class TlsServerOptions:
    context: ssl.SSLContext
    mode: TlsMode = TlsMode.PERMISSIVE


def server_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """A server context with the certificate chain and key (PEM files); ssl.SSLError or OSError
    naming what is wrong with them."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_path, key_path)
    return context


def client_context(tls: bool | ssl.SSLContext) -> ssl.SSLContext:
    """The context a client connects with: the one given, or for ``True`` one that verifies the
    server's certificate against the system's CAs (not its host name: brokers are addressed by IP)."""
    if isinstance(tls, ssl.SSLContext):
        return tls
    context = ssl.create_default_context()
    context.check_hostname = False
    return context


class TlsSocket:
    """The non-blocking socket a Channel uses, speaking TLS: ``recv`` answers plaintext (or raises
    BlockingIOError when a record is incomplete or the handshake goes on), ``send``/``sendmsg`` take
    plaintext and push the records out as far as the socket takes them."""

    def __init__(
        self, sock: socket.socket, ssl_object: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO
    ):
        self._sock = sock
        self._ssl = ssl_object
        self._incoming = incoming
        self._outgoing = outgoing
        self._cipher = bytearray()
        self.handshake_done = False

    @classmethod
    def wrap(cls, sock: socket.socket, context: ssl.SSLContext, server_side: bool) -> TlsSocket:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        return cls(sock, context.wrap_bio(incoming, outgoing, server_side=server_side), incoming, outgoing)

    # -- what Channel asks of a socket, passed through ---------------------------------------

    def fileno(self) -> int:
        return self._sock.fileno()

    def getsockopt(self, *args):  # type: ignore[no-untyped-def]
        return self._sock.getsockopt(*args)

    def close(self) -> None:
        self._sock.close()

    # -- TLS -----------------------------------------------------------------------------------

    @property
    def cipher_pending(self) -> int:
        """Bytes of records not yet taken by the socket."""
        return len(self._cipher) + self._outgoing.pending

    def push(self) -> None:
        """Write the records waiting as far as the socket takes them now."""
        if self._outgoing.pending:
            self._cipher += self._outgoing.read()
        while self._cipher:
            try:
                n = self._sock.send(self._cipher)
            except (BlockingIOError, InterruptedError):
                return
            del self._cipher[:n]

    def handshake(self) -> bool:
        """One step of the handshake; True once it is done. ssl.SSLError when the peer fails it."""
        if not self.handshake_done:
            try:
                self._ssl.do_handshake()
                self.handshake_done = True
            except ssl.SSLWantReadError:
                pass
            self.push()
        return self.handshake_done

    def recv(self, bufsize: int) -> bytes:
        data = self._sock.recv(bufsize)  # BlockingIOError and OSError go to the Channel as they are
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()
        if not self.handshake():
            if not data:
                return b""
            raise BlockingIOError
        chunks = []
        ended = not data
        while True:
            try:
                chunk = self._ssl.read(_READ_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the peer's close_notify
                ended = True
                break
            except ssl.SSLEOFError:  # the connection ended without close_notify
                ended = True
                break
            if not chunk:
                ended = True
                break
            chunks.append(chunk)
        self.push()  # what reading produced (TLS 1.3 session tickets, key updates)
        if chunks:
            return b"".join(chunks)
        if ended:
            return b""
        raise BlockingIOError

    def _accepting(self) -> None:
        self.push()
        if not self.handshake_done or len(self._cipher) > CIPHER_BACKLOG_LIMIT:
            raise BlockingIOError

    def send(self, data) -> int:  # type: ignore[no-untyped-def]
        self._accepting()
        n = self._ssl.write(data)
        self.push()
        return n

    def sendmsg(self, buffers) -> int:  # type: ignore[no-untyped-def]
        self._accepting()
        n = sum(self._ssl.write(buffer) for buffer in buffers)
        self.push()
        return n


class TlsChannel(Channel):
    """A Channel over TLS; on a server, one that first decides by the connection's first byte
    whether it is TLS at all (``mode``)."""

    def __init__(self, *args: Any, context: ssl.SSLContext, server_mode: TlsMode | None = None, **options: Any):
        """A Channel's arguments, and the context; ``server_mode`` None: the client side, TLS from
        the first byte."""
        self._context = context
        self._server_mode = server_mode
        self._tls: TlsSocket | None = None
        self._sniffing = server_mode is not None
        super().__init__(*args, **options)
        if server_mode is None:
            self._start_tls(server_side=False)

    @property
    def is_tls(self) -> bool:
        return self._tls is not None

    def _start_tls(self, server_side: bool) -> None:
        self._tls = TlsSocket.wrap(self._sock, self._context, server_side)  # type: ignore[arg-type]
        self._sock = self._tls  # type: ignore[assignment]
        self.incomplete_since = time.monotonic()  # the handshake is a frame: it has a time to end

    def _read(self) -> None:
        if self._sniffing and not self._sniff():
            return
        tls = self._tls
        shaking = tls is not None and not tls.handshake_done
        super()._read()
        if shaking and tls is not None and tls.handshake_done and self.is_active:
            if not self._decoder.buffered:
                self.incomplete_since = None
            self._flush()  # what was queued during the handshake

    def _sniff(self) -> bool:
        """Look at the first byte (server side); False while it has not arrived or the connection closed."""
        try:
            first = self._sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            self._sniffing = False
            return True  # the read that follows meets the error and closes
        self._sniffing = False
        if first and first[0] == TLS_HANDSHAKE_RECORD:
            self._start_tls(server_side=True)
        elif first and self._server_mode is TlsMode.ENFORCING:
            log.warning(
                "closing plain connection from %s: this server accepts TLS only (enforcing)", self.remote_address
            )
            self._close(None)
            return False
        return True

    def _flush(self) -> None:
        tls = self._tls
        if tls is None:
            super()._flush()
            return
        if not self.is_active:
            self._flush_scheduled = False
            return
        try:
            if tls.handshake_done:
                tls.push()  # records of answers already taken go first
            else:
                tls.handshake()
        except OSError as exc:  # ssl.SSLError included
            self._flush_scheduled = False
            self._close_failed(exc)
            return
        if not tls.handshake_done:
            self._flush_scheduled = False
            self._want(select.EPOLLIN | (select.EPOLLOUT if tls.cipher_pending else 0))
            return
        super()._flush()
        if self.is_active and tls.cipher_pending and not self._events & select.EPOLLOUT:
            self._want(self._events | select.EPOLLOUT)

    def _want(self, events: int) -> None:
        if events != self._events:
            self._events = events
            self._loop.update_handler(self._fd, events)

    def _close_failed(self, exc: OSError) -> None:
        self._close(RemotingSendError(f"TLS with {self.remote_address} failed: {exc}"))
