"""A slave on the HA port built by hand (docs/replication.md#the-stream and ``rmq.protocol.ha``'s authentication):
it copies nothing and acks what it is sent, the fake that cluster authentication keeps out."""

from __future__ import annotations

import os
import socket
import threading

from rmq.protocol import ha as wire
from tests.helpers import LOOPBACK


class FakeSlave:
    """Connects to a master's HA port, authenticates with ``credentials`` (access key, secret) if
    given, reports 0 and then, on a thread, acks the end of every frame it receives, storing
    nothing; past offset ``over_ack_from``, ``over_ack`` bytes more than it received.
    ``data_bytes``: CommitLog bytes received; ``closed``: set once the master closed the connection."""

    def __init__(
        self,
        port: int,
        credentials: tuple[str, str] | None = None,
        over_ack: int = 0,
        over_ack_from: int = 0,
        host: str = LOOPBACK,
    ):
        self.sock = socket.create_connection((host, port), timeout=5)
        self.over_ack = over_ack
        self.over_ack_from = over_ack_from
        self.data_bytes = 0
        self.acked = -1
        self.closed = threading.Event()
        self.authenticated = False
        try:
            if credentials is not None:
                self._authenticate(*credentials)
            self.sock.sendall(wire.encode_report(0))
        except OSError:
            pass  # closed by the master: the reader sees it
        self._reader = threading.Thread(target=self._read, name="fake-ha-slave", daemon=True)
        self._reader.start()

    def _authenticate(self, access_key: str, secret: str) -> None:
        nonce = os.urandom(wire.NONCE_SIZE)
        self.sock.sendall(wire.encode_hello(nonce))
        challenge = self._read_exactly(wire.CHALLENGE_SIZE)
        if challenge is None:
            return
        _flags, master_nonce, _proof = wire.decode_challenge(challenge)
        self.sock.sendall(wire.encode_proof(access_key, wire.slave_proof(secret, access_key, master_nonce, nonce)))
        self.authenticated = True

    def _read_exactly(self, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            try:
                got = self.sock.recv(size - len(data))
            except OSError:
                return None
            if not got:
                return None
            data += got
        return data

    def _read(self) -> None:
        buffer = bytearray()
        while True:
            try:
                got = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                break
            if not got:
                break
            buffer += got
            while len(buffer) >= wire.FRAME_HEADER_SIZE:
                start, size = wire.decode_frame_header(buffer)
                if len(buffer) < wire.FRAME_HEADER_SIZE + size:
                    break
                del buffer[: wire.FRAME_HEADER_SIZE + size]
                if size:
                    self.data_bytes += size
                    end = start + size
                    self.acked = end + (self.over_ack if end > self.over_ack_from else 0)
                    try:
                        self.sock.sendall(wire.encode_report(self.acked))
                    except OSError:
                        break
        self.closed.set()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader's recv
        except OSError:
            pass
        self._reader.join(5)
        self.sock.close()

    def __enter__(self) -> FakeSlave:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
