"""Load beyond what a broker serves, for the overload tests: a flood of pre-encoded sends from
several raw connections (some never read their answers), a consumer that pulls and never reads,
a broker's memory sampled from /proc, and a disk that stops answering (``msync_stall.c``, preloaded).

The flood runs in a process of its own (``python -m tests.helpers.overload PORT TOPIC SECONDS``), so
that its writing does not take the test process's GIL from the well-behaved probe client; it prints
one JSON line: per kind of connection, the requests written, how many connections the broker
stopped reading, and the answers by code and SYSTEM_BUSY remark (all read in the end).
"""

from __future__ import annotations

import bisect
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from rmq.net import codec_py
from rmq.net.codec import RemotingCommand, encode
from tests.helpers import LOOPBACK
from tests.helpers.processes import process_status
from tests.helpers.requests import pull_request, send_request

STALL_SHIM_SOURCE = Path(__file__).with_name("msync_stall.c")
FLOOD_BODY = b"f" * 512
# connections that write sends as fast as the socket takes them: readers read every answer, the
# others never read until the flood ends (then they drain what the broker still sends them)
FLOOD_READERS = 3
FLOOD_NON_READERS = 3
FRAMES_PER_WRITE = 64
# A connection that does not read writes past the flood's end until its socket has taken nothing for
# NON_READER_STALL s (the broker paused it), for NON_READER_GRACE s at most: on a loaded machine the
# broker serves each connection more slowly, and its answers reach the high-water mark later.
NON_READER_STALL = 1.0
NON_READER_GRACE = 30.0


def build_stall_shim(out_dir: Path) -> Path:
    """Compile ``msync_stall.c`` into ``out_dir``; the shared object's path."""
    shim = out_dir / "msync_stall.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(STALL_SHIM_SOURCE), "-ldl"],
        check=True,
        timeout=60,
    )
    return shim


class MemorySampler:
    """Samples ``process_status(pid)`` (memory, threads, descriptors) every ``interval`` s on a
    thread of its own until ``stop``."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.pid = pid
        self.interval = interval
        self.samples: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(process_status(self.pid))
            except OSError:
                return  # the process is gone
            self._stop.wait(self.interval)

    def peak(self, key: str) -> int:
        return max(sample[key] for sample in self.samples)


def _frames(requests: list[RemotingCommand]) -> tuple[bytes, list[int]]:
    """The requests encoded back to back, each with its own opaque, and where each frame ends."""
    frames = []
    for opaque, request in enumerate(requests, 1):
        request.opaque = opaque
        frames.append(encode(request))
    return b"".join(frames), list(itertools.accumulate(len(frame) for frame in frames))


def _write_until(
    sock: socket.socket, data: bytes, ends: list[int], deadline: float, stall: float | None = None
) -> tuple[int, bool]:
    """Write ``data`` again and again until ``deadline`` or, given ``stall``, until the socket has
    taken nothing for ``stall`` seconds: the whole frames that went, and whether the socket stopped
    taking them (the broker stopped reading this connection)."""
    sent = 0
    view = memoryview(data)
    while time.monotonic() < deadline:
        sock.settimeout(stall if stall is not None else max(0.01, deadline - time.monotonic()))
        try:
            sent += sock.send(view[sent % len(data) :])
        except TimeoutError:
            copies, rest = divmod(sent, len(data))
            return copies * len(ends) + bisect.bisect_right(ends, rest), True
    copies, rest = divmod(sent, len(data))
    return copies * len(ends) + bisect.bisect_right(ends, rest), False


def _read_answers(sock: socket.socket, tally: Counter, stop: threading.Event, linger: float) -> None:
    """Count answers by code (``code:N``) and SYSTEM_BUSY ones by remark prefix (``[OVERLOAD]``...)
    until ``stop`` is set and then ``linger`` seconds pass without an answer."""
    decoder = codec_py.FrameDecoder()
    sock.settimeout(0.2)
    quiet_since = None
    while True:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            if stop.is_set():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > linger:
                    return
            continue
        except OSError:
            return
        if not data:
            return
        quiet_since = None
        for answer in decoder.feed(data):
            tally[f"code:{answer.code}"] += 1
            remark = answer.remark or ""
            if remark.startswith("[") and "]" in remark:
                tally[remark[: remark.index("]") + 1]] += 1


def flood(port: int, topic: str, seconds: float) -> dict[str, dict[str, int]]:
    """The flood (module docstring): per kind of connection (readers, non_readers, pulls), the
    requests written and the answers read, by code and by SYSTEM_BUSY remark."""
    sends = _frames([send_request(topic, FLOOD_BODY, queue_id=i % 4) for i in range(FRAMES_PER_WRITE)])
    pulls = _frames([pull_request(topic, i % 4, 0, max_msgs=1000) for i in range(FRAMES_PER_WRITE)])
    deadline = time.monotonic() + seconds
    over = threading.Event()
    tallies: dict[str, Counter] = {"readers": Counter(), "non_readers": Counter(), "pulls": Counter()}
    lock = threading.Lock()

    def connection(kind: str, payload: tuple[bytes, list[int]], reads: bool) -> None:
        tally: Counter = Counter()
        with socket.create_connection((LOOPBACK, port)) as sock:
            reader = None
            if reads:
                reader = threading.Thread(target=_read_answers, args=(sock, tally, over, 1.0))
                reader.start()
            if reads:
                written, stalled = _write_until(sock, *payload, deadline)
            else:  # on until the broker stops reading it, however slowly a loaded machine gets there
                written, stalled = _write_until(sock, *payload, deadline + NON_READER_GRACE, NON_READER_STALL)
            tally["written"] += written
            tally["stalled"] += stalled
            over.wait()
            if reader is None:  # now read what the broker held for this connection
                _read_answers(sock, tally, over, 1.0)
            else:
                reader.join()
        with lock:
            tallies[kind].update(tally)

    plan = [("readers", sends, True)] * FLOOD_READERS + [("non_readers", sends, False)] * FLOOD_NON_READERS
    threads = [threading.Thread(target=connection, args=args) for args in [*plan, ("pulls", pulls, False)]]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, deadline - time.monotonic()))
    over.set()
    for thread in threads:
        thread.join()
    return {kind: dict(tally) for kind, tally in tallies.items()}


if __name__ == "__main__":
    print(json.dumps(flood(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))))
