"""Load that does not measure itself: worker processes, each pipelined over its own connection.

``run_load(spec, on_interval)`` starts ``spec.workers`` processes (multiprocessing, spawn). The
total in-flight is split over them as evenly as it goes (16 over 3 workers: 6, 5, 5), each worker
keeping its share outstanding on one connection of its own, so ``connections == workers``; a target
rate is split the same way. Every worker sends from a common start (after ``warmup`` seconds that
are not recorded) and reports each interval to the parent: messages sent and acked, failures by
code, the latency histogram of its acked requests, and the CPU seconds it used, from which the
parent tells whether the generator itself was the bottleneck (``saturated``: its processes used
>= 90 % of the cores they could have had), and how late a worker woke from its waits at worst
(``wake_late_max_s``: it asked to wake when a request fell due or an interval ended, and the
machine ran it that much later). On a machine shared with other work a latency spike with a late
wake-up of the same size is the generator's own stall, not the broker's.

Latency, wrk2 style: in an open-loop run (``rate`` > 0) request k is *due* at start + k / rate and
its latency runs from that intended time, so a broker that stalls is charged for every request that
should have gone out meanwhile, not only for the one that was stuck (no coordinated omission). In a
closed-loop run (``rate`` 0: as fast as answers come back) latency runs from the actual send.
A rate profile (``LoadSpec.profile``: 2K msgs/s, then 60 s at 8K, ...) steps the rate at interval
boundaries, the due times running on across a step, so the offered load is the profile's exactly.
A batch request's latency counts once per message in it, so a histogram's total equals ``acked``.

A protocol is a ``Driver``: it builds requests and parses answers (rmq's remoting frames here,
Redis and NATS in ``rmq.perf.peers``); the loop, timing and reporting are the same for all.
System ``rmq-pull`` pulls instead of sending: PULL_MESSAGE of ``batch`` messages walking each of
``queues`` queues from offset 0 and back to it before the queue's max offset (``options``
"max_offsets", one per queue) so that every pull finds a full batch; a message counts as acked
when a FOUND answer carries it (its records counted in the body), the latency is the pull's.

Two engines run that loop, one semantics: ``c`` (the default), ``rmq.perf._loadgen``, compiled,
requests pre-encoded once and answers parsed in C without the GIL, for the drivers that hand it
their request templates (rmq's remoting, Redis's RESP); and ``python``, ``_drive`` here, its twin,
for every driver (NATS has only this one). A figure against redis-benchmark needs a generator of
the same cost, a C one: the Python loop's own CPU per message is what a 1-in-flight figure measured.
``LoadSpec.engine`` picks it (``RMQ_PERF_ENGINE`` sets its default; ``RMQ_NO_EXTENSIONS=1`` or an
unbuilt checkout makes it ``python``), ``engine_of(spec)`` says which one runs.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import os
import queue
import select
import socket
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

import numpy as np

from rmq.net.codec import encode
from rmq.perf.driver import (  # the loop's callers import these from here (``X as X``: re-exported)
    COMPILED_REMOTING,
    COMPILED_RESP,
    ENGINE_C,
    ENGINE_PYTHON,
    Driver,
    LoadSpec,
)
from rmq.perf.driver import ENGINE_ENV as ENGINE_ENV
from rmq.perf.driver import ENGINES as ENGINES
from rmq.perf.driver import default_engine as default_engine
from rmq.perf.histogram import N_BUCKETS, Histogram
from rmq.perf.remoting import (
    BORN_MARK,
    OPAQUE_BASE,
    OPAQUE_SPAN,
    FrameTemplate,
    answer_code,
    answer_opaque,
    marked_pull,
    pull_request,
    record_count,
    send_request,
    take_answers,
    take_frames,
)
from rmq.protocol.codes import ResponseCode

SATURATED_SHARE = 0.9
# An answer still missing this long after the last send counts as failed with "timeout".
DRAIN_TIMEOUT = 5.0
FAIL_TIMEOUT = "timeout"
FAIL_CONNECTION = "connection"
# a pull answered FOUND whose body is not whole stored records (the compiled loop's BAD_RECORDS)
FAIL_RECORDS = "records"
# Codes a RocketMQ producer counts as "Send Failed" (no answer) rather than "Response Failed".
SEND_FAILURES = (FAIL_TIMEOUT, FAIL_CONNECTION)


@dataclasses.dataclass
class IntervalReport:
    """One interval of one or all workers."""

    index: int
    sent: int = 0
    acked: int = 0
    failed: Counter[str] = dataclasses.field(default_factory=Counter)
    histogram: Histogram = dataclasses.field(default_factory=Histogram)
    cpu_s: float = 0.0
    reports: int = 0
    wake_late_max_s: float = 0.0
    # open loop: how long after it could go out (due, and a slot of the in-flight window free) each
    # message's request went out: the generator's lateness, a part of ``histogram``'s latency that
    # is not the broker's
    send_delay: Histogram = dataclasses.field(default_factory=Histogram)

    def merge(self, other: IntervalReport) -> None:
        self.wake_late_max_s = max(self.wake_late_max_s, other.wake_late_max_s)
        self.send_delay.merge(other.send_delay)
        self.sent += other.sent
        self.acked += other.acked
        self.failed.update(other.failed)
        self.histogram.merge(other.histogram)
        self.cpu_s += other.cpu_s
        self.reports += other.reports


class RmqDriver(Driver):
    """rmq's (RocketMQ's) remoting protocol: send frames over the topic's queues in turn, answers
    matched by opaque."""

    keyed = True
    compiled = COMPILED_REMOTING

    def __init__(self, spec: LoadSpec, worker: int):
        super().__init__(spec, worker)
        body = b"x" * spec.size
        self.templates = [
            FrameTemplate(send_request(spec.topic, q, body, spec.batch, spec.tags, BORN_MARK))
            for q in range(spec.queues)
        ]
        self.seq = worker  # workers start on different queues
        self.buffer = bytearray()

    def requests(self, n: int) -> tuple[bytes, list[int]]:
        # As lean as RedisDriver's: the burst's frames joined from their templates' pieces in one
        # copy, so that the generator's CPU per request (it shares the machine with the broker)
        # is not what tells the two apart.
        keys = []
        parts: list[bytes] = []
        templates = self.templates
        born = b"%d" % int(time.time() * 1000)
        seq = self.seq
        for _ in range(n):
            seq += 1
            opaque = OPAQUE_BASE + seq % OPAQUE_SPAN
            keys.append(opaque)
            parts += templates[seq % len(templates)].parts(opaque, born)
        self.seq = seq
        return b"".join(parts), keys

    def feed(self, data: bytes) -> list[tuple[int, str | None, int]]:
        self.buffer += data
        batch = self.spec.batch
        return [
            (opaque, None if code == ResponseCode.SUCCESS else str(code), batch)
            for opaque, code in take_answers(self.buffer)
        ]

    def compiled_requests(self) -> list[tuple[bytes, int, int]]:
        # the same turn as ``requests``: the request after seq goes to queue (seq + 1) % queues
        return [t.marked() for t in self.templates]


class RmqPullDriver(Driver):
    """rmq's PULL_MESSAGE of ``batch`` messages over the topic's queues in turn, each queue walked
    from 0 by ``batch`` and back to 0 before its max offset (``options["max_offsets"]``)."""

    keyed = True
    compiled = COMPILED_REMOTING

    def __init__(self, spec: LoadSpec, worker: int):
        super().__init__(spec, worker)
        self.limits = list(spec.options["max_offsets"])
        if len(self.limits) != spec.queues:
            raise ValueError(f"{len(self.limits)} max offsets for {spec.queues} queues: expected one per queue")
        self.cursors = [0] * spec.queues
        self.seq = worker
        self.buffer = bytearray()

    def requests(self, n: int) -> tuple[bytes, list[int]]:
        keys = []
        frames = []
        batch = self.spec.batch
        for _ in range(n):
            self.seq += 1
            q = self.seq % self.spec.queues
            offset = self.cursors[q]
            self.cursors[q] = offset + batch if offset + 2 * batch <= self.limits[q] else 0
            request = pull_request(self.spec.topic, q, offset, batch)
            request.opaque = OPAQUE_BASE + self.seq % OPAQUE_SPAN
            keys.append(request.opaque)
            frames.append(encode(request))
        return b"".join(frames), keys

    def feed(self, data: bytes) -> list[tuple[int, str | None, int]]:
        self.buffer += data
        out: list[tuple[int, str | None, int]] = []
        batch = self.spec.batch
        for header, body in take_frames(self.buffer):
            code, opaque = answer_code(header), answer_opaque(header)
            found = record_count(body) if code == ResponseCode.SUCCESS else 0
            if code != ResponseCode.SUCCESS:
                out.append((opaque, str(code), batch))
            elif found < 0:
                out.append((opaque, FAIL_RECORDS, batch))
            else:
                out.append((opaque, None, found))
        return out

    def compiled_requests(self) -> list[tuple[bytes, int, int]]:
        marked = [marked_pull(pull_request(self.spec.topic, q, 0, self.spec.batch)) for q in range(self.spec.queues)]
        return [(frame, opaque_at, -1) for frame, opaque_at, _offset_at in marked]

    def compiled_walk(self) -> tuple[list[int], list[int]] | None:
        marked = [marked_pull(pull_request(self.spec.topic, q, 0, self.spec.batch)) for q in range(self.spec.queues)]
        return [offset_at for _frame, _opaque_at, offset_at in marked], self.limits


def driver_class(system: str) -> type[Driver]:
    if system == "rmq":
        return RmqDriver
    if system == "rmq-pull":
        return RmqPullDriver
    from rmq.perf import peers  # the peers' drivers import this module

    return peers.driver_class(system)


def make_driver(spec: LoadSpec, worker: int) -> Driver:
    return driver_class(spec.system)(spec, worker)


def engine_of(spec: LoadSpec) -> str:
    """The engine that runs ``spec``: the one it asks for, or the Python loop for a driver the
    compiled one cannot drive."""
    if spec.engine == ENGINE_C and driver_class(spec.system).compiled is not None:
        return ENGINE_C
    return ENGINE_PYTHON


def _worker_main(spec: LoadSpec, worker: int, reports: Any, start: Any, go: Any) -> None:
    """One worker process: connect, say ready, wait for the common start, run, report."""
    try:
        driver = make_driver(spec, worker)
        sock = driver.connect()
    except Exception as e:  # the parent reports it and stops the run
        reports.put(("error", worker, f"{type(e).__name__}: {e}"))
        return
    reports.put(("ready", worker, None))
    if not go.wait(60):
        return
    drive = _drive_compiled if engine_of(spec) == ENGINE_C else _drive
    try:
        drive(spec, worker, driver, sock, start.value, reports)
    except Exception as e:
        reports.put(("error", worker, f"{type(e).__name__}: {e}"))
    finally:
        sock.close()
    reports.put(("done", worker, None))


def _drive(spec: LoadSpec, worker: int, driver: Driver, sock: socket.socket, t_warm: float, reports: Any) -> None:
    in_flight, rate = spec.share(worker)
    batch = spec.batch
    workers = spec.effective_workers
    period = batch / rate if rate > 0 else 0.0  # seconds between requests of this worker
    t0 = t_warm + spec.warmup  # recorded from here
    end = t0 + spec.duration
    interval = spec.interval
    n_intervals = spec.intervals
    sock.setblocking(False)
    answers = select.poll()
    answers.register(sock, select.POLLIN)
    time.sleep(max(0.0, t_warm - time.monotonic()))

    pending_keyed: dict[int, float] = {}  # key -> intended send time
    pending_fifo: deque[float] = deque()
    keyed = driver.keyed
    outstanding = 0
    next_due = t_warm  # open loop: when the next request is due
    index = 0  # the interval being recorded; -1 while warming up
    latencies: list[float] = []
    weights: list[int] = []  # the messages each latency counts for
    delays: list[float] = []  # open loop: how late each request due since t0 went out
    freed_at = 0.0  # when an answer last freed a slot of the full in-flight window
    sent = acked = 0
    failed: Counter[str] = Counter()
    cpu_mark = time.process_time()
    wake_by = t_warm  # when the last wait (first: the sleep above) should have ended at the latest
    late_max = 0.0

    def report(i: int) -> None:
        nonlocal sent, acked, failed, latencies, weights, delays, cpu_mark, late_max
        h = Histogram()
        if latencies:
            us = (np.asarray(latencies) * 1e6).astype(np.int64)
            h.record_us(np.repeat(us, weights))
        delay = Histogram()
        if delays:
            delay.record_us(np.repeat((np.asarray(delays) * 1e6).astype(np.int64), batch))
        cpu_mark = _put_interval(reports, worker, i, sent, acked, failed, h, cpu_mark, late_max, delay)
        late_max = 0.0
        sent = acked = 0
        failed = Counter()
        latencies = []
        weights = []
        delays = []

    while True:
        now = time.monotonic()
        if now - wake_by > late_max:
            late_max = now - wake_by
        recording = now >= t0
        while index < n_intervals - 1 and now >= t0 + (index + 1) * interval:
            report(index)
            index += 1
            if spec.profile:
                period = batch / (spec.rate_at(index) / workers)
        sending = now < end
        if sending:
            n = in_flight - outstanding
            if period and n > 0:
                due = int((now - next_due) / period) + 1 if now >= next_due else 0
                n = min(n, due)
            if n > 0:
                data, keys = driver.requests(n)
                if period:
                    due_times = [next_due + k * period for k in range(n)]
                    next_due += n * period
                    delays += [now - max(due, freed_at) for due in due_times if due >= t0]
                else:
                    due_times = [now] * n
                if keyed:
                    pending_keyed.update(zip(keys, due_times, strict=True))
                else:
                    pending_fifo.extend(due_times)
                try:
                    _send_all(sock, data)
                except OSError:
                    failed[FAIL_CONNECTION] += n * batch
                    break
                outstanding += n
                if now >= t0:
                    sent += n * batch
        elif outstanding == 0 or now >= end + DRAIN_TIMEOUT:
            break
        # wait for answers, or until the next request is due / the interval ends
        wake = t0 + (index + 1) * interval if recording else t0
        if sending and period and outstanding < in_flight:
            wake = min(wake, next_due)
        timeout = max(0.0, min(wake - now, 0.05))
        wake_by = now + timeout
        if outstanding == 0:
            time.sleep(timeout)
            continue
        if not _wait_readable(answers, timeout):
            continue
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            failed[FAIL_CONNECTION] += outstanding * batch
            outstanding = 0
            break
        answered = time.monotonic()
        for key, failure, messages in driver.feed(data):
            intended: float | None = pending_keyed.pop(key, None) if keyed else pending_fifo.popleft()
            if outstanding == in_flight:  # a request held back by the full window may go now
                freed_at = answered
            outstanding -= 1
            if intended is None or intended < t0:
                continue  # an answer to a warm-up request: not recorded
            if failure is None:
                acked += messages
                latencies.append(answered - intended)
                weights.append(messages)
            else:
                failed[failure] += messages
    if outstanding:
        failed[FAIL_TIMEOUT] += outstanding * batch
    report(index)


def _put_interval(
    reports: Any, worker: int, i: int, sent: int, acked: int, failed: Counter[str], h: Histogram, cpu_mark: float,
    late_max: float, delay: Histogram,
) -> float:  # fmt: skip
    """Hand interval ``i`` to the parent, with the CPU used since ``cpu_mark``; the new mark."""
    cpu = time.process_time()
    payload = (i, sent, acked, dict(failed), h.to_json(), cpu - cpu_mark, late_max, delay.to_json())
    reports.put(("interval", worker, payload))
    return cpu


def _drive_compiled(
    spec: LoadSpec, worker: int, driver: Driver, sock: socket.socket, t_warm: float, reports: Any
) -> None:
    """``_drive``'s twin: the compiled loop runs each interval without the GIL, Python reports."""
    from rmq.perf import _loadgen

    in_flight, rate = spec.share(worker)
    t0 = t_warm + spec.warmup
    frames, opaque_at, born_at = zip(*driver.compiled_requests(), strict=True)
    protocol = {COMPILED_REMOTING: _loadgen.REMOTING, COMPILED_RESP: _loadgen.RESP}[driver.compiled or ""]
    walk = driver.compiled_walk()
    counts = np.zeros(N_BUCKETS, dtype=np.int64)
    delay_counts = np.zeros(N_BUCKETS, dtype=np.int64)
    sock.setblocking(False)
    loop = _loadgen.Loop(
        sock.fileno(), protocol, list(frames), list(opaque_at), list(born_at),
        in_flight, spec.batch / rate if rate > 0 else 0.0, spec.batch, worker, t_warm, t0, t0 + spec.duration,
        DRAIN_TIMEOUT, counts, OPAQUE_BASE, OPAQUE_SPAN, walk[0] if walk else None, walk[1] if walk else None,
        delay_counts,
    )  # fmt: skip
    time.sleep(max(0.0, t_warm - time.monotonic()))
    cpu_mark = time.process_time()

    def report(i: int, timed_out: int = 0) -> None:
        nonlocal cpu_mark
        sent, acked, failures, lost, late_max = loop.take()
        failed = Counter(failures)
        if lost:
            failed[FAIL_CONNECTION] += lost
        if timed_out:
            failed[FAIL_TIMEOUT] += timed_out
        h = Histogram(counts.copy())
        counts[:] = 0
        delay = Histogram(delay_counts.copy())
        delay_counts[:] = 0
        cpu_mark = _put_interval(reports, worker, i, sent, acked, failed, h, cpu_mark, late_max, delay)

    index = 0
    while True:
        if spec.profile:
            loop.set_period(spec.batch / (spec.rate_at(index) / spec.effective_workers))
        stop = t0 + (index + 1) * spec.interval if index < spec.intervals - 1 else math.inf
        if loop.run(stop) != _loadgen.INTERVAL_END:
            break
        report(index)
        index += 1
    report(index, loop.outstanding * spec.batch)


# poll, not select, waits for the socket: select() refuses a descriptor numbered 1024 or more
def _wait_readable(poller: select.poll, timeout: float) -> bool:
    """Whether the socket ``poller`` watches became readable within ``timeout`` seconds. poll
    takes whole milliseconds (select took microseconds): it waits for the whole ones and the rest
    is slept, so that a request falls due on time as with the compiled loop's ppoll (an answer that
    comes in that rest, under a millisecond, is read at its end)."""
    whole_ms = int(timeout * 1000)
    if poller.poll(whole_ms):
        return True
    rest = timeout - whole_ms / 1000
    if rest <= 0:
        return False
    time.sleep(rest)
    return bool(poller.poll(0))


def _send_all(sock: socket.socket, data: bytes) -> None:
    """sendall on a non-blocking socket: wait for room instead of failing."""
    view = memoryview(data)
    room: select.poll | None = None
    while view:
        try:
            sent = sock.send(view)
        except BlockingIOError:
            if room is None:
                room = select.poll()
                room.register(sock, select.POLLOUT)
            room.poll(1000)
            continue
        view = view[sent:]


class LoadError(RuntimeError):
    """A worker could not connect or failed while running."""


def run_load(
    spec: LoadSpec,
    on_interval: Callable[[IntervalReport, float, float], None],
    on_start: Callable[[], None] | None = None,
) -> IntervalReport:
    """Run ``spec`` in worker processes; ``on_start()`` when the warm-up is over and recording
    starts, ``on_interval(report, t_start, t_end)`` for each interval of all workers merged (``t_*``
    Unix seconds) as soon as every worker reported it; the whole run merged at the end (its
    ``index`` is -1)."""
    ctx = mp.get_context("spawn")
    reports = ctx.Queue()
    start = ctx.Value("d", 0.0)
    go = ctx.Event()
    workers = [
        ctx.Process(target=_worker_main, args=(spec, w, reports, start, go), name=f"rmq-perf-worker-{w}", daemon=True)
        for w in range(spec.effective_workers)
    ]
    for p in workers:
        p.start()
    total = IntervalReport(-1)
    try:
        ready = 0
        while ready < len(workers):
            kind, worker, payload = reports.get(timeout=60)
            if kind == "error":
                raise LoadError(f"worker {worker}: {payload}")
            ready += 1
        t_warm = time.monotonic() + 0.05
        wall_offset = time.time() - time.monotonic()
        start.value = t_warm
        go.set()
        t0 = t_warm + spec.warmup
        if on_start is not None:
            time.sleep(max(0.0, t0 - time.monotonic()))
            on_start()
        merged: dict[int, IntervalReport] = {}
        done = 0
        emitted = 0
        deadline = t0 + spec.duration + DRAIN_TIMEOUT + 30
        while done < len(workers):
            try:
                kind, worker, payload = reports.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise LoadError("workers did not finish in time") from None
            if kind == "error":
                raise LoadError(f"worker {worker}: {payload}")
            if kind == "done":
                done += 1
                continue
            i, sent, acked, failed, histogram, cpu_s, late_s, delay = payload
            part = IntervalReport(
                i, sent, acked, Counter(failed), Histogram.from_json(histogram), cpu_s, 1, late_s,
                Histogram.from_json(delay),
            )  # fmt: skip
            merged.setdefault(i, IntervalReport(i)).merge(part)
            while emitted in merged and merged[emitted].reports == len(workers):
                r = merged.pop(emitted)
                t_start = wall_offset + t0 + emitted * spec.interval
                t_end = wall_offset + (
                    t0 + (emitted + 1) * spec.interval if emitted < spec.intervals - 1 else time.monotonic()
                )
                on_interval(r, t_start, t_end)
                total.merge(r)
                emitted += 1
        for i in sorted(merged):  # a worker that stopped early left intervals the others reported
            r = merged[i]
            on_interval(r, wall_offset + t0 + i * spec.interval, wall_offset + t0 + (i + 1) * spec.interval)
            total.merge(r)
    finally:
        go.set()
        for p in workers:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    return total


def generator_fields(
    cpu_s: float,
    seconds: float,
    processes: int,
    wake_late_max_s: float = 0.0,
    acked: int = 0,
    engine: str | None = None,
) -> dict[str, Any]:
    """The perf log's ``generator`` object: CPU % (100 = one core), whether it hit the ceiling, its
    latest wake-up (ms), its CPU microseconds per acked message (None when none was) and its engine."""
    cpu_pct = 100.0 * cpu_s / seconds if seconds > 0 else 0.0
    cores = min(processes, os.cpu_count() or 1)
    fields: dict[str, Any] = {
        "cpu_pct": round(cpu_pct, 1),
        "processes": processes,
        "saturated": cpu_pct >= SATURATED_SHARE * 100 * cores,
        "wake_late_max_ms": round(wake_late_max_s * 1000.0, 3),
        "cpu_us_per_msg": round(cpu_s * 1e6 / acked, 3) if acked else None,
    }
    if engine is not None:
        fields["engine"] = engine
    return fields
