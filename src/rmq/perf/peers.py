"""Peers driven with the same load as an rmq cell: the same body size, the same requests in flight
over the same number of connections (``rmq.perf.load`` runs them; only the protocol differs).

``redis``: ``redis-server`` with an append-only file, ``appendfsync always`` for SYNC_FLUSH cells
(fsync before the answer, as SYNC_FLUSH) and ``everysec`` for ASYNC_FLUSH ones; each request is
``XADD rmq-perf MAXLEN ~ 200000 * body <size bytes>`` (the stream is capped so a long run does not
fill memory: Redis keeps a stream in RAM), pipelined RESP on a raw socket, answers in order.

``nats``: ``nats-server -js`` (file storage); each request a JetStream publish whose ack comes
back on a reply subject of its own. NATS 2.9 does not fsync a stream per message (it syncs on an
interval), so only ASYNC_FLUSH cells get a NATS peer: there is no SYNC_FLUSH equivalent to compare.

The two protocols are spoken here on raw sockets rather than through redis-py or nats-py: redis-py
pipelines in rounds (send N, wait for all N), which is not a constant number in flight, and nats-py
is asyncio, whose per-message cost in Python would be measured instead of the server's.

A peer whose server is not on PATH is skipped with a notice (``available``). Peers run batch-1
cells only: neither has a batch of separate messages in one request that would be the same work.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from rmq.perf.cluster import ProcessSampler
from rmq.perf.driver import COMPILED_RESP, Driver, LoadSpec
from rmq.perf.procs import LOOPBACK, free_port, stop_process, wait_for_port

PEERS = ("redis", "nats")
SERVER = {"redis": "redis-server", "nats": "nats-server"}
REDIS_STREAM = b"rmq-perf"
REDIS_MAXLEN = b"200000"
NATS_STREAM = "RMQPERF"
NATS_SUBJECT = "rmq.perf"


def available(peer: str) -> str | None:
    """None when ``peer`` can run here, else the one-line notice saying why it is skipped."""
    if peer not in SERVER:
        return f"peer {peer!r} is not one rmq-perf knows (expected one of {', '.join(PEERS)}): skipped"
    if shutil.which(SERVER[peer]) is None:
        return f"peer {peer}: {SERVER[peer]} is not on PATH, skipped (install it to compare)"
    return None


def flushes(peer: str) -> tuple[str, ...]:
    """The flush modes a peer has an equivalent of."""
    return ("ASYNC_FLUSH", "SYNC_FLUSH") if peer == "redis" else ("ASYNC_FLUSH",)


def peer_mode(peer: str, flush: str) -> str:
    if peer == "redis":
        return "appendfsync=always" if flush == "SYNC_FLUSH" else "appendfsync=everysec"
    return "jetstream=file"


class PeerServer(contextlib.AbstractContextManager["PeerServer"]):
    """A peer's server process on a free port with a data directory of its own."""

    def __init__(self, peer: str, flush: str):
        self.peer, self.flush = peer, flush
        self.root = Path(tempfile.mkdtemp(prefix=f"rmq-perf-{peer}-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PeerServer:
        if self.peer == "redis":
            fsync = "always" if self.flush == "SYNC_FLUSH" else "everysec"
            argv = [SERVER["redis"], "--bind", LOOPBACK, "--port", str(self.port), "--dir", str(self.root)]
            argv += ["--appendonly", "yes", "--appendfsync", fsync, "--save", "", "--daemonize", "no"]
        else:
            argv = [SERVER["nats"], "-js", "-a", LOOPBACK, "-p", str(self.port), "-sd", str(self.root)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(self.port, self.proc, SERVER[self.peer])
            if self.peer == "nats":
                _nats_create_stream(self.port)
        except BaseException:
            self.close()
            raise
        return self

    def sampler(self) -> ProcessSampler:
        assert self.proc is not None
        return ProcessSampler(self.proc.pid, self.root)

    def close(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        shutil.rmtree(self.root, ignore_errors=True)

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


# (key, failure or None, messages): a peer's request carries one message
Answer = tuple[int, str | None, int]


class LineDriver(Driver):
    """A text protocol of CRLF-ended lines, some followed by a payload: ``answer_at`` reads what
    starts at ``pos`` (its line ends at ``eol``)."""

    def __init__(self, spec: LoadSpec, worker: int):
        super().__init__(spec, worker)
        self.buffer = bytearray()

    def answer_at(self, buf: bytearray, pos: int, eol: int) -> tuple[int, Answer | None]:
        """(where the next line starts, the answer completed or None); -1 when the payload is incomplete."""
        raise NotImplementedError

    def feed(self, data: bytes) -> list[Answer]:
        buf = self.buffer
        buf += data
        out: list[Answer] = []
        pos = 0
        while (eol := buf.find(b"\r\n", pos)) >= 0:
            end, answer = self.answer_at(buf, pos, eol)
            if end < 0:
                break
            if answer is not None:
                out.append(answer)
            pos = end
        del buf[:pos]
        return out


class RedisDriver(LineDriver):
    """XADD over RESP; answers come in order: a bulk string (the entry id) or an error."""

    compiled = COMPILED_RESP

    def __init__(self, spec: LoadSpec, worker: int):
        super().__init__(spec, worker)
        args = [b"XADD", REDIS_STREAM, b"MAXLEN", b"~", REDIS_MAXLEN, b"*", b"body", b"x" * spec.size]
        self.request = b"*%d\r\n" % len(args) + b"".join(_bulk(a) for a in args)

    def requests(self, n: int) -> tuple[bytes, list[int]]:
        return self.request * n, []

    def compiled_requests(self) -> list[tuple[bytes, int, int]]:
        return [(self.request, -1, -1)]

    def answer_at(self, buf: bytearray, pos: int, eol: int) -> tuple[int, Answer | None]:
        kind = buf[pos : pos + 1]
        if kind == b"$":
            length = int(buf[pos + 1 : eol])
            end = eol + 2 + max(length, 0) + (2 if length >= 0 else 0)
            return (end, (0, None, 1)) if len(buf) >= end else (-1, None)
        # "+OK", "-ERR ...", ":1": one line
        return eol + 2, (0, None if kind != b"-" else "error:" + bytes(buf[pos + 1 : eol]).decode()[:40], 1)


def _nats_connect(port: int) -> socket.socket:
    sock = socket.create_connection((LOOPBACK, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = sock.makefile("rb")
    info = f.readline()
    if not info.startswith(b"INFO"):
        raise ConnectionError(f"nats-server said {info[:60]!r}, expected INFO")
    options = {"verbose": False, "pedantic": False, "headers": False, "name": "rmq-perf"}
    sock.sendall(b"CONNECT " + json.dumps(options).encode() + b"\r\nPING\r\n")
    while True:
        line = f.readline()
        if line.startswith(b"PONG"):
            return sock
        if not line or line.startswith(b"-ERR"):
            raise ConnectionError(f"nats-server refused the connection: {line!r}")


def _nats_create_stream(port: int) -> None:
    """$JS.API.STREAM.CREATE of the stream the publishes go to (file storage, capped)."""
    config = {"name": NATS_STREAM, "subjects": [NATS_SUBJECT], "storage": "file", "max_msgs": 200000}
    payload = json.dumps(config).encode()
    with _nats_connect(port) as sock:
        sock.sendall(b"SUB _INBOX.create 1\r\n")
        sock.sendall(
            b"PUB $JS.API.STREAM.CREATE.%s _INBOX.create %d\r\n%s\r\n" % (NATS_STREAM.encode(), len(payload), payload)
        )
        f = sock.makefile("rb")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            line = f.readline()
            if line.startswith(b"MSG"):
                answer = f.readline()
                if b'"error"' in answer:
                    raise RuntimeError(f"nats-server did not create the stream: {answer.decode()[:200]}")
                return
            if line.startswith(b"PING"):
                sock.sendall(b"PONG\r\n")
        raise TimeoutError("nats-server did not answer STREAM.CREATE")


class NatsDriver(LineDriver):
    """JetStream publishes; each one's ack arrives as a MSG on ``_INBOX.<worker>.<seq>``."""

    keyed = True

    def __init__(self, spec: LoadSpec, worker: int):
        super().__init__(spec, worker)
        self.body = b"x" * spec.size
        self.inbox = b"_INBOX.w%d." % worker
        self.seq = 0
        self.sock: socket.socket | None = None

    def connect(self) -> socket.socket:
        self.sock = _nats_connect(self.spec.port)
        self.sock.sendall(b"SUB " + self.inbox + b"* 1\r\n")
        return self.sock

    def requests(self, n: int) -> tuple[bytes, list[int]]:
        keys = []
        parts = []
        head = b"PUB " + NATS_SUBJECT.encode() + b" " + self.inbox
        tail = b" %d\r\n%s\r\n" % (len(self.body), self.body)
        for _ in range(n):
            self.seq += 1
            keys.append(self.seq)
            parts.append(head + str(self.seq).encode() + tail)
        return b"".join(parts), keys

    def answer_at(self, buf: bytearray, pos: int, eol: int) -> tuple[int, Answer | None]:
        line = bytes(buf[pos:eol])
        if line.startswith(b"MSG "):
            parts = line.split()
            length = int(parts[-1])
            end = eol + 2 + length + 2
            if len(buf) < end:
                return -1, None
            payload = bytes(buf[eol + 2 : eol + 2 + length])
            key = int(parts[1].rsplit(b".", 1)[1])
            return end, (key, "error" if b'"error"' in payload else None, 1)
        if line.startswith(b"PING") and self.sock is not None:
            self.sock.sendall(b"PONG\r\n")
        return eol + 2, None


def driver_class(system: str) -> type[Driver]:
    if system == "redis":
        return RedisDriver
    if system == "nats":
        return NatsDriver
    raise ValueError(f"system {system!r}, expected rmq or one of {', '.join(PEERS)}")
