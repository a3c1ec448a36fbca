"""A load generator's protocol, ``Driver``, and what it is handed, ``LoadSpec``: below both the loop
(``rmq.perf.load``) and the peers' drivers (``rmq.perf.peers``), which the loop looks up by system
name; the loop re-exports them. Kept apart so that neither module imports the other back.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import socket
from typing import Any

ENGINE_C = "c"
ENGINE_PYTHON = "python"
ENGINES = (ENGINE_C, ENGINE_PYTHON)
ENGINE_ENV = "RMQ_PERF_ENGINE"
# the protocols the compiled loop speaks (Driver.compiled)
COMPILED_REMOTING = "remoting"
COMPILED_RESP = "resp"


def default_engine() -> str:
    """``RMQ_PERF_ENGINE`` when set; else the compiled loop, unless ``RMQ_NO_EXTENSIONS=1`` or a
    checkout whose extensions are not built."""
    engine = os.environ.get(ENGINE_ENV)
    if engine:
        return engine
    if os.environ.get("RMQ_NO_EXTENSIONS") == "1" or importlib.util.find_spec("rmq.perf._loadgen") is None:
        return ENGINE_PYTHON
    return ENGINE_C


@dataclasses.dataclass
class LoadSpec:
    """What to send where: picklable, handed to every worker."""

    system: str  # "rmq", "redis", "nats"
    host: str
    port: int
    topic: str
    size: int = 1024
    batch: int = 1
    in_flight: int = 1  # in total, over all workers
    workers: int = 1
    rate: float = 0.0  # msgs/s in total; 0 = closed loop
    duration: float = 10.0
    warmup: float = 0.0
    interval: float = 1.0
    tags: str = ""
    queues: int = 4
    options: dict[str, Any] = dataclasses.field(default_factory=dict)  # a peer's own (stream name, ...)
    engine: str = dataclasses.field(default_factory=default_engine)  # one of ENGINES
    # a rate profile: (msgs/s in total, seconds) steps run in turn from the recording's start, the
    # last one to the end; the warm-up runs at the first. Empty: ``rate`` throughout.
    profile: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"load engine {self.engine!r}, expected one of {', '.join(ENGINES)}")
        if self.profile and any(rate <= 0 or seconds <= 0 for rate, seconds in self.profile):
            raise ValueError(f"rate profile {self.profile}: expected steps of a positive rate and seconds")

    def rate_at(self, index: int) -> float:
        """msgs/s in total during interval ``index`` (0: the first recorded; the warm-up's too).
        A step starts at the interval its start falls in: profiles step on whole intervals."""
        if not self.profile:
            return self.rate
        t = index * self.interval
        start = 0.0
        for rate, seconds in self.profile:
            start += seconds
            if t < start - 1e-9:
                return rate
        return self.profile[-1][0]

    def share(self, worker: int) -> tuple[int, float]:
        """(in-flight, msgs/s) of one worker."""
        workers = self.effective_workers
        base, extra = divmod(self.in_flight, workers)
        return base + (1 if worker < extra else 0), self.rate_at(0) / workers

    @property
    def effective_workers(self) -> int:
        """No more workers than requests in flight: a worker with none would only idle."""
        return max(1, min(self.workers, self.in_flight))

    @property
    def intervals(self) -> int:
        return max(1, round(self.duration / self.interval))


class Driver:
    """A protocol: ``connect``, then ``requests(n)`` to send and ``feed(data)`` for what came back.
    ``keyed``: answers name their request (a key ``requests`` returned); otherwise they come in order.
    ``compiled``: the protocol the compiled loop speaks for it (``compiled_requests`` are its
    requests, ``compiled_walk`` where pulls put their offsets), None when only the Python loop can
    drive it."""

    keyed = False
    compiled: str | None = None

    def __init__(self, spec: LoadSpec, worker: int):
        self.spec = spec
        self.worker = worker

    def connect(self) -> socket.socket:
        sock = socket.create_connection((self.spec.host, self.spec.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def requests(self, n: int) -> tuple[bytes, list[int]]:
        raise NotImplementedError

    def feed(self, data: bytes) -> list[tuple[int, str | None, int]]:
        """The answers completed by ``data``: (key, None when it succeeded, else its failure code,
        the messages it carried or failed)."""
        raise NotImplementedError

    def compiled_requests(self) -> list[tuple[bytes, int, int]]:
        """The compiled loop's requests, sent in turn: (the encoded request, where its opaque's
        digits go, where its born timestamp's 13 digits go; -1: nowhere)."""
        raise NotImplementedError

    def compiled_walk(self) -> tuple[list[int], list[int]] | None:
        """Pulls: where each compiled request's queueOffset "0" is, and its queue's max offset."""
        return None
