"""Broker benchmarks: 1 KiB sends per second against a real ``rmq-broker`` process, with 1,
16 and 64 requests in flight, single (SEND_MESSAGE_V2) and batched (SEND_BATCH_MESSAGE, 32 per
request), under ASYNC_FLUSH and SYNC_FLUSH; then pull throughput (PULL_MESSAGE, 32 per pull).

    PYTHONPATH=src python perf/bench_broker.py [--seconds 3] [--repeat 3] [--flush ASYNC_FLUSH,SYNC_FLUSH] [--json]
    PYTHONPATH=src python perf/bench_broker.py --roles standalone,async_master,sync_master

``--roles`` compares replication roles instead (each ASYNC_FLUSH; a master runs with a slave
process on a store of its own): single and batched sends at the given depths, the runs of the
roles interleaved (role A, B, C, A, B, C, ...) so that a drift of the machine hits all alike; for
masters, the replication lag under that load, sampled from both brokers' commitLogMaxOffset
(bytes behind, and ms from when the master reached an offset until the slave did: p50 / p99).

The load comes from rmq-perf's compiled generator (``rmq.perf._loadgen``, ``--engine c``, the
default): one connection, frames encoded once with only their opaque (and a pull's queueOffset)
written per request, answers parsed in C without the GIL, so that the figures measure the broker
and not a Python client; only answers with code 0 count, a pull's messages counted from the
records in its answer. ``--engine python`` uses the older pipelined client on a raw socket
(``rmq.perf.remoting.Pipeline``). The generator and the frame templates always come from one tree,
``$RMQ_BENCH_GENERATOR_SRC`` (a ``src`` dir; perf/compare_revisions.py points it at its head
build) or else this script's own checkout, never from the build under test: a revision from
before the generator is measured with the same one. Each figure is the median of ``--repeat``
runs, on a broker and store of its own (the previous figure's removed first), the pulls on one
filled for them. For scale: Redis Streams with fsync on every write and a 16-deep pipeline takes ~136,000 1 KiB
messages/s on the reference machine. ``--json`` prints the figures as one object for
perf/compare_revisions.py (see perf/report.py).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib.machinery
import importlib.util
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
from report import JSON_HELP, Report

from rmq.net.codec import RemotingCommand, encode

try:
    from rmq.protocol.codes import RequestCode, ResponseCode
except ImportError:  # a build from before rmq.protocol (e78e7a7), as perf/compare_revisions.py may measure
    from rmq.net.codes import RequestCode, ResponseCode

# the src dir the load generator and its frame templates come from (see the docstring)
GENERATOR_ENV = "RMQ_BENCH_GENERATOR_SRC"
GENERATOR_SRC = os.environ.get(GENERATOR_ENV) or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
ENGINE_C = "c"
ENGINE_PYTHON = "python"


def _generator_module(name: str, filename: str | None = None):
    """``rmq.perf.<name>`` of GENERATOR_SRC, loaded from its file whatever build ``rmq`` is; None
    when that tree has no such module (an extension not built there)."""
    directory = os.path.join(GENERATOR_SRC, "rmq", "perf")
    if filename is None:
        paths = [
            p for suffix in importlib.machinery.EXTENSION_SUFFIXES for p in glob.glob(f"{directory}/{name}{suffix}")
        ]
        if not paths:
            return None
        spec = importlib.util.spec_from_file_location(
            f"rmq.perf.{name}", paths[0], loader=importlib.machinery.ExtensionFileLoader(f"rmq.perf.{name}", paths[0])
        )
    else:
        spec = importlib.util.spec_from_file_location(f"rmq_bench_{name}", os.path.join(directory, filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _protocol_module_of_generator_tree(name: str) -> None:
    """``rmq.protocol.<name>`` from GENERATOR_SRC when the build measured has none (older than it),
    so that the generator tree's modules, which import it, load against that build."""
    try:
        importlib.import_module(f"rmq.protocol.{name}")
    except ImportError:
        path = os.path.join(GENERATOR_SRC, "rmq", "protocol", f"{name}.py")
        spec = importlib.util.spec_from_file_location(f"rmq.protocol.{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)


_protocol_module_of_generator_tree("request_flags")  # rmq.perf.remoting's pull flags (since constants26)
_remoting = _generator_module("remoting", "remoting.py")
_loadgen = _generator_module("_loadgen")
# the process harness of the same tree: it starts the brokers of builds older than it too
procs = _generator_module("procs", "procs.py")
free_port, stop_process, wait_for_port = procs.free_port, procs.stop_process, procs.wait_for_port
Pipeline, send_request, pull_request = _remoting.Pipeline, _remoting.send_request, _remoting.pull_request
# which one measures: --engine, or what a script importing sends_per_second gets
ENGINE = ENGINE_C if _loadgen is not None else ENGINE_PYTHON
# answers still missing this long after the last send are not waited for
DRAIN_SECONDS = 5.0

TOPIC = "BenchTopic"
QUEUES = 4
BODY = b"x" * 1024
BATCH = 32
PULL_BATCH = 32


def send_frame(queue_id: int, batch: bool) -> bytes:
    return encode(send_request(TOPIC, queue_id, BODY, BATCH if batch else 1, tags="bench"))


def generated_per_second(
    port: int, requests: list[tuple[bytes, int, int]], batch: int, in_flight: int, seconds: float, walk=()
) -> float:
    """Messages/s acked to the compiled generator keeping ``in_flight`` of ``requests`` (in turn)
    outstanding for ``seconds``; ``walk``: a pull's (offsets' places, max offsets)."""
    frames, opaque_at, born_at = (list(column) for column in zip(*requests, strict=True))
    counts = np.zeros(_loadgen.LAYOUT["N_BUCKETS"], dtype=np.int64)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        now = time.monotonic()
        loop = _loadgen.Loop(
            sock.fileno(), _loadgen.REMOTING, frames, opaque_at, born_at, in_flight, 0.0, batch, 0, now, now,
            now + seconds, DRAIN_SECONDS, counts, _remoting.OPAQUE_BASE, _remoting.OPAQUE_SPAN, *walk,
        )  # fmt: skip
        status = loop.run(math.inf)
        _sent, acked, failures, lost, _late = loop.take()
    if status != _loadgen.DONE or lost:
        raise ConnectionError(f"the broker closed the connection ({acked} messages acked, {lost} lost)")
    return acked / seconds


def sends_per_second(port: int, in_flight: int, batch: bool, seconds: float) -> float:
    if ENGINE == ENGINE_C:
        templates = [
            _remoting.FrameTemplate(send_request(TOPIC, q, BODY, BATCH if batch else 1, "bench", _remoting.BORN_MARK))
            for q in range(QUEUES)
        ]
        # the Python sender's turn: its first frame goes to queue 1
        return generated_per_second(port, [t.marked() for t in templates], BATCH if batch else 1, in_flight, seconds)
    frames = [send_frame(q, batch) for q in range(QUEUES)]
    counter = [0]

    def next_frame() -> bytes:
        counter[0] += 1
        return frames[counter[0] % QUEUES]

    pipe = Pipeline("127.0.0.1", port)
    try:
        started = time.perf_counter()
        ok = pipe.run(next_frame, in_flight, seconds)
        elapsed = time.perf_counter() - started
    finally:
        pipe.close()
    return ok * (BATCH if batch else 1) / elapsed


def pulls_per_second(port: int, in_flight: int, seconds: float, max_offsets: list[int]) -> float:
    """Messages/s pulled: pipelined pulls of 32 walking each queue from its start (wrapping)."""
    if ENGINE == ENGINE_C:
        marked = [_remoting.marked_pull(pull_request(TOPIC, q, 0, PULL_BATCH)) for q in range(QUEUES)]
        requests = [(frame, opaque_at, -1) for frame, opaque_at, _ in marked]
        walk = ([offset_at for _, _, offset_at in marked], list(max_offsets))
        return generated_per_second(port, requests, PULL_BATCH, in_flight, seconds, walk)
    cursors = [0] * QUEUES
    turn = [0]

    def next_frame() -> bytes:
        q = turn[0] % QUEUES
        turn[0] += 1
        offset = cursors[q]
        cursors[q] = offset + PULL_BATCH if offset + 2 * PULL_BATCH <= max_offsets[q] else 0
        return encode(pull_request(TOPIC, q, offset, PULL_BATCH))

    record_size = None

    def on_answer(header: bytes, body: bytes) -> int:
        nonlocal record_size
        if b'"code":%d,' % ResponseCode.SUCCESS not in header or not body:
            return 0
        if record_size is None:
            record_size = int.from_bytes(body[:4], "big")
        return len(body) // record_size

    pipe = Pipeline("127.0.0.1", port)
    try:
        started = time.perf_counter()
        ok = pipe.run(next_frame, in_flight, seconds, on_answer)
        elapsed = time.perf_counter() - started
    finally:
        pipe.close()
    return ok / elapsed


def admin(port: int, request: RemotingCommand, with_body: bool = False):
    """The answer's header as a dict (and its body, ``with_body``)."""
    pipe = Pipeline("127.0.0.1", port)
    try:
        pipe.sock.sendall(encode(request))
        ((header, body),) = pipe.answers() or pipe.answers()
        return (orjson.loads(header), body) if with_body else orjson.loads(header)
    finally:
        pipe.close()


def flush_rounds(port: int) -> int | None:
    """CommitLog msyncs so far (SYNC_FLUSH: group commit rounds), from GET_BROKER_RUNTIME_INFO; None
    from a broker that does not count them (before 46e21b4), so that its sends are still measured."""
    _header, body = admin(port, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), with_body=True)
    rounds = orjson.loads(body)["table"].get("commitLogFlushRounds")
    return None if rounds is None else int(rounds)


def create_topic(port: int, topic: str, queues: int = QUEUES) -> None:
    answer = admin(
        port,
        RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": topic,
                "readQueueNums": str(queues),
                "writeQueueNums": str(queues),
                "perm": "6",
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": "0",
                "order": "false",
            },
        ),
    )
    assert answer["code"] == 0, answer


# --pin: the CPUs a master (or standalone) broker runs on, and the CPUs of everything else (its slave
# and this load generator); None runs every process where the kernel puts it.
PIN: tuple[set[int], set[int]] | None = None
# every broker process started, by its client port (bench_replication_cost.py --cpu reads their CPU time)
PROCESSES: dict[int, subprocess.Popen] = {}


PIN_HELP = (
    "run the master (or standalone broker) alone on CPU 0 and its slave and this load generator on "
    "the other CPUs, as a slave on a machine of its own would be; without it the kernel places them all"
)


def pin_master(parser: argparse.ArgumentParser) -> None:
    """--pin: brokers started from now on run on the first CPU (a slave on the others), this process
    and its children (load, a null slave) on the others."""
    global PIN
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        parser.error("--pin needs at least 2 CPUs")
    PIN = ({cpus[0]}, set(cpus[1:]))
    os.sched_setaffinity(0, PIN[1])


def start_broker(
    store: str, flush: str, env: dict[str, str] | None = None, stderr=None, **more: str
) -> tuple[subprocess.Popen, int, int]:
    """An ``rmq-broker`` process (embedded name server) holding TOPIC, once routed: (process, port,
    name server port). ``more``: its settings; ``env``: what its environment has besides ours
    (``PYTHONPATH`` of another build); ``stderr``: where its stderr goes (default: ours)."""
    settings = procs.broker_settings(Path(store), small_files=False, **{"flushDiskType": flush, **more})
    cpus = None if PIN is None else PIN[1] if more.get("brokerRole") == "SLAVE" else PIN[0]
    processes = procs.Processes()

    def spawn(*args: str, **popen) -> subprocess.Popen:
        proc = processes.spawn(*args, **popen)
        if cpus is not None:  # before its threads start: they inherit it
            os.sched_setaffinity(proc.pid, cpus)
        return proc

    try:
        proc, _addr = procs.start_broker_process(
            spawn, settings, extra_args=("--log-level", "WARNING"), env=env, stderr=stderr
        )
        port = int(settings["listenPort"])
        PROCESSES[port] = proc
        if more.get("brokerRole") != "SLAVE":
            create_topic(port, TOPIC)
    except BaseException:  # a signal while it starts, too: the caller has no process to stop yet
        processes.stop_all()
        raise
    return proc, port, int(settings["namesrvListenPort"])


def max_phy_offset(port: int) -> int:
    _header, body = admin(port, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), with_body=True)
    return int(orjson.loads(body)["table"]["commitLogMaxOffset"])


@contextlib.contextmanager
def running_role(role: str, **more: str) -> Iterator[tuple[int, int | None]]:
    """A broker of ``role`` (standalone, async_master, sync_master) on ASYNC_FLUSH, a master with a
    slave process (its own store, registered with the master's embedded name server) that has caught
    up: (port, slave port or None). ``more``: settings of both brokers."""
    roots, procs = [], []
    try:
        roots.append(tempfile.mkdtemp(prefix="rmq-bench-broker-"))
        broker_role = {"standalone": "ASYNC_MASTER"}.get(role, role.upper())
        proc, port, namesrv_port = start_broker(roots[0], "ASYNC_FLUSH", brokerRole=broker_role, **more)
        procs.append(proc)
        slave_port = None
        if role != "standalone":
            roots.append(tempfile.mkdtemp(prefix="rmq-bench-slave-"))
            slave, slave_port, _ = start_broker(
                roots[1],
                "ASYNC_FLUSH",
                brokerRole="SLAVE",
                brokerId="1",
                namesrvAddr=f"127.0.0.1:{namesrv_port}",
                **more,
            )
            procs.append(slave)
            deadline = time.monotonic() + 30
            while max_phy_offset(slave_port) < max_phy_offset(port) or max_phy_offset(port) == 0:
                if time.monotonic() > deadline:
                    raise TimeoutError("the slave did not catch up")
                if max_phy_offset(port) == 0 or role == "sync_master":  # SYNC_MASTER: until a slave acks
                    sends_per_second(port, 1, False, 0.05)
                time.sleep(0.05)
        yield port, slave_port
    finally:
        for proc in reversed(procs):
            stop_process(proc)
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


class LagSampler:
    """Samples a master's and its slave's commitLogMaxOffset on a thread while a run goes on."""

    def __init__(self, port: int, slave_port: int):
        self.port, self.slave_port = port, slave_port
        self.master: list[tuple[float, int]] = []
        self.slave: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-lag-sampler", daemon=True)

    def __enter__(self) -> LagSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.master.append((time.perf_counter(), max_phy_offset(self.port)))
            self.slave.append((time.perf_counter(), max_phy_offset(self.slave_port)))

    def lag_bytes(self) -> list[int]:
        return [m - s for (_, m), (_, s) in zip(self.master, self.slave, strict=False)]

    def lag_ms(self) -> list[float]:
        """For each master sample: ms until the slave's offset reached it (samples it never reached skipped)."""
        lags, j = [], 0
        for t, offset in self.master:
            while j < len(self.slave) and (self.slave[j][1] < offset or self.slave[j][0] < t):
                j += 1
            if j == len(self.slave):
                break
            lags.append((self.slave[j][0] - t) * 1000)
        return lags


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def compare_roles(args, report: Report, roles: list[str], depths: list[int]) -> None:
    """Sends per second of each role, runs interleaved; replication lag of the masters."""
    with contextlib.ExitStack() as stack:
        brokers = {role: stack.enter_context(running_role(role)) for role in roles}
        for batch in (False, True):
            kind = f"batch {BATCH}" if batch else "single"
            for depth in depths:
                rates: dict[str, list[float]] = {role: [] for role in roles}
                lags: dict[str, tuple[list[int], list[float]]] = {role: ([], []) for role in roles}
                for _ in range(args.repeat):
                    for role in roles:
                        rates[role].append(sends_per_second(brokers[role][0], depth, batch, args.seconds))
                # the lag from runs of their own: the sampler's requests and thread would slow the
                # masters' runs above and not the standalone broker's
                for role in roles:
                    port, slave_port = brokers[role]
                    if slave_port is not None:
                        with LagSampler(port, slave_port) as sampler:
                            sends_per_second(port, depth, batch, args.seconds)
                        lags[role][0].extend(sampler.lag_bytes())
                        lags[role][1].extend(sampler.lag_ms())
                base = statistics.median(rates[roles[0]])
                for role in roles:
                    name = f"{role} send {kind} in flight {depth}"
                    rate = statistics.median(rates[role])
                    report.figure(name, rate, "msgs/s")
                    line = f"{role:13s} send {kind:8s} in flight {depth:3d}: {rate:12,.0f} msgs/s ({rate / base:.2f}x)"
                    lag_bytes, lag_ms = lags[role]
                    if lag_bytes:
                        p50, p99 = percentile(lag_ms, 50), percentile(lag_ms, 99)
                        report.figure(f"{name}, lag p50", p50, "ms")
                        report.figure(f"{name}, lag p99", p99, "ms")
                        line += (
                            f"  lag {statistics.median(lag_bytes):,.0f} B median, {max(lag_bytes):,} B max;"
                            f" {p50:.1f} / {p99:.1f} ms p50/p99"
                        )
                    report.line(line)


@contextlib.contextmanager
def running_broker(flush: str) -> Iterator[tuple[int, int]]:
    """``start_broker`` on a temporary store, stopped and removed on exit: (port, name server port)."""
    root = tempfile.mkdtemp(prefix="rmq-bench-broker-")
    try:
        proc, port, namesrv_port = start_broker(root, flush)
        try:
            yield port, namesrv_port
        finally:
            stop_process(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def median_of(repeat: int, fn, *args) -> float:
    """The median of `repeat` calls of fn(*args); arguments, not a closure, so a loop can pass its variables."""
    return statistics.median(fn(*args) for _ in range(repeat))


def exit_on_signal(signum: int, _frame) -> None:
    """SIGTERM and SIGINT end the run through SystemExit, so that every ``finally`` above stops its
    brokers and removes their stores (by default SIGTERM ends Python at once and orphans them). A
    second signal while that cleanup runs is ignored: ``stop_process`` bounds each stop."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def main() -> int:
    global ENGINE
    signal.signal(signal.SIGTERM, exit_on_signal)
    signal.signal(signal.SIGINT, exit_on_signal)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median is printed)")
    parser.add_argument("--flush", default="ASYNC_FLUSH,SYNC_FLUSH", help="flushDiskType values to run")
    parser.add_argument("--in-flight", default="1,16,64", help="requests in flight")
    parser.add_argument(
        "--roles", help="compare these roles instead (standalone,async_master,sync_master), ASYNC_FLUSH"
    )
    parser.add_argument("--pin", action="store_true", help=PIN_HELP)
    parser.add_argument(
        "--engine",
        choices=(ENGINE_C, ENGINE_PYTHON),
        default=ENGINE,
        help=f"the load: rmq-perf's compiled generator (from {GENERATOR_SRC}), or the Python pipeliner",
    )
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    args = parser.parse_args()
    if args.engine == ENGINE_C and _loadgen is None:
        parser.error(f"--engine c: no rmq/perf/_loadgen built in {GENERATOR_SRC} (setup.py build_ext --inplace there)")
    ENGINE = args.engine
    if args.pin:
        pin_master(parser)
    depths = [int(d) for d in args.in_flight.split(",")]
    report = Report(args.json)
    pinned = f", master on CPU {min(PIN[0])}, slave and load on {sorted(PIN[1])}" if PIN else ""
    report.line(f"1 KiB messages, {args.seconds:g} s runs, median of {args.repeat}{pinned}, load: {ENGINE} engine")
    if args.roles:
        with report.section("roles"):
            compare_roles(args, report, args.roles.split(","), [d for d in depths if d > 1] or depths)
        return report.finish()
    for flush in args.flush.split(","):
        with report.section(f"{flush} broker"):
            for batch in (False, True):
                for depth in depths:
                    kind = f"batch {BATCH}" if batch else "single  "
                    name = f"{flush} send {kind.strip()} in flight {depth}"
                    # each figure on a fresh broker and store, the last one's files removed first: a
                    # store grown by every figure before it measures the page cache (on this VM,
                    # batches fell from ~500K to ~190K msgs/s once ~5 GB had been written), not the broker
                    with report.section(name), running_broker(flush) as (port, _namesrv_port):
                        rounds_before, started = flush_rounds(port), time.perf_counter()
                        rates = [sends_per_second(port, depth, batch, args.seconds) for _ in range(args.repeat)]
                        rounds_after, elapsed = flush_rounds(port), time.perf_counter() - started
                        rounds = rounds_after - rounds_before if rounds_before is not None else 0
                        report.figure(name, statistics.median(rates), "msgs/s")
                        line = f"{flush:11s} send {kind} in flight {depth:3d}: {statistics.median(rates):12,.0f} msgs/s"
                        if flush == "SYNC_FLUSH" and rounds:
                            # over all the repeats: how often the disk was asked, and for how many messages
                            report.figure(f"{name}, flushes", rounds / elapsed, "flushes/s")
                            line += (
                                f"  ({rounds / elapsed:,.0f} flushes/s, "
                                f"{sum(rates) * args.seconds / rounds:.1f} msgs per flush)"
                            )
                        report.line(line)
            with running_broker(flush) as (port, _namesrv_port):
                # what the pulls read: batches for one run's length, as the send figures store them
                sends_per_second(port, max(depths), True, args.seconds)
                max_offsets = []
                for q in range(QUEUES):
                    answer = admin(
                        port, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(q)})
                    )
                    max_offsets.append(int(answer["extFields"]["offset"]))
                for depth in (1, 16):
                    name = f"{flush} pull 32 per request in flight {depth}"
                    with report.section(name):
                        rate = median_of(args.repeat, pulls_per_second, port, depth, args.seconds, max_offsets)
                        report.figure(name, rate, "msgs/s")
                        report.line(f"{flush:11s} pull 32 per request in flight {depth:3d}: {rate:12,.0f} msgs/s")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
